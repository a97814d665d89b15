"""How long a request for a model is held, what its caller is told when the hold ends, and how long the gateway waits
for its answer: three numbers from the plan's cold start and SLO, held together.

A request that reaches a vLLM workload at zero ready replicas waits in its endpoint picker's flow-control queue
(llm-d router v0.10.0: "the scale-from-zero waiting room", pkg/epp/requestcontrol/admission.go) until a replica is
ready or the hold (flowControl.defaultRequestTTL) ends; the held request is also what wakes the workload (KEDA reads
the picker's queue). So the hold must cover detection (KEDA's polling plus Prometheus's scrape) and a cold start on a
new node (the planner's scale-out: node launch, image, weights, warm-up), with a margin; but the AI Gateway calls the
picker with a 300 s message timeout (envoyproxy/ai-gateway v1.1.0 internal/extensionserver/inferencepool.go), past
which Envoy fails the request itself, so the hold stays below it. Past the hold the caller gets 503 with Retry-After:
what is left of the cold start (at least 30 s). The route's request timeout must outlast the hold plus a whole
generation at the SLO (Envoy's route timeout may start only once the picker releases the request; set this way it is
long enough under either reading, and the AI Gateway's 60 s default would cut any cold start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The AI Gateway's message timeout on the picker's ext_proc, and the margin the hold keeps below it.
PICKER_MESSAGE_TIMEOUT_S = 300
HOLD_MARGIN_S = 10
# KEDA's polling interval (manifests/autoscaling.py) and the picker's scrape interval (its ServiceMonitor).
DETECT_S = 15 + 15
MIN_RETRY_AFTER_S = 30


@dataclass(frozen=True)
class Hold:
    """The three numbers, in seconds."""

    cold_start: int
    hold: int
    retry_after: int
    request_timeout: int


def hold_for(scale_out_s: float, ttft_p99_s: float, itl_p99_s: float, max_tokens: int) -> Hold:
    """The hold of a workload whose replica on a new node serves after `scale_out_s`, at its SLO (`ttft_p99_s`,
    `itl_p99_s`), for generations of at most `max_tokens`."""
    cold = DETECT_S + math.ceil(scale_out_s)
    hold = min(math.ceil(1.1 * cold), PICKER_MESSAGE_TIMEOUT_S - HOLD_MARGIN_S)
    retry = max(MIN_RETRY_AFTER_S, cold - hold)
    generation = math.ceil(ttft_p99_s + max_tokens * itl_p99_s)
    return Hold(cold_start=cold, hold=hold, retry_after=retry, request_timeout=hold + generation)
