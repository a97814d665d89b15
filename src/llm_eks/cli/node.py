"""The Node.js that jsii starts: commands that build charts or synthesize (manifests, verify, canary, rollback) check
it before the first `import aws_cdk`, so an end-of-life Node stops them with one line instead of jsii's banner.

jsii's Python runtime starts `JSII_NODE` when set, else the `node` first on PATH (jsii 1.142.0,
jsii/_kernel/providers/process.py, `ProcessProvider.start`). Its support table (@jsii/check-node's NodeRelease, as
bundled in that runtime) gives Node 22 end of life on 2027-04-30 and Node 24 on 2028-04-30; every older major is past
it, and from its end-of-life date on a major gets the banner on every start. `make setup` installs the Node 24 that
package.json pins and links it beside the virtual environment's Python, where it is preferred over PATH, so
`.venv/bin/llm-eks` runs on it with or without `source .venv/bin/activate`.

`python -m llm_eks.cli.node` runs the same check (make setup does): silent when the Node is supported, else the
one line on stderr and exit 1.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

from llm_eks.error_codes import E602
from llm_eks.errors import ConfigError

# jsii's supported majors and their end of life (see the module docstring); every older major is past it.
END_OF_LIFE = {22: datetime.date(2027, 4, 30), 24: datetime.date(2028, 4, 30)}
_BESIDE = "the virtual environment's"
_FIX = (
    "put Node 24 (or 22) first on PATH (in a clone, `make setup` installs it and `source .venv/bin/activate` puts "
    "it first) or set JSII_NODE to its path"
)


def jsii_node() -> tuple[str, str]:
    """The Node jsii will start and where it was found: JSII_NODE, the virtual environment's own, or PATH's."""
    if explicit := os.environ.get("JSII_NODE"):
        return explicit, "JSII_NODE"
    beside = Path(sys.executable).parent / "node"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside), _BESIDE
    found = shutil.which("node")
    if found is None:
        raise ConfigError(E602, f"node: not found on PATH; jsii runs the AWS CDK on Node.js: {_FIX}")
    return found, "first on PATH"


def end_of_life_error(version: str, where: str, today: datetime.date) -> str | None:
    """The one-line reason `version` (`v20.20.2`) is past jsii's end of life on `today`, or None when supported."""
    try:
        major = int(version.strip().lstrip("v").split(".")[0])
    except ValueError:
        return f"node ({where}) printed {version.strip()!r} for --version; {_FIX}"
    if major < min(END_OF_LIFE):
        return f"node {version.strip()} ({where}) is past its end of life and jsii no longer supports it; {_FIX}"
    end = END_OF_LIFE.get(major)
    if end is not None and today >= end:
        return f"node {version.strip()} ({where}) reached its end of life on {end.isoformat()}; {_FIX}"
    return None


def require_supported_node(today: datetime.date | None = None) -> None:
    """Raise ConfigError (one line) unless the Node jsii will start is supported; point jsii at the virtual
    environment's own Node when that is the one chosen (jsii alone would take PATH's)."""
    path, where = jsii_node()
    try:
        # No timeout: `node --version` answers at once, and a timeout makes subprocess poll with time.sleep.
        version = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise ConfigError(E602, f"node: {path} ({where}) did not run: {err}; {_FIX}") from None
    if message := end_of_life_error(version, f"{path}, {where}", today or datetime.date.today()):
        raise ConfigError(E602, message)
    if where == _BESIDE:
        os.environ["JSII_NODE"] = path


def main() -> int:
    try:
        require_supported_node()
    except ConfigError as err:
        print(f"llm-eks: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
