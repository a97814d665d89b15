"""The vLLM container's liveness probe (llm_eks/manifests/vllm/liveness.py) against a fake vLLM on loopback: /health
and /metrics served by a local HTTP server whose figures the test sets, the script run as the kubelet runs it
(`python3 -c <text> --port ...`) and through its functions with a fake clock."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from llm_eks.manifests.vllm import liveness
from llm_eks.manifests.vllm.pod import liveness_command, liveness_script

MODEL = 'model_name="meta-llama/Llama-3.1-8B-Instruct"'


class FakeVllm:
    """What the fake server answers: /health's status and the engine's figures."""

    def __init__(self) -> None:
        self.health = 200
        self.running = 0.0
        self.generated = 0.0
        self.prompted = 0.0

    def metrics(self) -> str:
        # vLLM 0.33's exposition (prometheus_client): HELP/TYPE lines, labels engine and model_name, _total counters.
        return "\n".join(
            [
                "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                "# TYPE vllm:num_requests_running gauge",
                f'vllm:num_requests_running{{engine="0",{MODEL}}} {self.running}',
                "# TYPE vllm:num_requests_waiting gauge",
                f'vllm:num_requests_waiting{{engine="0",{MODEL}}} 7.0',
                "# TYPE vllm:generation_tokens_total counter",
                f'vllm:generation_tokens_total{{engine="0",{MODEL}}} {self.generated}',
                f'vllm:generation_tokens_created{{engine="0",{MODEL}}} 1.7e+09',
                "# TYPE vllm:prompt_tokens_total counter",
                f'vllm:prompt_tokens_total{{engine="0",{MODEL}}} {self.prompted}',
                "",
            ]
        )


@pytest.fixture
def server() -> Iterator[tuple[FakeVllm, int]]:
    fake = FakeVllm()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                status, body = fake.health, ""
            elif self.path == "/metrics":
                status, body = 200, fake.metrics()
            else:
                status, body = 404, ""
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield fake, httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _check(port: int, state: Path, clock: Clock) -> str | None:
    return liveness.check(f"http://127.0.0.1:{port}", str(state), 120, timeout=2, clock=clock)


def test_a_server_making_progress_or_idle_is_alive(server: tuple[FakeVllm, int], tmp_path: Path) -> None:
    fake, port = server
    state, clock = tmp_path / "state.json", Clock()
    fake.running, fake.generated = 4, 100
    for _ in range(10):  # tokens move every probe: alive for ever
        assert _check(port, state, clock) is None
        clock.now += 30
        fake.generated += 500
    fake.running = 0  # idle, counters still: alive however long
    for _ in range(10):
        assert _check(port, state, clock) is None
        clock.now += 300


def test_requests_running_without_a_token_for_the_stall_time_fail(server: tuple[FakeVllm, int], tmp_path: Path) -> None:
    fake, port = server
    state, clock = tmp_path / "state.json", Clock()
    fake.running, fake.generated, fake.prompted = 3, 1000, 500
    assert _check(port, state, clock) is None  # the last progress seen
    clock.now += 120
    assert _check(port, state, clock) is None  # not more than 120 s yet
    clock.now += 30
    assert _check(port, state, clock) == (
        "3 requests running and no token processed for 150 s (more than 120 s): the engine is stalled"
    )
    # A prompt token (a long prefill moving) is progress too.
    fake.prompted += 2048
    assert _check(port, state, clock) is None


def test_a_dead_engine_fails_and_a_silent_metrics_endpoint_does_not(
    server: tuple[FakeVllm, int], tmp_path: Path
) -> None:
    fake, port = server
    state, clock = tmp_path / "state.json", Clock()
    fake.health = 503
    assert _check(port, state, clock) == "/health answered 503"
    assert liveness.check("http://127.0.0.1:1", str(state), 120, timeout=1, clock=clock) == "/health answered nothing"
    fake.health = 200
    assert liveness.check(f"http://127.0.0.1:{port}/nothing-here", str(state), 120, timeout=1) is not None
    # /health fine, /metrics without vLLM's series: the health check decides.
    assert liveness.progress("# nothing\n") is None


def test_the_probe_command_runs_as_the_kubelet_runs_it(server: tuple[FakeVllm, int], tmp_path: Path) -> None:
    """The exec probe's own argv (python3 -c <text> --port 8000 ...), with the port and state moved to the test's."""
    fake, port = server
    command = liveness_command()
    assert command[2] == liveness_script() and "$(" not in command[2]
    argv = [sys.executable, "-c", command[2], "--port", str(port), "--state", str(tmp_path / "s.json")]
    fake.running, fake.generated = 2, 10
    first = subprocess.run([*argv, "--stall-seconds", "120"], capture_output=True, text=True, timeout=30)
    assert (first.returncode, first.stdout) == (0, "")
    # The same figures again, with a stall time already past: exit 1 and one line for the pod's events.
    again = subprocess.run([*argv, "--stall-seconds", "0"], capture_output=True, text=True, timeout=30)
    assert again.returncode == 1
    assert again.stdout.startswith("vllm-liveness: 2 requests running and no token processed for ")
    fake.health = 500
    dead = subprocess.run([*argv, "--stall-seconds", "120"], capture_output=True, text=True, timeout=30)
    assert (dead.returncode, dead.stdout) == (1, "vllm-liveness: /health answered 500\n")
