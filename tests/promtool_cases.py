"""promtool test cases for the rules one workload's PrometheusRule holds, and for KEDA's queries, on the series vLLM
0.33 exports (vllm/v1/metrics/loggers.py: labels model_name = the served model name and engine = "0"; histogram
buckets from vllm/v1/metrics/buckets.py, `le` as prometheus_client prints it: repr of the float, "0.05", "1.0") or,
for Ray Serve, Ray's re-export of them (ray_vllm_*, plus a ReplicaId label), with the target labels a ServiceMonitor
or PodMonitor adds.

Every alert gets a case that must fire, with its labels and every annotation as Prometheus renders them, nothing
before its `for` has passed, and a case that must not fire, next to a decoy (another model, job or namespace) that
would fire a wrongly scoped expression. Every recording rule and KEDA query gets an exact expected sample: the
inputs put each quantile where Prometheus's interpolation inside a bucket is exact, so the same figures hold on
every platform (a fused multiply-add cannot change them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from llm_eks.manifests.monitoring_drift import DRIFT, kv_cache_alert_limit
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.promql import MetricSource

# vLLM 0.33's default buckets (vllm/v1/metrics/buckets.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
TTFT_BUCKETS += (40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0)
ITL_BUCKETS += (80.0,)
# The request phase-timing histograms' (vllm:request_prefill_time_seconds among them): REQUEST_LATENCY_BUCKETS.
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0)
REQUEST_BUCKETS += (480.0, 960.0, 1920.0, 7680.0)
TTFT = "vllm:time_to_first_token_seconds_bucket"
ITL = "vllm:inter_token_latency_seconds_bucket"
PREFILL = "vllm:request_prefill_time_seconds_bucket"
BUCKETS = {TTFT: TTFT_BUCKETS, ITL: ITL_BUCKETS, PREFILL: REQUEST_BUCKETS}
# Samples: one a minute for an hour.
SPAN = 60
OTHER_MODEL = "Qwen/Qwen2.5-7B-Instruct"


@dataclass(frozen=True)
class Scene:
    """One workload as Prometheus sees it: its rules, its series' names and labels, its thresholds and plan."""

    # The PrometheusRule's name and groups, as synthesized.
    rule_name: str
    groups: list[dict[str, Any]]
    source: MetricSource
    namespace: str
    model: str
    # The scrape job (Service or RayService name).
    job: str
    targets: MonitoringTargets
    planned_kv_cache_tokens: int | None
    planned_itl_seconds: float | None
    planned_ttft_seconds: float | None
    # What holds the replicas (kube-state-metrics' kind and names) and the ScaledObject, for vLLM; the Serve
    # deployment for Ray Serve.
    replica_kind: str = "deployment"
    replica_names: tuple[str, ...] = ()
    scaled_object: str | None = None
    deployment: str = ""
    # A disaggregated workload: its prefill pool's scrape job (`job` is the decode pool's) and the plan's prefill
    # time per request; None: one pool.
    prefill_job: str | None = None
    planned_prefill_seconds: float | None = None
    # The workload the pool belongs to (its picker, InferencePool and decode Deployment); "": `job`'s own.
    workload: str = ""

    @property
    def workload_name(self) -> str:
        return self.workload or self.job

    def prefill_pool(self) -> Scene:
        """The prefill pool of a disaggregated workload as a scene of its own: its pods and series under its own job,
        its ScaledObject; the replica objects stay the decode pool's (what the health alerts' guards read)."""
        assert self.prefill_job is not None
        return replace(
            self,
            rule_name=f"{self.rule_name} (prefill pool)",
            job=self.prefill_job,
            replica_names=self.replica_names or (self.job,),
            scaled_object=None if self.scaled_object is None else self.prefill_job,
            prefill_job=None,
            workload=self.job,
        )

    @property
    def prefix(self) -> str:
        return "RayVllm" if self.source is MetricSource.RAY else "Vllm"

    @property
    def target_down(self) -> str:
        return "RayServeTargetDown" if self.source is MetricSource.RAY else "VllmTargetDown"

    def pod(self, n: int = 0) -> str:
        """A serving pod: a Ray GPU worker (KubeRay 1.7.0: `<cluster>-gpu-worker-<5>`, the cluster `<job>-<5>`), a
        LeaderWorkerSet's leader, or a pod of the Deployment."""
        if self.source is MetricSource.RAY:
            return f"{self.job}-k8x2p-gpu-worker-x2x{n}q"
        if self.replica_kind == "statefulset":
            return f"{self.job}-{n}"
        return f"{self.job}-6b7f9c8d4-x2x{n}q"

    def target(self, n: int = 0, job: str | None = None, namespace: str | None = None) -> dict[str, str]:
        """The labels Prometheus gives every series of pod `n` (ServiceMonitor or PodMonitor target labels)."""
        labels = {
            "namespace": namespace or self.namespace,
            "job": job or self.job,
            "pod": self.pod(n),
            "instance": f"10.0.1.{20 + n}:{8080 if self.source is MetricSource.RAY else 8000}",
        }
        if self.source is MetricSource.RAY:
            labels |= {"ray_io_cluster": f"{self.job}-k8x2p", "ray_io_node_type": "worker"}
        else:
            labels |= {"service": job or self.job, "container": "vllm", "endpoint": "http"}
        return labels

    def engine(self, n: int = 0, model: str | None = None, **target: str) -> dict[str, str]:
        """Target labels plus those vLLM (or Ray's re-export) puts on its engine series."""
        labels = {**self.target(n, **target), "model_name": model or self.model, "engine": "0"}
        if self.source is MetricSource.RAY:
            labels["ReplicaId"] = f"r{n}a1b2c3"
        return labels

    def series(self, vllm_name: str, labels: Mapping[str, str], values: str) -> dict[str, str]:
        """One input series in this engine's names."""
        return {"series": series_text(self.source.series(vllm_name), labels), "values": values}

    def histogram(self, vllm_name: str, labels: Mapping[str, str], per_minute: Mapping[float, int]) -> list[dict]:
        """The cumulative `_bucket` series of a histogram observing `per_minute[upper]` values a minute in the bucket
        ending at `upper`."""
        out = []
        for upper in (*BUCKETS[vllm_name], math.inf):
            count = sum(n for bound, n in per_minute.items() if bound <= upper)
            le = "+Inf" if upper == math.inf else repr(upper)
            out.append(self.series(vllm_name, {**labels, "le": le}, f"0+{count}x{SPAN}"))
        return out

    def rules(self) -> list[dict[str, Any]]:
        return [r for g in self.groups for r in g["rules"]]

    def rule(self, name: str) -> dict[str, Any]:
        (found,) = [r for r in self.rules() if r.get("alert") == name]
        return found


def series_text(name: str, labels: Mapping[str, str]) -> str:
    inner = ", ".join(f"{k}={_quote(v)}" for k, v in labels.items())
    return f"{name}{{{inner}}}"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def minutes(duration: str) -> int:
    match = re.fullmatch(r"(\d+)m", duration)
    assert match, f"durations here are whole minutes, not {duration!r}"
    return int(match.group(1))


# -- Prometheus's template functions (template/template.go), for the values these cases produce ---------------------


def humanize_duration(v: float) -> str:
    """`humanizeDuration` for 0 <= v < 60 s: 4 significant digits, with m/u/n prefixes below a second."""
    assert 0 <= v < 60
    if v == 0 or v >= 1:
        return f"{v:.4g}s"
    prefix = ""
    for p in ("m", "u", "n", "p"):
        if v >= 1:
            break
        prefix, v = p, v * 1000
    return f"{v:.4g}{prefix}s"


def humanize(v: float) -> str:
    """`humanize` for 1 <= v < 1000."""
    assert 1 <= v < 1000
    return f"{v:.4g}"


def humanize_percentage(v: float) -> str:
    return f"{v * 100:.4g}%"


def plain(v: float) -> str:
    """`{{ $value }}`: Go prints a float64 in its shortest form, integers without a fraction."""
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


_FORMATS: dict[str | None, Callable[[float], str]] = {
    None: plain,
    "humanizeDuration": humanize_duration,
    "humanize": humanize,
    "humanizePercentage": humanize_percentage,
}
_TEMPLATE = re.compile(r"\{\{ (?:\$labels\.(?P<label>\w+)|\$value(?: \| (?P<fn>\w+))?) \}\}")


def render(text: str, labels: Mapping[str, str], value: float) -> str:
    """An annotation as Prometheus renders it for an alert with `labels` and `value`; a label the alert does not
    have is a KeyError here (Prometheus would print "<no value>")."""

    def one(m: re.Match[str]) -> str:
        return labels[m["label"]] if m["label"] else _FORMATS[m["fn"]](value)

    out = _TEMPLATE.sub(one, text)
    assert "{{" not in out, f"a template this test does not know: {text}"
    return out


# -- cases --------------------------------------------------------------------------------------------------------


def alert_test(
    scene: Scene, name: str, title: str, inputs: list[dict], fired: list[tuple[dict[str, str], float]] | None
) -> dict[str, Any]:
    """A promtool test of alert `name`: with `fired` = [(labels, value)], nothing just before `for` has passed and
    exactly those alerts three minutes after it; with None, nothing at either time nor ten minutes later."""
    return rule_alert_test(scene.rule(name), title, inputs, fired)


def rule_alert_test(
    rule: Mapping[str, Any], title: str, inputs: list[dict], fired: list[tuple[dict[str, str], float]] | None
) -> dict[str, Any]:
    """alert_test for a rule of any PrometheusRule (not only a workload's)."""
    name = rule["alert"]
    wait = minutes(rule["for"])
    checks: list[dict[str, Any]] = [{"eval_time": f"{max(wait - 2, 0)}m", "alertname": name, "exp_alerts": []}]
    expected = [
        {
            "exp_labels": {**labels, **rule["labels"]},
            "exp_annotations": {k: render(v, labels, value) for k, v in rule["annotations"].items()},
        }
        for labels, value in (fired or [])
    ]
    checks.append({"eval_time": f"{wait + 3}m", "alertname": name, "exp_alerts": expected})
    if fired is None:
        checks.append({"eval_time": f"{wait + 10}m", "alertname": name, "exp_alerts": []})
    return {"name": f"{name}: {title}", "interval": "1m", "input_series": inputs, "alert_rule_test": checks}


def bucket_above(buckets: tuple[float, ...], threshold: float) -> tuple[float, float]:
    """The first bucket (lower, upper] whose lower bound is at least `threshold`: any quantile inside is above it."""
    lows = (0.0, *buckets)
    return next((lo, hi) for lo, hi in zip(lows, buckets, strict=False) if lo >= threshold)


def bucket_below(buckets: tuple[float, ...], threshold: float) -> tuple[float, float]:
    """The last bucket (lower, upper] whose upper bound is at most `threshold`: any quantile inside is at most it."""
    lows = (0.0, *buckets)
    return [(lo, hi) for lo, hi in zip(lows, buckets, strict=False) if hi <= threshold][-1]


def _model(scene: Scene) -> dict[str, str]:
    return {"namespace": scene.namespace, "model_name": scene.model}


def _grouped(s: Scene, name: str) -> dict[str, str]:
    """The labels alert `name` keeps of pod 0's series: those of its first `by (...)` (`le` aside), else the model's
    (a drift alert compares recorded series, which carry namespace and model_name)."""
    found = re.search(r"\bby \(([^)]*)\)", s.rule(name)["expr"])
    if found is None:
        return _model(s)
    by = {label.strip() for label in found.group(1).split(",")} - {"le"}
    return {k: v for k, v in s.engine(0).items() if k in by}


def kv_cache_nearly_full(s: Scene, name: str) -> list[dict[str, Any]]:
    full = (1 + s.targets.kv_cache_usage_threshold) / 2
    under = round(s.targets.kv_cache_usage_threshold - 0.05, 6)
    decoy = s.series("vllm:kv_cache_usage_perc", s.engine(9, model=OTHER_MODEL), f"0.99x{SPAN}")
    kv = "vllm:kv_cache_usage_perc"
    return [
        alert_test(
            s,
            name,
            "a full replica fires, with its pod",
            [s.series(kv, s.engine(0), f"{full}x{SPAN}"), s.series(kv, s.engine(1), f"0.5x{SPAN}"), decoy],
            [({**_model(s), "pod": s.pod(0)}, full)],
        ),
        alert_test(
            s, name, "below the threshold stays quiet", [s.series(kv, s.engine(0), f"{under}x{SPAN}"), decoy], None
        ),
    ]


def waiting_queue_growing(s: Scene, name: str) -> list[dict[str, Any]]:
    over = s.targets.queue_waiting_threshold + 1
    waiting = "vllm:num_requests_waiting"
    decoy = s.series(waiting, s.engine(9, model=OTHER_MODEL), f"{over}+1x{SPAN}")
    wait = minutes(s.rule(name)["for"])
    return [
        alert_test(
            s,
            name,
            "a queue above the threshold and growing fires",
            [s.series(waiting, s.engine(0), f"{over}+1x{SPAN}"), decoy],
            [(_grouped(s, name), over + wait + 3)],
        ),
        alert_test(
            s,
            name,
            "a long but steady queue stays quiet",
            [s.series(waiting, s.engine(0), f"{over + 4}x{SPAN}"), decoy],
            None,
        ),
    ]


def _histogram_alert(
    s: Scene, name: str, histogram: str, threshold: float, q: float, extra: Callable[..., list]
) -> list[dict[str, Any]]:
    """Alert `name` on quantile `q` of `histogram` above `threshold`: every observation in the first bucket above it
    fires (at the interpolated quantile), every one in the last bucket below it does not."""
    lo, hi = bucket_above(BUCKETS[histogram], threshold)
    low = bucket_below(BUCKETS[histogram], threshold)[1]
    decoy = s.histogram(histogram, s.engine(9, model=OTHER_MODEL), {hi: 60})
    return [
        alert_test(
            s,
            name,
            f"every observation in ({lo}, {hi}] fires",
            s.histogram(histogram, s.engine(0), {hi: 60}) + extra(0),
            [(_grouped(s, name), lo + (hi - lo) * q)],
        ),
        alert_test(
            s,
            name,
            f"every observation at most {low} stays quiet",
            s.histogram(histogram, s.engine(0), {low: 60}) + extra(0) + decoy + extra(9, model=OTHER_MODEL),
            None,
        ),
    ]


def _nothing(*_: Any, **__: Any) -> list[dict[str, str]]:
    return []


def ttft_above_slo(s: Scene, name: str) -> list[dict[str, Any]]:
    return _histogram_alert(s, name, TTFT, s.targets.ttft_p99_seconds, 0.99, _nothing)


def itl_above_slo(s: Scene, name: str) -> list[dict[str, Any]]:
    return _histogram_alert(s, name, ITL, s.targets.itl_p99_seconds, 0.99, _nothing)


def preemptions_rising(s: Scene, name: str) -> list[dict[str, Any]]:
    counter = "vllm:num_preemptions_total"
    decoy = s.series(counter, s.engine(9, model=OTHER_MODEL), f"0+60x{SPAN}")
    return [
        alert_test(
            s,
            name,
            "one preemption a second fires",
            [s.series(counter, s.engine(0), f"0+60x{SPAN}"), decoy],
            [(_grouped(s, name), 1.0)],
        ),
        alert_test(
            s, name, "no new preemption stays quiet", [s.series(counter, s.engine(0), f"100x{SPAN}"), decoy], None
        ),
    ]


def target_down(s: Scene, name: str) -> list[dict[str, Any]]:
    def up(n: int, value: int, **target: str) -> dict[str, str]:
        return {"series": series_text("up", s.target(n, **target)), "values": f"{value}x{SPAN}"}

    decoys = [up(8, 0, job="other-job"), up(9, 0, namespace="other-namespace")]
    return [
        alert_test(s, name, "a target that does not answer fires", [up(0, 0), up(1, 1), *decoys], [(s.target(0), 0.0)]),
        alert_test(s, name, "targets that answer stay quiet", [up(0, 1), *decoys], None),
    ]


def itl_above_plan(s: Scene, name: str) -> list[dict[str, Any]]:
    assert s.planned_itl_seconds is not None
    return _histogram_alert(s, name, ITL, s.planned_itl_seconds * DRIFT.itl_p50_ratio, 0.5, _nothing)


def ttft_above_plan(s: Scene, name: str) -> list[dict[str, Any]]:
    assert s.planned_ttft_seconds is not None
    threshold = s.planned_ttft_seconds * DRIFT.ttft_p50_ratio

    def idle(n: int, **labels: str) -> list[dict[str, str]]:
        return [s.series("vllm:num_requests_waiting", s.engine(n, **labels), f"0x{SPAN}")]

    cases = _histogram_alert(s, name, TTFT, threshold, 0.5, idle)
    hi = bucket_above(TTFT_BUCKETS, threshold)[1]
    queued = s.series("vllm:num_requests_waiting", s.engine(0), f"{math.ceil(DRIFT.ttft_max_average_waiting)}x{SPAN}")
    cases.append(
        alert_test(
            s,
            name,
            "the same first tokens behind a queue stay quiet",
            [*s.histogram(TTFT, s.engine(0), {hi: 60}), queued],
            None,
        )
    )
    return cases


def prefill_time_above_plan(s: Scene, name: str) -> list[dict[str, Any]]:
    assert s.planned_prefill_seconds is not None
    return _histogram_alert(s, name, PREFILL, s.planned_prefill_seconds * DRIFT.ttft_p50_ratio, 0.5, _nothing)


def kv_cache_below_plan(s: Scene, name: str) -> list[dict[str, Any]]:
    assert s.planned_kv_cache_tokens is not None
    limit = kv_cache_alert_limit(s.planned_kv_cache_tokens)

    def info(n: int, tokens: int, **target: str) -> dict[str, str]:
        # Some of the CacheConfig fields vLLM 0.33 exports as labels (vllm/config/cache.py metrics_info); no model_name.
        labels = {**s.target(n, **target), "block_size": "16", "cache_dtype": "auto", "enable_prefix_caching": "True"}
        labels |= {
            "gpu_memory_utilization": "0.92",
            "num_gpu_blocks": str(tokens // 16),
            "kv_cache_size_tokens": str(tokens),
        }
        labels["engine"] = "0"
        if s.source is MetricSource.RAY:
            labels["ReplicaId"] = f"r{n}a1b2c3"
        return s.series("vllm:cache_config_info", labels, f"1x{SPAN}")

    decoys = [info(8, 100, job="other-job"), info(9, 100, namespace="other-namespace")]
    return [
        alert_test(
            s,
            name,
            f"{limit - 1} tokens (just under {100 - DRIFT.kv_cache_shortfall_percent} % of the plan) fires",
            [info(0, limit - 1), info(1, s.planned_kv_cache_tokens), *decoys],
            [({"namespace": s.namespace, "pod": s.pod(0), "kv_cache_size_tokens": str(limit - 1)}, 1.0)],
        ),
        alert_test(
            s,
            name,
            f"{limit} tokens and the planned {s.planned_kv_cache_tokens} stay quiet",
            [info(0, limit), info(1, s.planned_kv_cache_tokens), *decoys],
            None,
        ),
    ]


def engine_stalled(s: Scene, name: str) -> list[dict[str, Any]]:
    running, generated, prompted = (
        "vllm:num_requests_running",
        "vllm:generation_tokens_total",
        "vllm:prompt_tokens_total",
    )

    def engine(n: int, requests: int, tokens: str, model: str | None = None) -> list[dict[str, str]]:
        labels = s.engine(n, model=model)
        return [
            s.series(running, labels, f"{requests}x{SPAN}"),
            s.series(generated, labels, tokens),
            s.series(prompted, labels, "500x60"),
        ]

    decoy = engine(9, 3, f"1000x{SPAN}", model=OTHER_MODEL)
    by = [label.strip() for label in re.findall(r"max by \(([^)]*)\)", s.rule(name)["expr"])[0].split(",")]
    stalled = {k: v for k, v in s.engine(0).items() if k in by}
    return [
        alert_test(s, name, "requests running and no token for two minutes fires",
                   [*engine(0, 3, f"1000x{SPAN}"), *engine(1, 2, f"0+600x{SPAN}"), *decoy], [(stalled, 3.0)]),
        alert_test(s, name, "requests running with tokens flowing stay quiet",
                   [*engine(0, 3, f"0+600x{SPAN}"), *decoy], None),
        alert_test(s, name, "an idle engine stays quiet", [*engine(0, 0, f"1000x{SPAN}"), *decoy], None),
    ]  # fmt: skip


ALERT_CASES: dict[str, Callable[[Scene, str], list[dict[str, Any]]]] = {
    "KvCacheNearlyFull": kv_cache_nearly_full,
    "WaitingQueueGrowing": waiting_queue_growing,
    "TimeToFirstTokenAboveSlo": ttft_above_slo,
    "InterTokenLatencyAboveSlo": itl_above_slo,
    "PreemptionsRising": preemptions_rising,
    "InterTokenLatencyAbovePlan": itl_above_plan,
    "TimeToFirstTokenAbovePlan": ttft_above_plan,
    "PrefillTimeAbovePlan": prefill_time_above_plan,
    "KvCacheBelowPlan": kv_cache_below_plan,
    "EngineStalled": engine_stalled,
}
# The workload alerts named for what they watch rather than the engine.


# A disaggregated workload's alerts that read one pool only (the others read both, each pool on its own), and those
# of one pool's objects: the decode Deployment's readiness and series (a prefill pool at zero still serves).
DECODE_POOL_ALERTS = ("InterTokenLatencyAboveSlo", "InterTokenLatencyAbovePlan", "NoReadyReplica", "SeriesAbsent")
PREFILL_POOL_ALERTS = ("PrefillTimeAbovePlan",)


def alert_cases(s: Scene, name: str) -> list[dict[str, Any]]:
    """The promtool tests of alert `name` of scene `s`; an alert without cases fails here. A disaggregated
    workload's: a per-pool alert fires on either pool (with its job where it groups by pool); a one-pool alert fires
    on its pool, and the other pool's same series stay quiet."""
    if s.prefill_job is None:
        return _pool_cases(s, name)
    decode, prefill = s, s.prefill_pool()
    for pool, other, alerts in ((decode, prefill, DECODE_POOL_ALERTS), (prefill, decode, PREFILL_POOL_ALERTS)):
        if name.removeprefix(s.prefix) in alerts:
            if name.endswith(("NoReadyReplica", "SeriesAbsent")):
                return _pool_cases(pool, name)
            (firing, *_) = _pool_cases(other, name)
            title = firing["name"].split(": ", 1)[1]
            quiet = alert_test(s, name, f"on {other.job}, what fires on that pool ({title}) stays quiet",
                               firing["input_series"], None)  # fmt: skip
            return [*_pool_cases(pool, name), quiet]
    return _pool_cases(decode, name) + _pool_cases(prefill, name)


def _pool_cases(s: Scene, name: str) -> list[dict[str, Any]]:
    if name == s.target_down:
        return target_down(s, name)
    from tests.promtool_fault_cases import WORKLOAD_CASES  # it builds on this module

    if name in WORKLOAD_CASES:
        return WORKLOAD_CASES[name](s, name)
    assert name.startswith(s.prefix) and name.removeprefix(s.prefix) in ALERT_CASES, f"no promtool case for {name}"
    return ALERT_CASES[name.removeprefix(s.prefix)](s, name)


def sample(name: str, labels: Mapping[str, str], value: float) -> dict[str, Any]:
    return {"labels": series_text(name, labels), "value": value}


# The observed quantiles: 50 observations a second in the first bucket, 48 in the second, 2 in the third (split over
# two pods), so p50 is the first bucket's upper bound and p99 the middle of the third.
_QUANTILE_BUCKETS = {ITL: (0.05, 0.075, 0.15), TTFT: (0.25, 0.5, 1.0), PREFILL: (0.3, 0.5, 1.5)}
_RECORDED = {
    "llm_eks:prefill_seconds:p50_10m": 0.3,
    "llm_eks:prefill_seconds:p99_10m": 1.25,  # 1.0 + (1.5 - 1.0) x (99 - 98) / 2
    "llm_eks:itl_seconds:p50_10m": 0.05,
    "llm_eks:itl_seconds:p99_10m": 0.125,  # 0.1 + (0.15 - 0.1) x (99 - 98) / 2
    "llm_eks:ttft_seconds:p50_10m": 0.25,
    "llm_eks:ttft_seconds:p99_10m": 0.875,  # 0.75 + (1.0 - 0.75) x (99 - 98) / 2
}


def record_cases(s: Scene, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One promtool test with an exact expected sample for every recording rule among `rules` of scene `s`."""
    inputs = []
    for histogram, (a, b, c) in _QUANTILE_BUCKETS.items():
        # A disaggregated workload: ITL on the decode pool, the prefill time on the prefill pool, and the same
        # histogram on the other pool far above, which a record that reads the wrong pool would count.
        pool, other = s, None
        if s.prefill_job is not None:
            pool, other = (s.prefill_pool(), s) if histogram == PREFILL else (s, s.prefill_pool())
        for pod in (0, 1):
            inputs += pool.histogram(histogram, pool.engine(pod), {a: 1500, b: 1440, c: 60})
        inputs += s.histogram(histogram, s.engine(9, model=OTHER_MODEL), {BUCKETS[histogram][-1]: 600})
        if other is not None:
            inputs += other.histogram(histogram, other.engine(2), {BUCKETS[histogram][-1]: 600})
    plan = {
        "llm_eks:plan_kv_cache_tokens": s.planned_kv_cache_tokens,
        "llm_eks:plan_itl_seconds": s.planned_itl_seconds,
        "llm_eks:plan_ttft_seconds": s.planned_ttft_seconds,
        "llm_eks:plan_prefill_seconds": s.planned_prefill_seconds,
    }
    checks = []
    for rule in rules:
        if "record" not in rule:
            continue
        name = rule["record"]
        expected = plan[name] if name in plan else _RECORDED.get(name)
        assert expected is not None, f"no promtool case for recording rule {name}"
        checks.append({"expr": name, "eval_time": "20m", "exp_samples": [sample(name, _model(s), expected)]})
    return [
        {
            "name": f"{s.rule_name}: recording rules",
            "interval": "1m",
            "input_series": inputs,
            "promql_expr_test": checks,
        }
    ]


def _ready(s: Scene, value: int) -> dict[str, str]:
    """kube-state-metrics' ready replicas of the scene's Deployment, or of the leader StatefulSet a LeaderWorkerSet
    names after itself (its own labels; the ServiceMonitor of KSM keeps them: honorLabels)."""
    kind = "statefulset" if s.replica_kind == "statefulset" else "deployment"
    labels = {"namespace": s.namespace, kind: s.job, "job": "kube-state-metrics", "instance": "10.0.2.9:8080"}
    return {"series": series_text(f"kube_{kind}_status_replicas_ready", labels), "values": f"{value}x{SPAN}"}


def _keda_case(trigger: Mapping[str, Any], title: str, inputs: list[dict[str, str]], samples: list[dict[str, Any]]
               ) -> dict[str, Any]:  # fmt: skip
    query = trigger["metadata"]["query"]
    return {
        "name": f"KEDA {trigger['name']} ({title}): {query}",
        "interval": "1m",
        "input_series": inputs,
        "promql_expr_test": [{"expr": query, "eval_time": "5m", "exp_samples": samples}],
    }


def held_request_cases(s: Scene, trigger: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The held-requests trigger (workloads behind the gateway): the picker holds requests (their sum for this pool,
    another pool's not counted), whether a replica is ready or not (what wakes a workload at zero); the picker is
    scraped and holds none (its gauge has no series yet: 0, no error); no picker is scraped while a replica is ready
    (empty: an error to KEDA, so its fallback, never a scale-in) or while none is (0: a model asleep stays asleep)."""
    assert trigger["metadata"]["ignoreNullValues"] == "false", "an empty result must be an error, not a 0"
    picker = {"namespace": s.namespace, "job": f"{s.workload_name}-epp", "instance": "10.0.2.7:9090"}
    queue = "llm_d_epp_flow_control_queue_size"

    def held(fairness: str, pool: str, value: int) -> dict[str, str]:
        labels = {**picker, "fairness_id": fairness, "priority": "0", "inference_pool": pool}
        return {"series": series_text(queue, labels), "values": f"{value}x{SPAN}"}

    up = {"series": series_text("up", picker), "values": f"1x{SPAN}"}
    down = {"series": series_text("up", picker), "values": f"0x{SPAN}"}
    pool = s.workload_name
    holding = [up, held("team-a", pool, 2), held("team-b", pool, 3), held("team-a", "other", 100)]
    five, zero = [{"labels": "{}", "value": 5}], [{"labels": "{}", "value": 0}]
    return [
        _keda_case(trigger, "holding, a replica ready", [*holding, _ready(s, 1)], five),
        _keda_case(trigger, "holding, no replica ready", [*holding, _ready(s, 0)], five),
        _keda_case(trigger, "scraped, holding none", [up, _ready(s, 1)], zero),
        _keda_case(trigger, "not scraped, a replica ready", [down, _ready(s, 1)], []),
        _keda_case(trigger, "not scraped, no replica ready", [down, _ready(s, 0)], zero),
    ]


def keda_cases(s: Scene, trigger: Mapping[str, Any]) -> list[dict[str, Any]]:
    """promtool tests of one KEDA prometheus trigger's query over scene `s`'s pods, with its exact value: the
    model's series add up (another model's do not count); with the series missing the query is empty while replicas
    are ready (KEDA then errors and its fallback holds the count) and 0 while none is (a model starting or asleep);
    a scale-to-zero workload's query reads 0 too when kube-state-metrics has no series for it."""
    if trigger["name"] == "held-requests":
        return held_request_cases(s, trigger)
    inputs: dict[str, tuple[str, tuple[float, float], float]] = {
        # Waiting requests of the model's two pods add up; the other model's 100 do not count.
        "waiting-requests": ("vllm:num_requests_waiting", (3, 4), 7),
        # KV-cache use averages over the model's pods: (0.25 + 0.75) / 2.
        "kv-cache-usage": ("vllm:kv_cache_usage_perc", (0.25, 0.75), 0.5),
    }
    assert trigger["name"] in inputs, f"no promtool case for KEDA trigger {trigger['name']}"
    assert trigger["metadata"]["ignoreNullValues"] == "false", "an empty result must be an error, not a 0"
    metric, (first, second), value = inputs[trigger["name"]]
    other = s.series(metric, s.engine(9, model=OTHER_MODEL), f"100x{SPAN}")
    series = [s.series(metric, s.engine(0), f"{first}x{SPAN}"), s.series(metric, s.engine(1), f"{second}x{SPAN}")]
    query = trigger["metadata"]["query"]
    asleep = "vector(0) unless" in query

    def case(title: str, inputs: list[dict[str, str]], samples: list[dict[str, Any]]) -> dict[str, Any]:
        return _keda_case(trigger, title, inputs, samples)

    one = [{"labels": "{}", "value": value}]
    zero = [{"labels": "{}", "value": 0}]
    cases = [
        case("two ready replicas", [*series, other, _ready(s, 2)], one),
        case("series missing, a replica ready", [other, _ready(s, 1)], []),
        case("no replica ready", [other, _ready(s, 0)], zero),
        case("kube-state-metrics down, series present", [*series, other], one),
    ]
    # Without kube-state-metrics and without the series the query is empty (the fallback holds), except for a
    # workload that sleeps on its schedule, which then reads 0 (it must not wake).
    cases.append(case("kube-state-metrics down, series missing", [other], zero if asleep else []))
    return cases
