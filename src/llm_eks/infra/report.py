"""`python -m llm_eks.infra.report cdk.out`: where each environment's template and Kubernetes YAML landed."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def describe(outdir: Path) -> list[str]:
    """One block per LlmEks-* stack of the last synth: template path, size, resource count, review YAML files."""
    manifest = json.loads((outdir / "manifest.json").read_text()) if (outdir / "manifest.json").exists() else {}
    stacks = sorted(
        name
        for name, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack" and name.startswith("LlmEks-")
    )
    lines = []
    for stack in stacks:
        template_path = outdir / f"{stack}.template.json"
        env = stack.removeprefix("LlmEks-")
        template = json.loads(template_path.read_text())
        manifests = outdir / "manifests" / env
        yaml_files = sorted(manifests.glob("*.yaml")) if manifests.is_dir() else []
        lines.append(
            f"{env}: {template_path} ({template_path.stat().st_size / 1024:.0f} KiB, "
            f"{len(template.get('Resources', {}))} resources)"
        )
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
