"""The upgrade baseline (tests/fixtures/baseline/): what the previous release synthesizes, kept as test data, so
tests/test_upgrade.py can hold the new code's output against it. The fixture's README says what is in it.

Refresh it at each release, from the git ref of the release before the one being made (its tag once one exists):

    python -m tests.baseline <ref> [--version X.Y.Z]

It copies the ref's golden output (tests/golden/, which that commit's own tests held equal to its synth), its
cdk.json, and the table of its config keys (tests/config_keys.py run against the ref's source); `--version` is the
release the ref is, so only the changelog's newer releases announce changes against it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.conftest import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "baseline"
INFO = "baseline.json"


def folder() -> Path:
    """The one baseline folder (named for its ref)."""
    (found,) = [p for p in FIXTURES.iterdir() if p.is_dir()]
    return found


def info() -> dict[str, str | None]:
    """{"commit": full sha, "version": the release it is, or None for an unreleased development line}."""
    data: dict[str, str | None] = json.loads((folder() / INFO).read_text())
    return data


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, check=True).stdout


def refresh(ref: str, version: str | None) -> Path:
    commit = _git("rev-parse", f"{ref}^{{commit}}").decode().strip()
    for old in FIXTURES.glob("*"):
        if old.is_dir():
            shutil.rmtree(old)
    target = FIXTURES / commit[:7]
    source = io.BytesIO(_git("archive", commit, "tests/golden", "src"))
    with tarfile.open(fileobj=source) as archive, tempfile.TemporaryDirectory() as tmp:
        archive.extractall(tmp, filter="data")
        shutil.copytree(Path(tmp) / "tests" / "golden", target / "golden")
        keys = subprocess.run(
            [sys.executable, str(REPO_ROOT / "tests" / "config_keys.py")],
            env={**os.environ, "PYTHONPATH": str(Path(tmp) / "src")},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    (target / "config-keys.json").write_text(keys)
    (target / "cdk.json").write_bytes(_git("show", f"{commit}:cdk.json"))
    (target / INFO).write_text(json.dumps({"commit": commit, "version": version}, indent=1) + "\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.baseline", description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", help="the previous release's tag or commit")
    parser.add_argument("--version", help="the release that ref is (omit for an unreleased development line)")
    args = parser.parse_args()
    print(f"wrote {refresh(args.ref, args.version)}")


if __name__ == "__main__":
    main()
