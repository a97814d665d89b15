"""`python -m llm_eks.infra.wheelhouse DIR`: the wheelhouse a promotion pipeline's verify runners install llm-eks
from, built in the synth step (PipelineConfig.wheelhouse_command): llm-eks and every dependency it pins, each as a
wheel, and `DIR/requirements.txt` listing each of them as `name==version --hash=sha256:...`. The runner installs with
`pip install --no-index --require-hashes --find-links DIR -r DIR/requirements.txt` (constructs/verify_runner.py): no
package index at verify time, and a wheel that is not the one built here fails the install.

1. llm-eks itself: built from its source tree when it is installed from one (an editable or local install records
   its directory in PEP 610's direct_url.json), else the installed release from the index.
2. Its dependencies at the versions installed here (`pip freeze`, as constraints): the ones the tests just ran with.
3. pip resolves the install the runner will make against DIR alone (`--no-index --dry-run --report`, pip's JSON
   installation report): a wheelhouse missing anything fails here, at synth, not at verify time; that report gives
   each distribution's name and version, and the hash is of its wheel file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

DISTRIBUTION = "llm-eks"
REQUIREMENTS = "requirements.txt"


def _pip(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"llm-eks wheelhouse: pip {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _file(url: str) -> Path:
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ValueError(f"{url} is not a file in the wheelhouse")
    return Path(unquote(parsed.path))


def requirements(report: Mapping[str, Any]) -> list[str]:
    """`name==version --hash=sha256:<digest>` for each distribution pip's installation report (version 1) would
    install, the digest that of its wheel file in the wheelhouse; sorted by name."""
    lines = []
    for item in report.get("install") or ():
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        digest = hashlib.sha256(_file(item["download_info"]["url"]).read_bytes()).hexdigest()
        lines.append(f"{name}=={version} --hash=sha256:{digest}")
    return sorted(lines, key=str.lower)


def pin(directory: Path, requirement: str) -> list[str]:
    """What `pip install --no-index --find-links directory requirement` installs, as hash-pinned requirement lines;
    written to directory/requirements.txt."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        _pip(
            "install", "--quiet", "--dry-run", "--ignore-installed", "--no-index", "--find-links", str(directory),
            "--report", str(report), requirement,
        )  # fmt: skip
        lines = requirements(json.loads(report.read_text()))
    (directory / REQUIREMENTS).write_text("".join(f"{line}\n" for line in lines))
    return lines


def source() -> str:
    """What to build llm-eks from: its source directory when installed from one, else `llm-eks==<version>`."""
    dist = metadata.distribution(DISTRIBUTION)
    direct = json.loads(dist.read_text("direct_url.json") or "null")
    if isinstance(direct, dict) and str(direct.get("url", "")).startswith("file:"):
        return str(_file(direct["url"]))
    return f"{DISTRIBUTION}=={dist.version}"


def constraints(frozen: str) -> list[str]:
    """`pip freeze` lines usable as constraints: name==version pins (not editable or direct-URL installs), llm-eks
    itself left out (it is built)."""
    out = []
    for line in frozen.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e")) or " @ " in line or "==" not in line:
            continue
        if line.split("==", 1)[0].strip().lower().replace("_", "-") == DISTRIBUTION:
            continue
        out.append(line)
    return out


def build(directory: Path) -> list[str]:
    """Build the wheelhouse into `directory` and pin it (see the module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        pinned = Path(scratch) / "constraints.txt"
        pinned.write_text("".join(f"{line}\n" for line in constraints(_pip("freeze", "--exclude-editable"))))
        _pip("wheel", "--quiet", "--wheel-dir", str(directory), "--constraint", str(pinned), source())
    return pin(directory, f"{DISTRIBUTION}=={metadata.version(DISTRIBUTION)}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m llm_eks.infra.wheelhouse DIR", file=sys.stderr)
        return 2
    lines = build(Path(args[0]))
    print(f"llm-eks wheelhouse: {len(lines)} wheels pinned in {Path(args[0]) / REQUIREMENTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
