"""The wheelhouse the verify runners install from (llm_eks.infra.wheelhouse): its hash-pinned requirements come from
pip's own resolution against the wheelhouse alone, and the runner's install (`pip install --no-index
--require-hashes`, constructs/verify_runner.py) takes exactly those wheels and refuses any other."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llm_eks.constructs.verify_runner import build_spec
from llm_eks.infra.wheelhouse import constraints, pin


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), extra: str = "") -> Path:
    """A minimal pure-Python wheel (PEP 427): a module, METADATA, WHEEL and RECORD."""
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": f"VERSION = {version!r}\n{extra}",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{m},,\n" for m in [*files, f"{info}/RECORD"]))
    return path


def _install(wheelhouse: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """The runner's install command (its buildspec's), into `target`."""
    (install,) = [c for c in build_spec()["phases"]["install"]["commands"] if "pip install" in c]
    args = install.split("bin/pip install ", 1)[1].split()
    args = [a.replace("wheelhouse", str(wheelhouse)) for a in args]
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--target", str(target), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_runner_installs_the_pinned_wheels_and_refuses_another(tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    _wheel(wheelhouse, "demo-app", "1.0", ("demo-lib==2.0",))
    lib = _wheel(wheelhouse, "demo-lib", "2.0")
    lines = pin(wheelhouse, "demo-app==1.0")
    # pip resolved the dependency from the wheelhouse alone; each line pins a version and the wheel's hash.
    assert [line.split(" --hash=sha256:")[0] for line in lines] == ["demo-app==1.0", "demo-lib==2.0"]
    assert all(len(line.split("sha256:")[1]) == 64 for line in lines)
    assert (wheelhouse / "requirements.txt").read_text().splitlines() == lines
    done = _install(wheelhouse, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "demo_lib" / "__init__.py").read_text().startswith("VERSION = '2.0'")
    # The same name and version with other content (a tampered wheel): refused, nothing from an index.
    lib.unlink()
    _wheel(wheelhouse, "demo-lib", "2.0", extra="import os\n")
    done = _install(wheelhouse, tmp_path / "tampered")
    assert done.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE" in done.stderr


def test_a_wheelhouse_missing_a_dependency_fails_at_synth(tmp_path: Path) -> None:
    _wheel(tmp_path, "demo-app", "1.0", ("demo-missing==1.0",))
    with pytest.raises(SystemExit, match=re.escape("No matching distribution found for demo-missing==1.0")):
        pin(tmp_path, "demo-app==1.0")


def test_the_synth_environments_versions_are_the_constraints() -> None:
    frozen = "aws-cdk-lib==2.275.0\n-e git+https://x/llm-eks#egg=llm_eks\nllm_eks==0.1.0\nfoo @ file:///tmp/foo\nPyYAML==6.0.3\n"
    assert constraints(frozen) == ["aws-cdk-lib==2.275.0", "PyYAML==6.0.3"]
