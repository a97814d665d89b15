"""`VllmAutoscalingChart`: a KEDA ScaledObject that scales the vLLM Deployment on vLLM's own queue.

A separate chart from `VllmChart` so it can be applied after KEDA's CRDs exist, while the workload does not wait.

Triggers (Prometheus, each query wrapped so it returns exactly one element):
- `sum(vllm:num_requests_waiting{model_name="<served>"})` with metricType AverageValue: the HPA wants
  ceil(waiting / threshold) replicas, i.e. `threshold` is "waiting requests per replica". It does not depend on how
  many replicas exist, so replicas still loading a model do not make it compound.
- `avg(vllm:kv_cache_usage_perc{model_name="<served>"})` (0..1) with metricType Value: the HPA wants
  ceil(ready replicas x average / target), proportional scaling like CPU utilisation. avg, not max: one replica
  filled by a few long contexts is not relieved by adding replicas (its requests stay where they are), the fleet
  average is what new replicas lower. AverageValue would divide a ratio by the replica count again.

Failing safe (KEDA 2.20.2, read in kedacore/keda@v2.20.2):
- `fallback` on every ScaledObject: after more than `failureThreshold` consecutive failed reads of a trigger
  (pkg/fallback/fallback.go GetMetricsWithFallback, `NumberOfFailures > FailureThreshold`), KEDA answers the HPA
  with the metric that holds `max(current replicas, minimum)` (`currentReplicasIfHigher`, doFallback): a Prometheus
  or querier outage freezes the count where it is instead of letting the HPA act on nothing. (For a `Value` trigger
  the fallback divides by the ready pods, and with none it fails; the waiting-requests trigger, AverageValue, still
  holds the count then. Fallback also marks the scaler active, so a workload asleep at zero wakes one replica during
  an outage of its metrics: the safe direction.)
- `ignoreNullValues: "false"` on both vLLM triggers: KEDA's Prometheus scaler reads an empty result as 0 by default
  (pkg/scalers/prometheus_scaler.go, `default=true`), so vLLM's series going missing under load (a NetworkPolicy or
  ServiceMonitor change, a renamed metric) would scale the workload down to its minimum. Here an empty result is an
  error, and so reaches the fallback. Each query is guarded so it is empty only when it must be: while the workload
  has no ready replica it reads 0 (`... or on() (sum(kube_deployment_status_replicas_ready{...}) == 0)`, the
  kube-state-metrics v2.19.1 series), so a model that is starting, or asleep on its schedule, is no error; an
  absent kube-state-metrics also gives an empty guard, so the fallback holds then too. A scale-to-zero workload's
  guard also reads 0 when kube-state-metrics has no series for it at all, so its outage never wakes a sleeping
  model.

Behavior: up fast (no stabilization; +100 % or +N pods a minute, whichever is more), because a GPU replica needs
minutes before it helps; down slowly (a long stabilization window, then one pod per period), because removing a
replica that is needed again within its start-up time costs a full cold start, so the window must be at least the
planner's start-up estimate.

Scale to zero: vLLM's metrics vanish with its last pod, so they can never wake the Deployment. Two signals exist at
zero replicas:
- behind the gateway, the requests the workload's endpoint picker holds (`held_requests`): flow control keeps a
  request for a pool with no ready replica in its queue (llm-d router v0.10.0, "the scale-from-zero waiting room",
  pkg/epp/requestcontrol/admission.go) and exports the queue as `llm_d_epp_flow_control_queue_size` (gauge, labels
  fairness_id, priority, inference_pool; pkg/epp/metrics/llm_d_router_metrics.go). A third trigger reads it
  (AverageValue: held requests per replica, the waiting target; activationThreshold 0: one held request wakes the
  workload), so `min_replicas` may be 0 without a schedule. The hold outlasts detection and a cold start up to the
  AI Gateway's 300 s picker timeout (manifests/gateway/hold.py); past it the caller gets 503 with Retry-After.
  The query reads 0 while the picker is scraped and holds nothing (its gauge has no series before the first held
  request: `or on() (0 * sum(up{...} == 1))`), and nothing at all (`ignoreNullValues: "false"`: an error, so KEDA's
  fallback, the convention of every trigger here) while the picker is not scraped and the workload has ready
  replicas: a missing picker must not read as an idle one. Guarded like the vLLM triggers: with no ready replica a
  missing picker reads 0, so a model asleep stays asleep (its requests fail at the fail-closed picker anyway).
- the clock: `scale_to_zero` adds a KEDA cron trigger that keeps `replicas` running inside a working-hours window
  and lets the Deployment go to zero outside it once idle. Cold start: the first replica serves about (node launch +
  image pull + startup_seconds) after the window opens, so open it that much earlier; requests outside the window
  fail until it opens.
Without either, min_replicas 0 is refused.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, replace
from typing import Any

import cdk8s
from constructs import Construct

from llm_eks.error_codes import E130
from llm_eks.errors import ConfigError
from llm_eks.manifests.labels import VLLM_APP, app_labels, plain_object
from llm_eks.manifests.promql import ksm_workload
from llm_eks.manifests.query_endpoint import query_url
from llm_eks.manifests.vllm import LWS_API_VERSION, VllmProps, floor_name, validate_vllm_props
from llm_eks.manifests.vllm.disaggregated import prefill_name

# The environment's one query endpoint (a Thanos Querier deduplicating both Prometheus replicas): the same answer
# whichever replica is up (llm_eks.manifests.query_endpoint).
PROMETHEUS_URL = query_url()

_CRON_FIELD = r"[0-9*/,\-A-Za-z]+"
_CRON = re.compile(rf"^{_CRON_FIELD}( {_CRON_FIELD}){{4}}$")


# The HPA's longest stabilization window (autoscaling/v2 HPAScalingRules: at most one hour).
MAX_STABILIZATION_SECONDS = 3600
# KEDA's fallback: hold the current count (never below the minimum) once a trigger fails this many reads in a row.
FALLBACK_BEHAVIOR = "currentReplicasIfHigher"


@dataclass(frozen=True)
class ScaleToZeroSchedule:
    """Working hours for a Deployment that may sit at zero replicas outside them (KEDA cron trigger)."""

    # IANA time zone, e.g. "Europe/Paris".
    timezone: str
    # Cron expressions (minute hour day-of-month month day-of-week); open the window a cold start early.
    start: str
    end: str
    # Replicas kept inside the window.
    replicas: int


@dataclass(frozen=True)
class HeldRequests:
    """The endpoint picker in front of the workload (the gateway's InferencePool): the requests it holds wake and
    scale the workload."""

    # The picker's Service, its scrape job (the ServiceMonitor names the job after the Service).
    picker: str
    # The InferencePool the picker serves (the gauge's inference_pool label).
    pool: str


@dataclass(frozen=True)
class AutoscalingProps:
    """KEDA settings from the environment's config; the target and the metric label come from VllmProps."""

    max_replicas: int
    # HPA target for sum(vllm:num_requests_waiting): waiting requests per replica.
    waiting_requests_per_replica: float
    # HPA target for avg(vllm:kv_cache_usage_perc), 0..1.
    kv_cache_usage_target: float
    # One warm replica: a GPU cold start takes minutes.
    min_replicas: int = 1
    scale_to_zero: ScaleToZeroSchedule | None = None
    # Each scale-up step may add this many pods (or double, whichever is more); Karpenter launches the nodes.
    scale_up_pods: int = 2
    # Seconds the HPA looks back before it removes replicas; must cover a cold start.
    scale_down_stabilization_seconds: int = 600
    # Then one replica per this many seconds.
    scale_down_period_seconds: int = 300
    # KEDA polls Prometheus this often (Prometheus scrapes every 30 s by default).
    polling_interval_seconds: int = 15
    # Only for the last replica (1 -> 0): idle this long first.
    cooldown_seconds: int = 900
    prometheus_url: str = PROMETHEUS_URL
    # More failed reads in a row than this and KEDA holds the count (fallback): 3 is under a minute at the default
    # polling, long enough not to act on one slow query.
    fallback_failure_threshold: int = 3
    # Replicas of the workload's on-demand floor (VllmProps.floor_replicas), which always run: this ScaledObject
    # then scales the Spot/on-demand Deployment from 0 above them, woken by the floor's own queue.
    floor_replicas: int = 0
    # Behind the gateway: scale on the requests its endpoint picker holds too (and from zero on them).
    held_requests: HeldRequests | None = None
    # A disaggregated workload (VllmProps.disaggregation): the prefill pool's largest size; its own ScaledObject.
    prefill_max_replicas: int = 0


def ready_series(vllm: VllmProps) -> str:
    """kube-state-metrics' ready replicas of the workload (its on-demand floor's too): its Deployments', or those of
    the leader StatefulSets a LeaderWorkerSet names after itself (kubernetes-sigs/lws@v0.10.0
    pkg/controllers/leaderworkerset_controller.go)."""
    return ksm_workload("status_replicas_ready", replica_kind(vllm), vllm.namespace, replica_names(vllm))


def replica_kind(vllm: VllmProps) -> str:
    """What holds the workload's replicas, as kube-state-metrics names it: a Deployment, or the leader StatefulSet a
    LeaderWorkerSet names after itself."""
    return "statefulset" if vllm.nodes_per_replica > 1 else "deployment"


def replica_names(vllm: VllmProps) -> tuple[str, ...]:
    """The objects holding the workload's replicas: its Deployment (or leader StatefulSet) and its floor's."""
    return (vllm.name, floor_name(vllm)) if vllm.floor_replicas else (vllm.name,)


def guarded(query: str, vllm: VllmProps, scale_to_zero: bool) -> str:
    """`query`, or 0 while the workload has no ready replica; empty (a KEDA error, so the fallback) only when it has
    ready replicas and the series are missing (module docstring)."""
    ready = ready_series(vllm)
    out = f"{query} or on() (sum({ready}) == 0)"
    if scale_to_zero:
        out += f" or on() (vector(0) unless on() count({ready}))"
    return out


def _job(job: str | None) -> str:
    """A disaggregated workload's pools share the model name: each pool's series by its Service's scrape job."""
    return "" if job is None else f', job="{job}"'


def waiting_query(served_model_name: str, job: str | None = None) -> str:
    return f'sum(vllm:num_requests_waiting{{model_name="{served_model_name}"{_job(job)}}})'


def held_query(namespace: str, held: HeldRequests) -> str:
    """Requests the picker holds for the pool; 0 while the picker is scraped and holds none; empty (an error, so
    KEDA's fallback) while no picker is scraped."""
    labels = f'namespace="{namespace}", job="{held.picker}"'
    return (
        f'sum(llm_d_epp_flow_control_queue_size{{{labels}, inference_pool="{held.pool}"}}) '
        f"or on() (0 * sum(up{{{labels}}} == 1))"
    )


def kv_cache_query(served_model_name: str, job: str | None = None) -> str:
    return f'avg(vllm:kv_cache_usage_perc{{model_name="{served_model_name}"{_job(job)}}})'


def _number(value: float) -> str:
    """KEDA takes thresholds as strings; 4.0 -> "4", 0.8 -> "0.8"."""
    return f"{value:g}"


def validate_autoscaling_props(a: AutoscalingProps, vllm: VllmProps) -> None:
    if a.max_replicas < 1:
        raise ConfigError(E130, f"autoscaling.max_replicas: {a.max_replicas} is not allowed; must be at least 1")
    if a.min_replicas < 0:
        raise ConfigError(E130, f"autoscaling.min_replicas: {a.min_replicas} is not allowed; must be at least 0")
    if a.min_replicas > a.max_replicas:
        raise ConfigError(
            E130,
            f"autoscaling.min_replicas: {a.min_replicas} is not allowed; must be at most max_replicas "
            f"({a.max_replicas})",
        )
    if not a.waiting_requests_per_replica > 0:
        raise ConfigError(
            E130,
            f"autoscaling.waiting_requests_per_replica: {a.waiting_requests_per_replica} is not allowed; "
            "must be above 0",
        )
    if not 0 < a.kv_cache_usage_target <= 1:
        raise ConfigError(
            E130,
            f"autoscaling.kv_cache_usage_target: {a.kv_cache_usage_target} is not allowed; must be above 0 and "
            "at most 1 (vllm:kv_cache_usage_perc is a fraction)",
        )
    for name, value, minimum in (
        ("fallback_failure_threshold", a.fallback_failure_threshold, 1),
        ("scale_up_pods", a.scale_up_pods, 1),
        ("scale_down_period_seconds", a.scale_down_period_seconds, 1),
        ("polling_interval_seconds", a.polling_interval_seconds, 1),
        ("cooldown_seconds", a.cooldown_seconds, 0),
    ):
        if value < minimum:
            raise ConfigError(E130, f"autoscaling.{name}: {value} is not allowed; must be at least {minimum}")
    # A cold start beyond the HPA's longest window is held as long as the HPA can.
    if a.scale_down_stabilization_seconds < min(vllm.startup_seconds, MAX_STABILIZATION_SECONDS):
        floor = (
            f"startup_seconds ({vllm.startup_seconds})"
            if vllm.startup_seconds <= MAX_STABILIZATION_SECONDS
            else f"{MAX_STABILIZATION_SECONDS} (the HPA's limit; startup_seconds is {vllm.startup_seconds})"
        )
        raise ConfigError(
            E130,
            f"autoscaling.scale_down_stabilization_seconds: {a.scale_down_stabilization_seconds} is not allowed; "
            f"must be at least {floor}: removing a replica sooner than one starts again thrashes GPU nodes",
        )
    if a.scale_down_period_seconds > 1800:
        raise ConfigError(
            E130,
            f"autoscaling.scale_down_period_seconds: {a.scale_down_period_seconds} is not allowed; "
            "must be at most 1800 (the HPA's limit)",
        )
    if a.scale_down_stabilization_seconds > MAX_STABILIZATION_SECONDS:
        raise ConfigError(
            E130,
            f"autoscaling.scale_down_stabilization_seconds: {a.scale_down_stabilization_seconds} is not allowed; "
            f"must be at most {MAX_STABILIZATION_SECONDS} (the HPA's limit)",
        )
    if not a.prometheus_url.startswith(("http://", "https://")):
        raise ConfigError(
            E130, f"autoscaling.prometheus_url: {a.prometheus_url!r} is not allowed; must be an http(s) URL"
        )
    if a.floor_replicas != vllm.floor_replicas:
        raise ConfigError(
            E130,
            f"autoscaling.floor_replicas: {a.floor_replicas} is not allowed; must be the workload's "
            f"floor_replicas ({vllm.floor_replicas})",
        )
    if a.min_replicas == 0 and a.scale_to_zero is None and a.held_requests is None and not a.floor_replicas:
        raise ConfigError(
            E130,
            "autoscaling.min_replicas: 0 is not allowed without scale_to_zero or held_requests; vLLM's metrics "
            "vanish with its last pod, so nothing would ever wake it: set a scale_to_zero schedule (KEDA cron), or "
            "put the workload behind the gateway, whose endpoint picker holds the requests that wake it",
        )
    if a.scale_to_zero is not None:
        _validate_schedule(a.scale_to_zero, a)
    lowest = a.min_replicas
    if not lowest <= vllm.replicas <= a.max_replicas:
        raise ConfigError(
            E130,
            f"replicas: {vllm.replicas} is not allowed; must be between autoscaling.min_replicas ({lowest}) and "
            f"autoscaling.max_replicas ({a.max_replicas})",
        )


def _validate_schedule(s: ScaleToZeroSchedule, a: AutoscalingProps) -> None:
    if a.min_replicas != 0:
        raise ConfigError(
            E130,
            f"autoscaling.min_replicas: {a.min_replicas} is not allowed with scale_to_zero; must be 0 "
            "(the schedule is what brings replicas back)",
        )
    # KEDA loads the zone with Go's time.LoadLocation: a name of the IANA tz database.
    if s.timezone not in zoneinfo.available_timezones():
        raise ConfigError(
            E130,
            f"autoscaling.scale_to_zero.timezone: {s.timezone!r} is not allowed; must be an IANA time zone such "
            "as Europe/Paris",
        )
    for name, expr in (("start", s.start), ("end", s.end)):
        if not _CRON.match(expr):
            raise ConfigError(
                E130,
                f"autoscaling.scale_to_zero.{name}: {expr!r} is not allowed; must be a 5-field cron expression "
                "such as '0 7 * * 1-5'",
            )
    if s.start == s.end:
        raise ConfigError(
            E130, f"autoscaling.scale_to_zero.end: {s.end!r} is not allowed; must differ from start (KEDA rejects it)"
        )
    if not 1 <= s.replicas <= a.max_replicas:
        raise ConfigError(
            E130,
            f"autoscaling.scale_to_zero.replicas: {s.replicas} is not allowed; must be 1 to max_replicas "
            f"({a.max_replicas})",
        )


def prefill_autoscaling(a: AutoscalingProps) -> AutoscalingProps:
    """The prefill pool's bounds of a disaggregated workload: up to its largest planned size (at least 1), from the
    decode pool's least (its floor included, no floor of its own); a schedule wakes at most that many."""
    largest = max(a.prefill_max_replicas, 1)
    schedule = a.scale_to_zero
    return replace(
        a,
        max_replicas=largest,
        min_replicas=min(a.min_replicas + a.floor_replicas, largest),
        floor_replicas=0,
        scale_to_zero=None if schedule is None else replace(schedule, replicas=min(schedule.replicas, largest)),
    )


class VllmAutoscalingChart(cdk8s.Chart):
    """The KEDA ScaledObject (keda.sh/v1alpha1) for one `VllmChart` Deployment."""

    @staticmethod
    def _activation(threshold: float, a: AutoscalingProps) -> dict[str, str]:
        """Above an on-demand floor the Spot/on-demand Deployment sits at 0 until the floor's own load passes the
        target (KEDA's activationThreshold: active only above it); elsewhere any value is activity."""
        return {"activationThreshold": _number(threshold)} if a.floor_replicas else {}

    def __init__(self, scope: Construct, construct_id: str, vllm: VllmProps, autoscaling: AutoscalingProps) -> None:
        super().__init__(scope, construct_id, disable_resource_name_hashes=True)
        validate_vllm_props(vllm)
        validate_autoscaling_props(autoscaling, vllm)
        if vllm.disaggregation is None:
            self.spec = self._scaled_object(vllm, autoscaling, None, "scaled-object")
            return
        # Each pool on its own signals: decode on its queue, KV use and the held requests; prefill on the prompts
        # waiting on the prefill pods and the held requests (each of which needs a prefill once dispatched).
        self.spec = self._scaled_object(vllm, autoscaling, vllm.name, "scaled-object")
        prefill = replace(vllm, name=prefill_name(vllm.name), floor_replicas=0, floor_pools=())
        prefill_a = prefill_autoscaling(autoscaling)
        validate_autoscaling_props(prefill_a, prefill)
        self.prefill_spec = self._scaled_object(prefill, prefill_a, prefill.name, "scaled-object-prefill", kv=False)

    def _scaled_object(
        self, vllm: VllmProps, a: AutoscalingProps, job: str | None, construct_id: str, *, kv: bool = True
    ) -> dict[str, Any]:
        """The ScaledObject of one Deployment (or LeaderWorkerSet) `vllm.name`; `job`: its pool's scrape job (a
        disaggregated workload's pools share the model name); without `kv`, no KV-cache trigger (a prefill pod's
        cache holds prompts until their decode pod reads them: no load signal)."""
        asleep = a.scale_to_zero is not None
        triggers = [
            {
                "type": "prometheus",
                "name": "waiting-requests",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": a.prometheus_url,
                    "query": guarded(waiting_query(vllm.served_model_name, job), vllm, asleep),
                    "threshold": _number(a.waiting_requests_per_replica),
                    "ignoreNullValues": "false",
                    **self._activation(a.waiting_requests_per_replica, a),
                },
            },
        ]
        if kv:
            triggers.append(
                {
                    "type": "prometheus",
                    "name": "kv-cache-usage",
                    "metricType": "Value",
                    "metadata": {
                        "serverAddress": a.prometheus_url,
                        "query": guarded(kv_cache_query(vllm.served_model_name, job), vllm, asleep),
                        "threshold": _number(a.kv_cache_usage_target),
                        "ignoreNullValues": "false",
                        **self._activation(a.kv_cache_usage_target, a),
                    },
                }
            )
        if a.held_requests is not None:
            triggers.append(
                {
                    "type": "prometheus",
                    "name": "held-requests",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": a.prometheus_url,
                        "query": guarded(held_query(vllm.namespace, a.held_requests), vllm, asleep),
                        "threshold": _number(a.waiting_requests_per_replica),
                        # An empty result (no picker scraped while the workload has ready replicas) is an error,
                        # not 0: KEDA's fallback, not a scale-in.
                        "ignoreNullValues": "false",
                        # One held request wakes a workload at zero; above a floor, as the other triggers.
                        "activationThreshold": "0",
                        **self._activation(a.waiting_requests_per_replica, a),
                    },
                }
            )
        if a.scale_to_zero is not None:
            s = a.scale_to_zero
            triggers.append(
                {
                    "type": "cron",
                    "name": "working-hours",
                    "metadata": {
                        "timezone": s.timezone,
                        "start": s.start,
                        "end": s.end,
                        "desiredReplicas": str(s.replicas),
                    },
                }
            )
        spec = {
            # A replica spanning nodes is a LeaderWorkerSet group; LeaderWorkerSet has the scale subresource.
            "scaleTargetRef": (
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": vllm.name}
                if vllm.nodes_per_replica == 1
                else {"apiVersion": LWS_API_VERSION, "kind": "LeaderWorkerSet", "name": vllm.name}
            ),
            "minReplicaCount": a.min_replicas,
            "maxReplicaCount": a.max_replicas,
            "fallback": {
                "failureThreshold": a.fallback_failure_threshold,
                "replicas": a.min_replicas,
                "behavior": FALLBACK_BEHAVIOR,
            },
            "pollingInterval": a.polling_interval_seconds,
            "cooldownPeriod": a.cooldown_seconds,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "name": vllm.name,
                    "behavior": {
                        "scaleUp": {
                            "stabilizationWindowSeconds": 0,
                            "selectPolicy": "Max",
                            "policies": [
                                {"type": "Percent", "value": 100, "periodSeconds": 60},
                                {"type": "Pods", "value": a.scale_up_pods, "periodSeconds": 60},
                            ],
                        },
                        "scaleDown": {
                            "stabilizationWindowSeconds": a.scale_down_stabilization_seconds,
                            "selectPolicy": "Min",
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": a.scale_down_period_seconds}],
                        },
                    },
                }
            },
            "triggers": triggers,
        }
        plain_object(
            self,
            construct_id,
            api_version="keda.sh/v1alpha1",
            kind="ScaledObject",
            metadata={"name": vllm.name, "namespace": vllm.namespace, "labels": app_labels(VLLM_APP, vllm.name)},
            body={"spec": spec},
            source=__name__,
        )
        return spec
