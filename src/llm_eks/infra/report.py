"""`python -m llm_eks.infra.report cdk.out`: where each environment's template and Kubernetes YAML landed."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _stacks(directory: Path) -> list[tuple[str, Path]]:
    """(stack name, template path) of every LlmEks-* stack in the assembly at `directory` and in its nested
    assemblies (a promotion pipeline's stages)."""
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    found = []
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        properties = artifact.get("properties", {})
        if artifact.get("type") == "aws:cloudformation:stack":
            name = properties.get("stackName", artifact_id)
            if name.startswith("LlmEks-"):
                found.append((name, directory / properties.get("templateFile", f"{artifact_id}.template.json")))
        elif artifact.get("type") == "cdk:cloud-assembly":
            found += _stacks(directory / properties["directoryName"])
    return found


def describe(outdir: Path) -> list[str]:
    """One block per LlmEks-* stack of the last synth: template path, size, resource count, review YAML files."""
    lines = []
    for stack, template_path in sorted(_stacks(outdir)):
        env = stack.removeprefix("LlmEks-")
        template = json.loads(template_path.read_text())
        manifests = outdir / "manifests" / env
        yaml_files = sorted(manifests.glob("*.yaml")) if manifests.is_dir() else []
        lines.append(
            f"{env}: {template_path} ({template_path.stat().st_size / 1024:.0f} KiB, "
            f"{len(template.get('Resources', {}))} resources)"
        )
        if env != "pipeline":
            lines.append(f"{' ' * len(env)}  {manifests}/ ({len(yaml_files)} YAML files)")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    outdir = Path(args[0] if args else "cdk.out")
    lines = describe(outdir)
    if not lines:
        print(f"llm-eks: error: no LlmEks-* templates in {outdir}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
