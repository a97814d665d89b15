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
from dataclasses import dataclass
from typing import Any

from llm_eks.manifests.monitoring_drift import DRIFT, kv_cache_alert_limit
from llm_eks.manifests.monitoring_targets import MonitoringTargets
from llm_eks.manifests.promql import MetricSource

# vLLM 0.33's default buckets (vllm/v1/metrics/buckets.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
TTFT_BUCKETS += (40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0)
ITL_BUCKETS += (80.0,)
TTFT = "vllm:time_to_first_token_seconds_bucket"
ITL = "vllm:inter_token_latency_seconds_bucket"
BUCKETS = {TTFT: TTFT_BUCKETS, ITL: ITL_BUCKETS}
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
            [(_model(s), over + wait + 3)],
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
            [(_model(s), lo + (hi - lo) * q)],
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
            [(_model(s), 1.0)],
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


def ksm(name: str, labels: Mapping[str, str], values: str) -> dict[str, str]:
    """A kube-state-metrics series (its own labels; the chart's ServiceMonitor keeps them: honorLabels)."""
    target = {"job": "kube-state-metrics", "instance": "10.0.2.9:8080", "container": "kube-state-metrics"}
    return {"series": series_text(name, {**labels, **target}), "values": values}


def _replica_series(s: Scene, metric: str, values: dict[str, str], namespace: str | None = None) -> list[dict]:
    """kube-state-metrics' `metric` for each replica object of the scene (`values` by object name)."""
    kind = s.replica_kind
    if metric == "spec_replicas" and kind == "statefulset":
        metric = "replicas"
    return [
        ksm(f"kube_{kind}_{metric}", {"namespace": namespace or s.namespace, kind: owner}, value)
        for owner, value in values.items()
    ]


def _workload(s: Scene, ready: int, wanted: int, created: int, *, owner: str | None = None) -> list[dict]:
    """The scene's replica objects (or `owner`): the first holds `ready` of `wanted` replicas, the others (a floor)
    none of none; all created at `created` seconds."""
    names = (owner,) if owner else (s.replica_names or (s.job,))
    first, rest = names[0], names[1:]
    out = _replica_series(s, "status_replicas_ready", {first: f"{ready}x{SPAN}", **{n: f"0x{SPAN}" for n in rest}})
    out += _replica_series(s, "spec_replicas", {first: f"{wanted}x{SPAN}", **{n: f"0x{SPAN}" for n in rest}})
    return out + _replica_series(s, "created", {n: f"{created}x{SPAN}" for n in names})


def no_ready_replica(s: Scene, name: str) -> list[dict[str, Any]]:
    cold = _cold_start_seconds(s, name)
    # Another workload of the namespace down too: not this alert's business.
    decoy = _workload(s, 0, 1, -3600, owner="vllm-other")
    namespace = {"namespace": s.namespace}
    assert cold > 60, "the starting case below needs a cold start above a minute"
    return [
        alert_test(s, name, "wanted, none ready, older than its cold start fires", _workload(s, 0, 1, -3600) + decoy,
                   [(namespace, 0.0)]),
        alert_test(s, name, "one ready stays quiet", _workload(s, 1, 1, -3600) + decoy, None),
        # Created at 600 s: younger than its cold start at every check (4 and 11 minutes).
        alert_test(s, name, "a new workload still starting stays quiet", _workload(s, 0, 1, 600) + decoy, None),
        alert_test(s, name, "asleep (none wanted) stays quiet", _workload(s, 0, 0, -3600) + decoy, None),
    ]  # fmt: skip


def _cold_start_seconds(s: Scene, name: str) -> int:
    """The cold start the rule compares a workload's age with (its last number)."""
    return int(re.findall(r"\d+", s.rule(name)["expr"])[-1])


def series_absent(s: Scene, name: str) -> list[dict[str, Any]]:
    waiting = "vllm:num_requests_waiting"
    other = s.series(waiting, s.engine(9, model=OTHER_MODEL), f"3x{SPAN}")
    present = s.series(waiting, s.engine(0), f"2x{SPAN}")
    return [
        alert_test(s, name, "replicas ready, no series of the model fires", [*_workload(s, 1, 1, 0), other],
                   [({"namespace": s.namespace}, 1.0)]),
        alert_test(s, name, "replicas ready with their series stays quiet", [*_workload(s, 1, 1, 0), present, other],
                   None),
        alert_test(s, name, "asleep without series stays quiet", [*_workload(s, 0, 0, 0), other], None),
    ]  # fmt: skip


def keda_scaler_errors(s: Scene, name: str) -> list[dict[str, Any]]:
    assert s.scaled_object is not None

    def errors(scaled: str, values: str) -> dict[str, str]:
        # KEDA's own labels (pkg/metricscollector/prommetrics.go, metricLabels), its `namespace` renamed
        # exported_namespace by the scrape (the chart's PodMonitor keeps the target's namespace, keda).
        labels = {
            "exported_namespace": s.namespace,
            "scaledObject": scaled,
            "scaler": "prometheusScaler",
            "triggerIndex": "0",
            "metric": "s0-prometheus",
            "type": "scaledobject",
            "namespace": "keda",
            "job": "keda-operator",
            "pod": "keda-operator-7d9f8b6c5-abcde",
            "instance": "10.0.3.4:8080",
        }
        return {"series": series_text("keda_scaler_detail_errors_total", labels), "values": values}

    decoy = errors("vllm-other", f"0+60x{SPAN}")
    return [
        alert_test(s, name, "a failing read a second with replicas ready fires",
                   [errors(s.scaled_object, f"0+60x{SPAN}"), decoy, *_workload(s, 1, 1, 0)],
                   [({"scaledObject": s.scaled_object}, 1.0)]),
        alert_test(s, name, "no new error stays quiet", [errors(s.scaled_object, f"5x{SPAN}"), decoy,
                                                           *_workload(s, 1, 1, 0)], None),
        alert_test(s, name, "errors while asleep stay quiet",
                   [errors(s.scaled_object, f"0+60x{SPAN}"), decoy, *_workload(s, 0, 0, 0)], None),
    ]  # fmt: skip


def _gpu_resource(s: Scene) -> str:
    return re.findall(r'resource="([^"]+)"', s.rule("GpuPodsPendingTooLong")["expr"])[0]


def gpu_pods_pending(s: Scene, name: str) -> list[dict[str, Any]]:
    def pod(pod_name: str, phase: str, gpus: int, namespace: str | None = None) -> list[dict[str, str]]:
        where = {"namespace": namespace or s.namespace, "pod": pod_name}
        phases = [
            ksm("kube_pod_status_phase", {**where, "uid": f"u-{pod_name}", "phase": p}, f"{int(p == phase)}x{SPAN}")
            for p in ("Pending", "Running")
        ]
        container = "ray-worker" if s.source is MetricSource.RAY else "vllm"
        requests = {**where, "container": container, "node": "", "uid": f"u-{pod_name}"}
        resources = [("cpu", "core", 4), ("memory", "byte", 8 << 30)]
        if gpus:
            resources.append((_gpu_resource(s), "integer", gpus))
        return phases + [
            ksm("kube_pod_container_resource_requests", {**requests, "resource": r, "unit": u}, f"{v}x{SPAN}")
            for r, u, v in resources
        ]

    # Another workload's GPU pod pending in the same namespace, and a pod of this name in another namespace.
    decoys = pod("vllm-other-6b7f9c8d4-x2x0q", "Pending", 1) + pod(s.pod(5), "Pending", 1, "other-namespace")
    return [
        alert_test(s, name, "a GPU pod pending past the cold start fires", pod(s.pod(0), "Pending", 1) + decoys,
                   [({"namespace": s.namespace, "pod": s.pod(0)}, 1.0)]),
        alert_test(s, name, "a running GPU pod stays quiet", pod(s.pod(0), "Running", 1) + decoys, None),
        alert_test(s, name, "a pending pod without GPUs stays quiet", pod(s.pod(0), "Pending", 0) + decoys, None),
    ]  # fmt: skip


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


def no_healthy_serve_replica(s: Scene, name: str) -> list[dict[str, Any]]:
    def healthy(values: str, deployment: str | None = None) -> dict[str, str]:
        labels = {**s.target(), "pod": f"{s.job}-k8x2p-head-q7w2e", "application": "llm"}
        labels |= {"deployment": deployment or s.deployment, "replica": "r0a1b2c3"}
        return {"series": series_text("ray_serve_deployment_replica_healthy", labels), "values": values}

    decoy = healthy(f"0x{SPAN}", deployment="OpenAiIngress")
    none: dict[str, str] = {}
    return [
        alert_test(s, name, "healthy, then none healthy fires", [healthy(f"1 0x{SPAN}"), decoy], [(none, 0.0)]),
        alert_test(s, name, "healthy, then gone with the head fires", [healthy("1 stale"), decoy], [(none, 0.0)]),
        alert_test(s, name, "always healthy stays quiet", [healthy(f"1x{SPAN}"), decoy], None),
        alert_test(s, name, "never healthy yet (starting) stays quiet", [healthy(f"0x{SPAN}"), decoy], None),
    ]


ALERT_CASES: dict[str, Callable[[Scene, str], list[dict[str, Any]]]] = {
    "KvCacheNearlyFull": kv_cache_nearly_full,
    "WaitingQueueGrowing": waiting_queue_growing,
    "TimeToFirstTokenAboveSlo": ttft_above_slo,
    "InterTokenLatencyAboveSlo": itl_above_slo,
    "PreemptionsRising": preemptions_rising,
    "InterTokenLatencyAbovePlan": itl_above_plan,
    "TimeToFirstTokenAbovePlan": ttft_above_plan,
    "KvCacheBelowPlan": kv_cache_below_plan,
    "EngineStalled": engine_stalled,
}
# The workload alerts named for what they watch rather than the engine.
WORKLOAD_CASES: dict[str, Callable[[Scene, str], list[dict[str, Any]]]] = {
    "VllmNoReadyReplica": no_ready_replica,
    "VllmSeriesAbsent": series_absent,
    "KedaScalerErrors": keda_scaler_errors,
    "GpuPodsPendingTooLong": gpu_pods_pending,
    "RayServeNoHealthyReplica": no_healthy_serve_replica,
}


def alert_cases(s: Scene, name: str) -> list[dict[str, Any]]:
    """The promtool tests of alert `name` of scene `s`; an alert without cases fails here."""
    if name == s.target_down:
        return target_down(s, name)
    if name in WORKLOAD_CASES:
        return WORKLOAD_CASES[name](s, name)
    assert name.startswith(s.prefix) and name.removeprefix(s.prefix) in ALERT_CASES, f"no promtool case for {name}"
    return ALERT_CASES[name.removeprefix(s.prefix)](s, name)


def sample(name: str, labels: Mapping[str, str], value: float) -> dict[str, Any]:
    return {"labels": series_text(name, labels), "value": value}


# The observed quantiles: 50 observations a second in the first bucket, 48 in the second, 2 in the third (split over
# two pods), so p50 is the first bucket's upper bound and p99 the middle of the third.
_QUANTILE_BUCKETS = {ITL: (0.05, 0.075, 0.15), TTFT: (0.25, 0.5, 1.0)}
_RECORDED = {
    "llm_eks:itl_seconds:p50_10m": 0.05,
    "llm_eks:itl_seconds:p99_10m": 0.125,  # 0.1 + (0.15 - 0.1) x (99 - 98) / 2
    "llm_eks:ttft_seconds:p50_10m": 0.25,
    "llm_eks:ttft_seconds:p99_10m": 0.875,  # 0.75 + (1.0 - 0.75) x (99 - 98) / 2
}


def record_cases(s: Scene, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One promtool test with an exact expected sample for every recording rule among `rules` of scene `s`."""
    inputs = []
    for histogram, (a, b, c) in _QUANTILE_BUCKETS.items():
        for pod in (0, 1):
            inputs += s.histogram(histogram, s.engine(pod), {a: 1500, b: 1440, c: 60})
        inputs += s.histogram(histogram, s.engine(9, model=OTHER_MODEL), {BUCKETS[histogram][-1]: 600})
    plan = {
        "llm_eks:plan_kv_cache_tokens": s.planned_kv_cache_tokens,
        "llm_eks:plan_itl_seconds": s.planned_itl_seconds,
        "llm_eks:plan_ttft_seconds": s.planned_ttft_seconds,
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
    """kube-state-metrics' ready replicas of the scene's Deployment (its own labels; the ServiceMonitor of KSM keeps
    them: honorLabels)."""
    labels = {"namespace": s.namespace, "deployment": s.job, "job": "kube-state-metrics", "instance": "10.0.2.9:8080"}
    return {"series": series_text("kube_deployment_status_replicas_ready", labels), "values": f"{value}x{SPAN}"}


def keda_cases(s: Scene, trigger: Mapping[str, Any]) -> list[dict[str, Any]]:
    """promtool tests of one KEDA prometheus trigger's query over scene `s`'s pods, with its exact value: the
    model's series add up (another model's do not count); with the series missing the query is empty while replicas
    are ready (KEDA then errors and its fallback holds the count) and 0 while none is (a model starting or asleep);
    a scale-to-zero workload's query reads 0 too when kube-state-metrics has no series for it."""
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
        return {
            "name": f"KEDA {trigger['name']} ({title}): {query}",
            "interval": "1m",
            "input_series": inputs,
            "promql_expr_test": [{"expr": query, "eval_time": "5m", "exp_samples": samples}],
        }

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


# -- rules of no workload: the GPU rules, the gateway's, an endpoint picker's ----------------------------------------

InfraCases = Callable[[Mapping[str, Any], str], list[dict[str, Any]]]


def _dcgm_xid(values: str, gpu: str = "0") -> dict[str, str]:
    """DCGM_FI_DEV_XID_ERRORS of one GPU as the exporter labels it (internal/pkg/transformation/const.go) and our
    ServiceMonitor keeps it (honorLabels: the pod and namespace are those of the pod holding the GPU)."""
    labels = {
        "gpu": gpu,
        "UUID": f"GPU-4f0c2a7e-0000-1111-2222-33334444555{gpu}",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA L40S",
        "Hostname": "ip-10-0-1-23.us-west-2.compute.internal",
        "pci_bus_id": "00000000:35:00.0",
        "DCGM_FI_DRIVER_VERSION": "580.95.05",
        "container": "vllm",
        "namespace": "inference",
        "pod": "vllm-llama-6b7f9c8d4-x2x0q",
        "job": "dcgm-exporter",
        "instance": "10.0.1.23:9400",
        "endpoint": "metrics",
        "service": "dcgm-exporter",
    }
    return {"series": series_text("DCGM_FI_DEV_XID_ERRORS", labels), "values": values}


def _xid_labels(gpu: str, xid: str) -> dict[str, str]:
    kept = ("Hostname", "UUID", "gpu", "modelName", "namespace", "pod")
    labels = dict(re.findall(r'(\w+)="([^"]*)"', _dcgm_xid("0", gpu)["series"]))
    return {**{k: labels[k] for k in kept}, "xid": xid}


def gpu_xid_fatal(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    return [
        rule_alert_test(rule, "Xid 79 (fallen off the bus) fires",
                        [_dcgm_xid(f"0 79x{SPAN}"), _dcgm_xid(f"13x{SPAN}", "1")], [(_xid_labels("0", "79"), 1.0)]),
        rule_alert_test(rule, "an application Xid (13) stays quiet", [_dcgm_xid(f"0 13x{SPAN}")], None),
        rule_alert_test(rule, "no Xid stays quiet", [_dcgm_xid(f"0x{SPAN}")], None),
    ]  # fmt: skip


def gpu_xid_error(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    fired = dict(re.findall(r'(\w+)="([^"]*)"', _dcgm_xid("0")["series"]))
    return [
        rule_alert_test(rule, "a new Xid 13 fires, with its code", [_dcgm_xid(f"0 13x{SPAN}")], [(fired, 13.0)]),
        rule_alert_test(rule, "a fatal Xid is GpuXidFatal's, not this one", [_dcgm_xid(f"0 79x{SPAN}")], None),
        rule_alert_test(rule, "an old Xid, held, stays quiet", [_dcgm_xid(f"13x{SPAN}")], None),
    ]  # fmt: skip


def _istio(namespace: str, code: str, per_minute: int, reporter: str = "source") -> dict[str, str]:
    """istio_requests_total of the gateway's Envoy (Istio's standard labels, the PodMonitor's target labels)."""
    labels = {
        "namespace": namespace,
        "pod": "inference-istio-7c9d8f6b5-q2w3e",
        "job": f"{namespace}/inference",
        "instance": "10.0.1.40:15020",
        "reporter": reporter,
        "response_code": code,
        "destination_service_name": "vllm-llama",
        "destination_service_namespace": "inference-llama",
        "source_workload": "inference-istio",
    }
    return {"series": series_text("istio_requests_total", labels), "values": f"0+{per_minute}x{SPAN}"}


def gateway_error_ratio(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    # An Envoy sidecar's destination-side report of 5xx is not the gateway's.
    decoy = _istio(namespace, "503", 600, reporter="destination")
    return [
        rule_alert_test(rule, "one request in ten failing fires",
                        [_istio(namespace, "200", 540), _istio(namespace, "503", 60), decoy], [({}, 0.1)]),
        rule_alert_test(rule, "one in a hundred stays quiet",
                        [_istio(namespace, "200", 594), _istio(namespace, "503", 6), decoy], None),
        rule_alert_test(rule, "half failing at two requests a minute stays quiet",
                        [_istio(namespace, "200", 1), _istio(namespace, "503", 1), decoy], None),
    ]  # fmt: skip


def _deployment(namespace: str, name: str, ready: int, wanted: int, pods: int | None = None) -> list[dict[str, str]]:
    where = {"namespace": namespace, "deployment": name}
    return [
        ksm("kube_deployment_status_replicas_ready", where, f"{ready}x{SPAN}"),
        ksm("kube_deployment_spec_replicas", where, f"{wanted}x{SPAN}"),
        ksm("kube_deployment_status_replicas", where, f"{wanted if pods is None else pods}x{SPAN}"),
    ]


def _deployment_of(rule: Mapping[str, Any]) -> str:
    return re.findall(r'deployment="([^"]+)"', rule["expr"])[0]


def processor_down(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    name = _deployment_of(rule)
    decoy = _deployment("inference-llama", name, 0, 2)
    return [
        rule_alert_test(rule, "none ready fires", _deployment(namespace, name, 0, 2) + decoy, [({}, 0.0)]),
        rule_alert_test(rule, "one ready stays quiet", _deployment(namespace, name, 1, 2) + decoy, None),
    ]


def processor_degraded(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    name = _deployment_of(rule)
    return [
        rule_alert_test(rule, "one of two ready fires", _deployment(namespace, name, 1, 2), [({}, 1.0)]),
        rule_alert_test(rule, "two of two stay quiet", _deployment(namespace, name, 2, 2), None),
    ]


def picker_down(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    name = _deployment_of(rule)
    return [
        rule_alert_test(rule, "no leader ready fires", _deployment(namespace, name, 0, 2), [({}, 0.0)]),
        # Only the leader is ever Ready (leader election): one ready of two is the normal state.
        rule_alert_test(rule, "the leader ready stays quiet", _deployment(namespace, name, 1, 2), None),
        rule_alert_test(rule, "scaled to zero on purpose stays quiet", _deployment(namespace, name, 0, 0), None),
    ]


def picker_standby_missing(rule: Mapping[str, Any], namespace: str) -> list[dict[str, Any]]:
    name = _deployment_of(rule)
    return [
        rule_alert_test(rule, "one pod of two fires", _deployment(namespace, name, 1, 2, pods=1), [({}, 1.0)]),
        rule_alert_test(rule, "leader and standby stay quiet", _deployment(namespace, name, 1, 2, pods=2), None),
    ]


INFRASTRUCTURE_CASES: dict[str, InfraCases] = {
    "GpuXidFatal": gpu_xid_fatal,
    "GpuXidError": gpu_xid_error,
    "GatewayErrorRatioHigh": gateway_error_ratio,
    "GatewayPayloadProcessorDown": processor_down,
    "GatewayPayloadProcessorDegraded": processor_degraded,
    "EndpointPickerDown": picker_down,
    "EndpointPickerStandbyMissing": picker_standby_missing,
}
