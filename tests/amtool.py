"""Running Alertmanager's own `amtool` on the configs llm-eks renders: `amtool check-config` (the schema Alertmanager
loads) and `amtool config routes test --verify.receivers` (which receiver an alert with given labels reaches).

amtool must be on PATH (`make test` and .ci/run see to it); without it the test fails with one line saying how to
install it, never skips. Debian 12 ships amtool 0.25, whose config schema predates the webhook receiver's `url_file`
(prometheus/alertmanager@v0.25.0 config/notifiers.go `WebhookConfig` has `url` only; v0.33.1, the version the
Alertmanager pods run, has both): a config with a webhook is checked for routing on a copy whose receivers keep only
their names (`routing_only`), since routing does not depend on them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from llm_eks.manifests.alerting import AlertRoutes, SecretReceiver
from tests.promtool import system_tool

INSTALL = (
    "amtool not found on PATH; install it: apt-get install -y --no-install-recommends prometheus-alertmanager "
    "(Debian/Ubuntu), brew install alertmanager (macOS)"
)


def amtool() -> str:
    """The amtool executable; the test fails with how to install it when there is none."""
    return system_tool("amtool", INSTALL)


# Every kind of receiver a user can add, each given a severity or the dead-man's switch.
EVERY_RECEIVER_KIND = AlertRoutes(
    receivers={
        "pager": SecretReceiver("pagerduty", "llm-eks/prod/pagerduty"),
        "chat": SecretReceiver("slack", "llm-eks/prod/slack", "#llm-alerts"),
        "snitch": SecretReceiver("webhook", "llm-eks/prod/heartbeat-url"),
    },
    critical=("sns", "pager"),
    warning=("chat",),
    deadmans_switch="snitch",
)


def write_config(folder: Path, name: str, config: Mapping[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False, width=200))
    return path


def check_config(path: Path) -> str:
    """`amtool check-config`; an AssertionError with its output when Alertmanager would refuse the file."""
    done = subprocess.run([amtool(), "check-config", str(path)], capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"amtool check-config {path}:\n{output}"
    return output


def routing_only(config: Mapping[str, Any]) -> dict[str, Any]:
    """The same routing tree, each receiver reduced to its name (module docstring)."""
    return {"route": config["route"], "receivers": [{"name": r["name"]} for r in config["receivers"]]}


def routes_to(path: Path, labels: Mapping[str, str], expected: str) -> None:
    """Assert that an alert with `labels` reaches exactly receiver `expected` (amtool exits 1 otherwise)."""
    args = [f"{k}={v}" for k, v in labels.items()]
    done = subprocess.run(
        [amtool(), "config", "routes", "test", f"--config.file={path}", f"--verify.receivers={expected}", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{labels} should reach {expected}; amtool says: {done.stdout}{done.stderr}"
    # The receivers on stdout; stderr has amtool's note that --config.file wins over --alertmanager.url.
    assert done.stdout.strip() == expected, f"{labels}: amtool printed {done.stdout!r}"
