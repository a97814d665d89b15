"""What the default app synthesizes, as the golden files under tests/golden/ hold it: one template and one folder of
review YAML per environment. A refactoring must leave them unchanged; a change of output updates them on purpose
(`make golden`), so the reviewer of that change reads the difference in the golden files' diff. It rewrites the
fault matrix of docs/concepts/faults.md from the same output (docgen/faults).

Run as a module to rewrite them: `python -m tests.golden_output`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
# EKS Auto Mode's output (examples/auto_mode's environment), held the same way by tests/test_auto_mode_stack.py.
AUTO_MODE_GOLDEN = Path(__file__).parent / "golden_auto_mode"
AUTO_MODE_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "auto_mode"


def collect(outdir: Path, environments: tuple[str, ...]) -> dict[str, str]:
    """Relative golden path -> text, from a synth output folder."""
    files: dict[str, str] = {}
    for env in environments:
        template = json.loads((outdir / f"LlmEks-{env}.template.json").read_text())
        files[f"{env}/template.json"] = json.dumps(template, indent=1, sort_keys=True) + "\n"
        for path in sorted((outdir / "manifests" / env).glob("*.yaml")):
            files[f"{env}/manifests/{path.name}"] = path.read_text()
    return files


def main() -> None:
    from docgen import faults
    from tests.conftest import CDK_JSON, ENVIRONMENTS, _synth

    with tempfile.TemporaryDirectory() as tmp:
        error = _synth(Path(tmp) / "out")
        if error is not None:
            sys.exit(error)
        files = collect(Path(tmp) / "out", ENVIRONMENTS)
        # The fault matrix page's generated block follows the same objects (tests/test_fault_matrix.py).
        faults.write(Path(tmp) / "out", CDK_JSON["context"])
        context = json.loads((AUTO_MODE_EXAMPLE / "cdk.json").read_text())["context"]
        with contextlib.chdir(AUTO_MODE_EXAMPLE):
            error = _synth(Path(tmp) / "auto", context)
        if error is not None:
            sys.exit(error)
        auto_files = collect(Path(tmp) / "auto", tuple(context["environments"]))
    for folder, written in ((GOLDEN, files), (AUTO_MODE_GOLDEN, auto_files)):
        shutil.rmtree(folder, ignore_errors=True)
        for name, text in written.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        print(f"wrote {len(written)} golden files under {folder}")


if __name__ == "__main__":
    main()
