"""Drift from the plan: the capacity plan's figures as recording rules next to what the engine reports, and alerts
when production drifts from the plan for long enough that the plan, not a burst, is wrong.

Recorded per workload (labels `namespace` and `model_name`, so a dashboard or `llm-eks verify` can join them):
- `llm_eks:plan_kv_cache_tokens`, `llm_eks:plan_itl_seconds`, `llm_eks:plan_ttft_seconds`: the plan's KV-cache
  tokens per replica, inter-token latency and time-to-first-token estimates, as constants (only those the plan has);
- `llm_eks:itl_seconds:p50_10m`, `...:p99_10m`, `llm_eks:ttft_seconds:p50_10m`, `...:p99_10m`: the observed
  quantiles from vLLM's histograms over 10 minutes.

The KV cache: vLLM exports its size only as a label, `vllm:cache_config_info{kv_cache_size_tokens="33088", ...} 1`
(the CacheConfig field `update_kv_cache_capacity` sets to the number it logs as "GPU KV cache size", per engine;
vllm/v1/core/kv_cache_utils.py and v1/metrics/loggers.py `log_metrics_info`, vLLM 0.33), and no numeric gauge of it
(`vllm:kv_cache_usage_perc` is a fraction of it). PromQL cannot turn a label into a value (`label_replace` writes
labels, `count_values` goes the other way), so there is no observed-KV series to record. What PromQL can do is
match the label against a regular expression, and a decimal integer below a bound is a regular language: the KV
alert selects the info series whose label is an integer below the bound (`integers_below`). The figure itself is
compared by `llm-eks verify`.

A disaggregated workload (its prefill and decode pools report the same model name; each pool's series are selected
by its scrape job): ITL is the decode pool's, held to the plan's decode step; the TTFT of the whole path is no one
vLLM histogram (each pool observes its own leg), so its place is taken by the prefill phase: vLLM's per-request
prefill time on the prefill pool (`vllm:request_prefill_time_seconds`, first token - scheduled, queueing excluded:
vLLM 0.33 v1/metrics/stats.py:601, loggers.py:991), recorded as `llm_eks:prefill_seconds:p50_10m` and `...:p99_10m`
beside the plan's prefill estimate `llm_eks:plan_prefill_seconds`, alerting above the TTFT drift ratio.

The series have no `model_name` (the info metric carries CacheConfig's fields and `engine` only), so the KV alert
selects the workload by `namespace` and `job` (the Service, or for Ray Serve the RayService, a ServiceMonitor or
PodMonitor names the job after).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_eks.error_codes import E410
from llm_eks.errors import fail
from llm_eks.manifests.monitoring_model import BY_MODEL, BY_MODEL_LE, EngineAlerts, alert_rule
from llm_eks.manifests.promql import promql_number, selector
from llm_eks.planner.drift import DRIFT_RATIOS
from llm_eks.planner.kv_cache import cdiv
from llm_eks.validation import positive_number, whole_number

PLAN_KV_CACHE_TOKENS = "llm_eks:plan_kv_cache_tokens"
PLAN_ITL_SECONDS = "llm_eks:plan_itl_seconds"
PLAN_TTFT_SECONDS = "llm_eks:plan_ttft_seconds"
PLAN_PREFILL_SECONDS = "llm_eks:plan_prefill_seconds"


@dataclass(frozen=True)
class DriftThresholds:
    """How far from the plan, for how long, before an alert fires; each default's reason is above it."""

    # Quantile window. At any real load it holds thousands of inter-token observations (one per output token: 16
    # sequences at 40 ms is 400 a second) and hundreds of first tokens, so the quantile is stable; it smooths a
    # burst of long prompts and is short enough that `duration` spans three disjoint windows.
    window: str = "10m"
    # A wrong plan (a slower kernel, a throttled GPU, longer requests than typical_*_tokens) stays wrong; 30 minutes
    # rules out what passes: a scale-out (a new node and a cold start take minutes), a rollout, a traffic spike.
    duration: str = "30m"
    # p50 inter-token latency, and time to first token, above these multiples of the estimate: the drift ratio and
    # thresholds `llm-eks verify` judges by too (planner/drift.py says why each). The estimate is at
    # target_concurrency sequences, which vLLM's max_num_seqs never exceeds unless set, so load alone does not push
    # the median past it; contexts longer than planned do, and that is drift too.
    itl_p50_ratio: float = DRIFT_RATIOS.itl
    ttft_p50_ratio: float = DRIFT_RATIOS.ttft
    # TTFT counts queueing too: the TTFT drift alert holds only while fewer than this many requests wait on average
    # over the window (a waiting request waits for a batch slot, so any steady queue, not the prefill, explains a
    # slow first token, and the queue and SLO alerts already cover it).
    ttft_max_average_waiting: float = 1.0
    # vLLM's KV cache more than 10 % below the plan's tokens: twice the planner's accuracy goal for vLLM 0.33's
    # accounting (5 %, docs/reference/planner-accuracy.md); that many tokens fewer can drop the planned concurrency
    # below target and shows as preemptions and queueing under load. A larger cache than planned is harmless.
    kv_cache_shortfall_percent: int = 10
    # The KV size is fixed when the engine starts; 5 minutes only skips a pod replaced at once (a rollout).
    kv_cache_duration: str = "5m"


DRIFT = DriftThresholds()


def validate_planned(
    prefix: str, kv_cache_tokens: object, itl_seconds: object, ttft_seconds: object, prefill_seconds: object = None
) -> None:
    """Raise ConfigError (one line naming the field) on a planned figure that is given and not positive."""
    if kv_cache_tokens is not None and (not whole_number(kv_cache_tokens) or kv_cache_tokens < 1):
        raise fail(
            E410, f"{prefix}.planned_kv_cache_tokens", kv_cache_tokens, "must be a positive whole number or None"
        )
    for name, value in (
        ("planned_itl_seconds", itl_seconds),
        ("planned_ttft_seconds", ttft_seconds),
        ("planned_prefill_seconds", prefill_seconds),
    ):
        if value is not None and not positive_number(value):
            raise fail(E410, f"{prefix}.{name}", value, "must be a positive number of seconds or None")


def integers_below(limit: int) -> str:
    """A regular expression (RE2 and Python alike; Prometheus anchors label matchers) matching exactly the decimal
    form `str()` gives each integer n with 0 <= n < limit (no sign, no leading zero). `limit` is at least 1."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    digits = str(limit)
    width = len(digits)
    # Every shorter number, then those of the same width below `limit`, digit by digit.
    alternatives = ["[0-9]"] if width > 1 else []
    alternatives += ["[1-9]" + _any_digits(d - 1) for d in range(2, width)]
    for i, digit in enumerate(digits):
        low, high = (1 if i == 0 and width > 1 else 0), int(digit) - 1
        if high >= low:
            alternatives.append(digits[:i] + _digit_class(low, high) + _any_digits(width - i - 1))
    return "|".join(alternatives)


def _digit_class(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def _any_digits(count: int) -> str:
    return "" if count == 0 else "[0-9]" if count == 1 else f"[0-9]{{{count}}}"


def kv_cache_alert_limit(planned_tokens: int, thresholds: DriftThresholds = DRIFT) -> int:
    """The smallest KV size (tokens) that does not alert: observed < planned x (100 - shortfall) %, in integers."""
    return cdiv(planned_tokens * (100 - thresholds.kv_cache_shortfall_percent), 100)


def record_rule(record: str, expr: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One PrometheusRule recording rule."""
    rule: dict[str, Any] = {"record": record, "expr": expr}
    if labels:
        rule["labels"] = labels
    return rule


def _constant(value: float) -> str:
    """A plan figure as a PromQL vector: repr round-trips, so the recorded value is the plan's to the last bit."""
    return f"vector({value if isinstance(value, int) else repr(float(value))})"


def _ms(seconds: float) -> str:
    return format(seconds * 1000, ".4g")


@dataclass(frozen=True)
class DriftInputs:
    """One workload's series and plan, as the drift rules read them."""

    # Whose series names the expressions read, and the alert-name prefix and summary suffix.
    engine: EngineAlerts
    namespace: str
    # The served model name (`model_name` label).
    model: str
    # The scrape job of the workload's pods (the Service or RayService name).
    job: str
    # The plan's figures; None: no record and no alert for it.
    planned_kv_cache_tokens: int | None = None
    planned_itl_seconds: float | None = None
    planned_ttft_seconds: float | None = None
    # A disaggregated workload: the prefill pool's scrape job (`job` is the decode pool's), and the plan's prefill
    # time per request (its P/D decision's prefill phase); None: one pool.
    prefill_job: str | None = None
    planned_prefill_seconds: float | None = None

    @property
    def selector(self) -> str:
        """The workload's recorded series: its namespace and served model."""
        return selector({"namespace": self.namespace, "model_name": self.model})

    def series(self, vllm_name: str, job: str | None = None) -> str:
        """The engine's series of the workload; of the pool whose scrape job is `job` where given (a disaggregated
        workload's pools share the model name)."""
        if job is None:
            return f"{self.engine.metrics.series(vllm_name)}{self.selector}"
        pool = selector({"namespace": self.namespace, "job": job, "model_name": self.model})
        return f"{self.engine.metrics.series(vllm_name)}{pool}"


# Plan and observed series pair on the labels both carry.
_JOIN = "on (namespace, model_name)"


def observed_record(kind: str, q: float, t: DriftThresholds = DRIFT) -> str:
    """The name of an observed quantile's recording rule: `llm_eks:itl_seconds:p50_10m`."""
    return f"llm_eks:{kind}_seconds:p{round(q * 100)}_{t.window}"


def _records(d: DriftInputs, t: DriftThresholds) -> list[dict[str, Any]]:
    """The plan's figures as constants, then the observed p50 and p99 of ITL and TTFT."""
    labels = {"namespace": d.namespace, "model_name": d.model}
    plan = (
        (PLAN_KV_CACHE_TOKENS, d.planned_kv_cache_tokens),
        (PLAN_ITL_SECONDS, d.planned_itl_seconds),
        (PLAN_TTFT_SECONDS, d.planned_ttft_seconds),
        (PLAN_PREFILL_SECONDS, d.planned_prefill_seconds),
    )
    rules = [record_rule(name, _constant(value), dict(labels)) for name, value in plan if value is not None]
    # (kind, histogram, scrape job): one pool's ITL and TTFT, or a disaggregated workload's decode ITL and prefill.
    observed: tuple[tuple[str, str, str | None], ...] = (
        ("itl", "vllm:inter_token_latency_seconds_bucket", None),
        ("ttft", "vllm:time_to_first_token_seconds_bucket", None),
    )
    if d.prefill_job is not None:
        observed = (
            ("itl", "vllm:inter_token_latency_seconds_bucket", d.job),
            ("prefill", "vllm:request_prefill_time_seconds_bucket", d.prefill_job),
        )
    for kind, histogram, job in observed:
        for q in (0.5, 0.99):
            series = d.series(histogram, job)
            expr = f"histogram_quantile({promql_number(q)}, {BY_MODEL_LE} (rate({series}[{t.window}])))"
            rules.append(record_rule(observed_record(kind, q, t), expr))
    return rules


def _itl_alert(d: DriftInputs, planned: float, t: DriftThresholds) -> dict[str, Any]:
    ratio = promql_number(t.itl_p50_ratio)
    return alert_rule(
        f"{d.engine.prefix}InterTokenLatencyAbovePlan",
        f"{observed_record('itl', 0.5, t)}{d.selector} > {_JOIN} {ratio} * {PLAN_ITL_SECONDS}{d.selector}",
        t.duration,
        "warning",
        f"vLLM p50 inter-token latency above {ratio}x the plan's estimate for {t.duration}{d.engine.summary_suffix}",
        f"p50 inter-token latency of {d.model} over {t.window} is {{{{ $value | humanizeDuration }}}}; the plan "
        f"estimated {_ms(planned)} ms (alert above {_ms(planned * t.itl_p50_ratio)} ms for {t.duration}).",
        "The plan's decode estimate does not hold here: compare `llm-eks verify` with `llm-eks plan` for this "
        "environment; check the engine arguments the pod runs (quantization kernel, eager mode), GPU clocks and "
        "throttling on the GPU panels, and whether requests are longer than the workload's "
        "typical_input_tokens/typical_output_tokens; then re-plan with what you measured.",
    )


def _ttft_alert(d: DriftInputs, planned: float, t: DriftThresholds) -> dict[str, Any]:
    ratio = promql_number(t.ttft_p50_ratio)
    waiting = f"avg_over_time({d.series('vllm:num_requests_waiting')}[{t.window}])"
    most = promql_number(t.ttft_max_average_waiting)
    return alert_rule(
        f"{d.engine.prefix}TimeToFirstTokenAbovePlan",
        f"{observed_record('ttft', 0.5, t)}{d.selector} > {_JOIN} {ratio} * {PLAN_TTFT_SECONDS}{d.selector} "
        f"and {_JOIN} {BY_MODEL} ({waiting}) < {most}",
        t.duration,
        "warning",
        f"vLLM p50 time to first token above {ratio}x the plan's estimate for {t.duration}, no queue"
        f"{d.engine.summary_suffix}",
        f"p50 time to first token of {d.model} over {t.window} is {{{{ $value | humanizeDuration }}}} while the "
        f"waiting queue averages under {most}; the plan estimated {_ms(planned)} ms (alert above "
        f"{_ms(planned * t.ttft_p50_ratio)} ms for {t.duration}).",
        "Prefill is slower than planned and queueing does not explain it: compare prompt lengths (the prompt-tokens "
        "histogram) with typical_input_tokens, check max-num-batched-tokens and the prefix-cache hit ratio, compare "
        "`llm-eks verify` with `llm-eks plan`; then re-plan.",
    )


def _prefill_alert(d: DriftInputs, planned: float, t: DriftThresholds) -> dict[str, Any]:
    ratio = promql_number(t.ttft_p50_ratio)
    return alert_rule(
        f"{d.engine.prefix}PrefillTimeAbovePlan",
        f"{observed_record('prefill', 0.5, t)}{d.selector} > {_JOIN} {ratio} * {PLAN_PREFILL_SECONDS}{d.selector}",
        t.duration,
        "warning",
        f"vLLM p50 prefill time on the prefill pool above {ratio}x the plan's estimate for {t.duration}"
        f"{d.engine.summary_suffix}",
        f"p50 prefill time per request of {d.model} on {d.prefill_job} over {t.window} is "
        f"{{{{ $value | humanizeDuration }}}} (queueing excluded); the plan estimated {_ms(planned)} ms (alert above "
        f"{_ms(planned * t.ttft_p50_ratio)} ms for {t.duration}).",
        "The prefill pool is slower than planned: compare prompt lengths (the prompt-tokens histogram) with "
        "typical_input_tokens, check the prefill pods' max-num-batched-tokens and GPU panels, compare `llm-eks verify` "
        "(its prefill row) with `llm-eks plan`; then re-plan.",
    )


def _kv_alert(d: DriftInputs, planned: int, t: DriftThresholds) -> dict[str, Any]:
    limit = kv_cache_alert_limit(planned, t)
    info = d.engine.metrics.series("vllm:cache_config_info")
    # namespace and job are DNS names (validated), the pattern only digits, brackets, braces and '|'.
    # Both pools of a disaggregated workload run the plan's replica layout, so both are held to its KV cache.
    job = f'job="{d.job}"' if d.prefill_job is None else f'job=~"{d.job}|{d.prefill_job}"'
    matchers = f'namespace="{d.namespace}", {job}, kv_cache_size_tokens=~"{integers_below(limit)}"'
    return alert_rule(
        f"{d.engine.prefix}KvCacheBelowPlan",
        f"max by (namespace, pod, kv_cache_size_tokens) ({info}{{{matchers}}})",
        t.kv_cache_duration,
        "warning",
        f"vLLM KV cache more than {t.kv_cache_shortfall_percent} % below the plan{d.engine.summary_suffix}",
        f"{{{{ $labels.pod }}}} ({d.model}) sized its KV cache at {{{{ $labels.kv_cache_size_tokens }}}} tokens; "
        f"the plan has {planned} per replica (alert below {limit}).",
        "Fewer sequences fit than planned (expect preemptions and queueing under load): read the pod's start-up "
        "log ('GPU KV cache size', the memory profile) against `llm-eks plan` (its Memory / GPU line): another "
        "process on the GPU, a different gpu-memory-utilization, or a larger profiling peak than the planner "
        "reserves; re-plan, or lower max-model-len.",
    )


def drift_rules(d: DriftInputs, t: DriftThresholds = DRIFT) -> list[dict[str, Any]]:
    """The plan and observed recording rules, then the drift alerts of the figures the plan has, in evaluation order
    (a group runs its rules in sequence, so the alerts read this evaluation's recorded series)."""
    rules = _records(d, t)
    if d.planned_itl_seconds is not None:
        rules.append(_itl_alert(d, d.planned_itl_seconds, t))
    # A disaggregated workload records no whole-path TTFT (see the module docstring): its prefill phase instead.
    if d.planned_ttft_seconds is not None and d.prefill_job is None:
        rules.append(_ttft_alert(d, d.planned_ttft_seconds, t))
    if d.planned_prefill_seconds is not None:
        rules.append(_prefill_alert(d, d.planned_prefill_seconds, t))
    if d.planned_kv_cache_tokens is not None:
        rules.append(_kv_alert(d, d.planned_kv_cache_tokens, t))
    return rules
