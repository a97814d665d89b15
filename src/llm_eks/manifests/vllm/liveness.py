"""Is this vLLM server alive and making progress? The vLLM container's liveness probe (server and group leader).

llm-eks passes this file's text to `python3 -c` in the vLLM image as an exec probe; it uses the standard library
only. It exits 1 (the kubelet restarts the container after the probe's failureThreshold) when:
1. `GET /health` does not answer 200 in time: the engine is dead (what the former httpGet probe checked); or
2. `/metrics` shows requests running (`vllm:num_requests_running` > 0) while the engine's token counters
   (`vllm:generation_tokens_total` + `vllm:prompt_tokens_total`) have not moved for `--stall-seconds`: the engine is
   hung. vLLM's /health only reports an engine core that is gone, so a wedged GPU kernel keeps it at 200, while
   /metrics, served by the API process, still answers with the engine's figures frozen.

It keeps the last token total and when it last moved in a small JSON file (`--state`, under /tmp, which the container
may write; a restarted container starts without it). An idle engine (nothing running) never fails it, and neither
does a /metrics that does not answer (the health check decides then). Limits: a hang on the first step after idle
leaves `running` at its last published value, 0, until a later update; with several engines in one pod (data
parallel), one stalled engine beside a working one is not seen. (No `$` followed by `(` appears in this file: the
kubelet would expand it as a variable reference in the container command.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

RUNNING = "vllm:num_requests_running"
TOKENS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total")
STATE = "/tmp/llm-eks-liveness.json"
STALL_SECONDS = 120.0
TIMEOUT_SECONDS = 4.0


def fetch(url: str, timeout: float) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when it fails or times out."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, ""
    except Exception:
        return 0, ""


def total(metrics: str, name: str) -> float | None:
    """The sum of every sample of `name` in Prometheus's text format (None: no sample)."""
    found = None
    for line in metrics.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        try:
            value = float(line.rsplit("}", 1)[-1].split()[0])
        except (IndexError, ValueError):
            continue
        found = (found or 0.0) + value
    return found


def progress(metrics: str) -> tuple[float, float] | None:
    """(requests running, tokens processed so far), or None when vLLM's series are not there."""
    running = total(metrics, RUNNING)
    counts = [total(metrics, name) for name in TOKENS]
    if running is None or all(c is None for c in counts):
        return None
    return running, sum(c or 0.0 for c in counts)


def read_state(path: str) -> dict[str, float] | None:
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        return {"tokens": float(state["tokens"]), "since": float(state["since"])}
    except Exception:
        return None


def write_state(path: str, tokens: float, since: float) -> None:
    temporary = f"{path}.{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump({"tokens": tokens, "since": since}, f)
    os.replace(temporary, path)


def check(
    base: str,
    state_path: str,
    stall_seconds: float,
    timeout: float = TIMEOUT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    get: Callable[[str, float], tuple[int, str]] = fetch,
) -> str | None:
    """Why the server is not alive (one line), or None when it is."""
    status, _ = get(f"{base}/health", timeout)
    if status != 200:
        return f"/health answered {status or 'nothing'}"
    status, metrics = get(f"{base}/metrics", timeout)
    seen = progress(metrics) if status == 200 else None
    if seen is None:
        return None
    running, tokens = seen
    now = clock()
    state = read_state(state_path)
    if state is None or running == 0 or tokens != state["tokens"] or now < state["since"]:
        write_state(state_path, tokens, now)
        return None
    stalled = now - state["since"]
    if stalled > stall_seconds:
        return (
            f"{running:g} requests running and no token processed for {stalled:.0f} s "
            f"(more than {stall_seconds:g} s): the engine is stalled"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vllm-liveness", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stall-seconds", type=float, default=STALL_SECONDS)
    parser.add_argument("--timeout-seconds", type=float, default=TIMEOUT_SECONDS)
    parser.add_argument("--state", default=STATE)
    args = parser.parse_args(argv)
    problem = check(f"http://127.0.0.1:{args.port}", args.state, args.stall_seconds, args.timeout_seconds)
    if problem is None:
        return 0
    print(f"vllm-liveness: {problem}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
