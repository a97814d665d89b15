"""A real Prometheus for the tests: the server of Debian's `prometheus` package (2.42; .ci/run installs it for
promtool), on a free loopback port, holding series backfilled from OpenMetrics text with `promtool tsdb
create-blocks-from openmetrics`. One server per test session (per pytest-xdist worker), stopped at its end; the
PromQL verify sends and the KEDA triggers' queries are executed by Prometheus itself, not by a stand-in.

A *scenario* is what some vLLM servers counted over the last hour: one value per series (tests/verify_metrics.py,
`Series`). Each scenario is written at an hour of its own in the past, one 2-hour block apart, as samples every STEP
seconds:
counters and histograms rise linearly from 0 to their value over SPAN (steady traffic), gauges hold theirs. A query
of that scenario is evaluated at the end of its hour, so `rate(x[w])` is the hourly value / 3600 for any window up to
SPAN and `increase(x[w])` is the hourly value x w / 1h: a 10-minute window sees a sixth of the hour's requests.

Prometheus loads blocks when it starts: `load` backfills every scenario not yet held and restarts the server once
(about half a second), so a test module loads the scenarios it needs up front; `at` loads a missing one on demand.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

# (series name, labels, value over the hour, cumulative: a counter or a histogram's part, rising over the hour).
Series = tuple[str, dict[str, str], float, bool]

SPAN = 3600
# Every window the tests query (1h, 30m, 10m) is a multiple of it, and an instant selector finds a sample within
# Prometheus's 5-minute lookback.
STEP = 300
# promtool cuts blocks on 2-hour boundaries and reads its input once per block: each scenario's hour lies inside one
# block of its own, so neither a window nor the lookback reaches another scenario.
BLOCK = 2 * 3600
INSTALL = (
    "prometheus not found on PATH; install it: apt-get install -y --no-install-recommends prometheus "
    "(Debian/Ubuntu; .ci/run does), brew install prometheus (macOS)"
)
READY_TIMEOUT_S = 30.0


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(INSTALL, pytrace=False)
    return found


def key(series: Sequence[Series]) -> str:
    """The scenario a set of series is: the same values are the same scenario."""
    text = json.dumps(sorted([name, sorted(labels.items()), value, cumulative] for name, labels, value, cumulative
                             in series))  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def openmetrics(scenarios: Iterable[tuple[float, Sequence[Series]]]) -> str:
    """OpenMetrics text of the scenarios, each ending at its time: every series' samples in time order."""
    lines = []
    steps = SPAN // STEP
    for end, series in scenarios:
        for name, labels, value, cumulative in series:
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            for k in range(steps + 1):
                at = end - SPAN + k * STEP
                sample = value * k / steps if cumulative else value
                lines.append(f"{name}{{{text}}} {_number(sample)} {at:.0f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


class PrometheusServer:
    """One Prometheus server over a data directory of backfilled scenarios."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.config = root / "prometheus.yml"
        # No scrape targets: the server holds the backfilled blocks only.
        self.config.write_text("global:\n  evaluation_interval: 1m\n")
        # Scenario key -> the time its queries are evaluated at.
        self.scenarios: dict[str, float] = {}
        # The first scenario's hour ends 30 minutes before the end of the last whole block before now.
        self.anchor = math.floor(time.time() / BLOCK) * BLOCK - BLOCK - 1800
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self.url = ""

    def load(self, sets: Iterable[Sequence[Series]]) -> None:
        """Backfill every scenario of `sets` the server does not hold yet, then (re)start it once."""
        new: dict[str, tuple[float, Sequence[Series]]] = {}
        for series in sets:
            k = key(series)
            if k in self.scenarios or k in new:
                continue
            new[k] = (self.anchor - (len(self.scenarios) + len(new)) * BLOCK, series)
        if not new:
            if self.process is None:
                self._start()
            return
        # One promtool run per scenario (they run side by side): it reads its input once per block between the
        # input's first and last sample, so scenarios hours apart in one file would be read dozens of times.
        with ThreadPoolExecutor(max_workers=4) as pool:
            for problem in pool.map(self._backfill, new.items()):
                assert problem is None, problem
        self.scenarios.update({k: end for k, (end, _) in new.items()})
        self.stop()
        self._start()

    def _backfill(self, scenario: tuple[str, tuple[float, Sequence[Series]]]) -> str | None:
        """Write one scenario's blocks into the data directory; promtool's output when it fails."""
        k, (end, series) = scenario
        source = self.root / f"{k}.om"
        source.write_text(openmetrics([(end, series)]))
        done = subprocess.run(
            [_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source), str(self.data)],
            capture_output=True,
            text=True,
            check=False,
        )
        source.unlink()
        if done.returncode != 0:
            return f"promtool tsdb create-blocks-from openmetrics:\n{done.stdout}{done.stderr}"
        return None

    def at(self, series: Sequence[Series]) -> float:
        """The evaluation time of the scenario `series` is (backfilled now, with a restart, if it is new)."""
        k = key(series)
        if k not in self.scenarios or self.process is None:
            self.load([series])
        return self.scenarios[k]

    def query(self, expr: str, at: float) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of Prometheus's instant-query API for `expr` at `at`."""
        params = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{params}", timeout=30) as answer:
                return int(answer.status), json.loads(answer.read())
        except urllib.error.HTTPError as err:
            return int(err.code), json.loads(err.read())

    def value(self, expr: str, at: float) -> list[tuple[dict[str, str], float]]:
        """The instant vector `expr` evaluates to, as (labels, value) pairs; an AssertionError on an error."""
        status, body = self.query(expr, at)
        assert status == 200 and body["status"] == "success", (expr, body)
        assert body["data"]["resultType"] == "vector", (expr, body)
        return [(item["metric"], float(item["value"][1])) for item in body["data"]["result"]]

    def _start(self) -> None:
        with socket.socket() as s:  # a free loopback port
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self._log = (self.root / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                _binary("prometheus"),
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.data}",
                f"--web.listen-address=127.0.0.1:{port}",
                # Retention counts back from the newest block: keep every backfilled hour.
                "--storage.tsdb.retention.time=100y",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        self.stop()
        tail = (self.root / "prometheus.log").read_text(errors="replace")[-2000:]
        raise AssertionError(f"prometheus did not become ready on {self.url}:\n{tail}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        self._log.close()
