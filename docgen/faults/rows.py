"""The matrix's rules: one function per fault turning an environment's facts into a cell (survives, degrades,
fails; what happens and for how long; which alerts fire), and the Markdown of the whole matrix.

Timings from upstream, each read at its pinned version:
- Karpenter 1.14.1 repairs a node whose AcceleratedHardwareReady condition has been False for 10 minutes
  (aws/karpenter-provider-aws@v1.14.1 pkg/cloudprovider/cloudprovider.go, RepairPolicies), when its NodeRepair
  feature gate is on; the EKS node monitoring agent v1.7.0 sets that condition on the Xids it treats as fatal.
- A pod on a node that stops answering is replaced after the default `node.kubernetes.io/unreachable` toleration
  plus the node monitor's grace period (llm_eks.config.resilience.UNREACHABLE_SECONDS).
- The endpoint picker's standby takes the lease within controller-runtime's 15 s lease (llm-d-router v0.10.0); the
  AI Gateway v1.1.0 calls the picker fail-closed (internal/extensionserver/inferencepool.go), so that model's
  requests fail until it has.
- The stall probe restarts a stalled vLLM within 120 s + 2 x 30 s (manifests/vllm/liveness.py and its probe).
- The CloudWatch dead-man's alarm fires after two silent 5-minute periods.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from docgen.faults.facts import EnvFacts, Workload
from llm_eks.config import resilience

REPAIR_SECONDS = 600
UNREACHABLE_SECONDS = resilience.UNREACHABLE_SECONDS
STALL_DETECT_SECONDS = 180
PICKER_TAKEOVER_SECONDS = 15
DEADMAN_SECONDS = 600

SURVIVES, DEGRADES, FAILS, NONE = "S", "D", "F", "—"
_ORDER = {NONE: 0, SURVIVES: 1, DEGRADES: 2, FAILS: 3}


@dataclass(frozen=True)
class Cell:
    verdict: str
    # What happens and what users see, for how long (one or more sentences).
    text: str
    # The alerts that fire (those present in the environment).
    alerts: tuple[str, ...] = ()


def _minutes(seconds: float) -> str:
    return f"≈{math.ceil(seconds / 60)} min"


def _worst(cells: list[tuple[str, str]]) -> str:
    return max((v for v, _ in cells), key=_ORDER.__getitem__, default=NONE)


def _per_workload(f: EnvFacts, judge: Callable[[Workload], tuple[str, str]]) -> tuple[str, str]:
    judged = [(w, *judge(w)) for w in f.workloads]
    verdict = _worst([(v, t) for _, v, t in judged])
    return verdict, " ".join(f"{w.name}: {t}" for w, _, t in judged)


def _alerts(f: EnvFacts, *names: str) -> tuple[str, ...]:
    return tuple(n for n in names if n in f.alerts)


def _judged(verdict: str, text: str, alerts: tuple[str, ...]) -> Cell:
    """A cell whose alerts fire only when the fault costs something (none where it is survived)."""
    return Cell(verdict, text, () if verdict in (SURVIVES, NONE) else alerts)


def _lost(w: Workload, outage: str, fewer: str) -> tuple[str, str]:
    """A replica lost: an outage where it is the workload's only one, one fewer otherwise."""
    return (FAILS, outage) if w.min_replicas == 1 else (DEGRADES, fewer)


def spot_reclaim(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if "spot" not in w.capacity_types and not w.floor:
            return SURVIVES, "no Spot capacity."
        if w.floor_holds_minimum:
            return SURVIVES, (
                f"its {w.floor} minimum replicas run on on-demand capacity; a reclaimed burst replica is back after "
                f"the cold start ({w.cold_start_s} s)."
            )
        return _lost(
            w,
            f"its only replica may be on Spot: an outage of {w.cold_start_s} s (the cold start).",
            f"one replica fewer for {w.cold_start_s} s (the cold start).",
        )

    verdict, text = _per_workload(f, judge)
    return _judged(verdict, text, _alerts(f, "VllmNoReadyReplica", "RayServeNoHealthyReplica"))


def zone_loss(f: EnvFacts) -> Cell:
    monitoring = (
        f.prometheus_replicas >= 2
        and f.prometheus_zone_spread
        and f.alertmanager_replicas >= 2
        and f.query_endpoint_replicas >= 2
        and f.keda_metrics_servers >= 2
    )
    parts = [
        "Monitoring, alerting and autoscaling keep running in the other zone (a Prometheus, an Alertmanager, a "
        "query endpoint and a KEDA metrics server in each)."
        if monitoring
        else "Monitoring may be lost with its zone: no metrics, no alerts, autoscaling frozen."
    ]
    replace_after = UNREACHABLE_SECONDS

    def judge(w: Workload) -> tuple[str, str]:
        if w.engine == "ray-serve" and not w.gcs_fault_tolerance:
            return FAILS, (
                "the Ray head (no GCS fault tolerance) or its only worker may be in the lost zone: the Ray cluster "
                f"restarts, {_minutes(replace_after + w.cold_start_s)} of outage."
            )
        if w.min_replicas == 1:
            return FAILS, (
                f"its only replica may be in the lost zone: replaced after {_minutes(replace_after)} (the unreachable "
                f"node's eviction), then the cold start: {_minutes(replace_after + w.cold_start_s)} of outage."
            )
        spread = "one floor replica per zone (required)" if w.floor_spread_required else "replicas spread over zones"
        return DEGRADES, (
            f"{spread}: half its replicas for {_minutes(replace_after + w.cold_start_s)} (their replacements in the "
            "other zone)."
        )

    verdict, text = _per_workload(f, judge)
    if not monitoring:
        verdict = max(verdict, DEGRADES, key=_ORDER.__getitem__)
    return _judged(verdict, " ".join([*parts, text]), _alerts(f, "VllmNoReadyReplica", "RayServeNoHealthyReplica"))


def system_node_lost(f: EnvFacts) -> Cell:
    allocatable = f.system_allocatable_millicores
    need, have = f.system_millicores, (f.system_nodes - 1) * (allocatable or 0)
    heads = [w for w in f.workloads if w.head_on_system]
    figures = (
        f"The controllers request ≈{need / 1000:.1f} CPU; {f.system_nodes - 1} remaining {f.system_instance_type} "
        f"offer ≈{have / 1000:.1f}."
    )
    if heads:
        return Cell(
            FAILS,
            f"{figures} The Ray head of {', '.join(w.name for w in heads)} runs on the system nodes: the Ray cluster "
            "restarts.",
        )
    if f.survives_a_system_node:
        return Cell(SURVIVES, f"{figures} Everything rescheduled fits on the others (two of each controller).")
    return Cell(DEGRADES, f"{figures} Some controllers stay Pending until the node group replaces the node.")


def xid_fatal(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if not f.node_repair:
            return FAILS, (
                "node repair is off: the replica on the bad GPU fails until someone deletes its NodeClaim "
                "(`kubectl delete nodeclaim`), then the cold start."
            )
        until = f"until the node is repaired and replaced: {_minutes(REPAIR_SECONDS + w.cold_start_s)}."
        return _lost(w, f"its only replica is lost {until}", f"one replica fewer {until}")

    verdict, text = _per_workload(f, judge)
    repair = (
        "The node monitoring agent marks the node AcceleratedHardwareReady=False; Karpenter replaces it after 10 "
        "minutes. "
        if f.node_repair
        else ""
    )
    return Cell(verdict, repair + text, _alerts(f, "GpuXidFatal", "VllmNoReadyReplica"))


def gpu_hang(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if not w.stall_probe:
            return FAILS, (
                "requests to the hung replica wait until the client's timeout; no probe sees it (Ray Serve's "
                "health check calls the same engine check as /health): a person deletes the pod."
            )
        restart = (
            f"the stall probe restarts it within {STALL_DETECT_SECONDS // 60} min and it starts again on its node "
            f"({w.startup_s} s): {_minutes(STALL_DETECT_SECONDS + w.startup_s)}"
        )
        return _lost(w, f"{restart} of outage.", f"requests on the hung replica stall until {restart}.")

    verdict, text = _per_workload(f, judge)
    return Cell(verdict, text, _alerts(f, "VllmEngineStalled", "RayVllmEngineStalled"))


def picker_down(f: EnvFacts) -> Cell:
    if not f.picker_replicas:
        return Cell(NONE, "No endpoint picker.")
    if f.picker_replicas >= 2:
        return Cell(
            DEGRADES,
            f"The standby takes the lease within ≈{PICKER_TAKEOVER_SECONDS} s; meanwhile that model's requests fail "
            "(500: the gateway calls its picker fail-closed, never routing by a client's header); other models are "
            "untouched.",
            _alerts(f, "GatewayEndpointPickerStandbyMissing", "GatewayEndpointPickerDown"),
        )
    return Cell(
        FAILS,
        "That model's requests fail (500: the picker is called fail-closed) until the picker restarts: seconds, "
        "minutes on a lost node.",
        _alerts(f, "GatewayEndpointPickerDown"),
    )


def envoy_down(f: EnvFacts) -> Cell:
    if not f.gateway:
        return Cell(NONE, "No gateway.")
    spread = (
        f"{f.envoy_replicas} replicas spread over zones with a PDB, so one pod, node or zone lost is survived; "
        if f.envoy_replicas > 1
        else ""
    )
    return Cell(
        FAILS,
        f"Every Envoy pod down: every model behind the gateway is unreachable ({spread}each pod carries the AI "
        "Gateway's body processor, which fails closed).",
        _alerts(f, "GatewayEnvoyDown"),
    )


def prometheus_down(f: EnvFacts) -> Cell:
    if f.prometheus_replicas >= 2 and f.query_endpoint_replicas >= 1 and f.keda_reads_query_endpoint:
        both = (
            "Both down: KEDA's fallback holds every count, and the dead-man's switch fires within "
            f"{DEADMAN_SECONDS // 60} minutes."
            if f.scaled_objects_fail_safe and f.deadmans_alarm
            else "Both down: autoscaling and alerting stop."
        )
        return Cell(SURVIVES, f"One replica down: the query endpoint answers from the other. {both}")
    return Cell(DEGRADES, "KEDA's triggers fail and the HPA freezes; no rule runs; dashboards and verify are blind.")


def alertmanager_down(f: EnvFacts) -> Cell:
    if f.alertmanager_replicas >= 2:
        both = " Both down: the dead-man's switch (CloudWatch) fires." if f.deadmans_alarm else ""
        return Cell(SURVIVES, f"One replica down: the other, in the other zone, sends every alert.{both}")
    return Cell(DEGRADES, "No alert is sent until it restarts.")


def series_missing(f: EnvFacts) -> Cell:
    vllm = [w for w in f.workloads if w.engine == "vllm"]
    if not vllm:
        return Cell(NONE, "No KEDA-scaled workload.")
    if f.scaled_objects_fail_safe:
        return Cell(
            DEGRADES,
            "While replicas are ready an empty result is an error: KEDA's fallback holds the current count (no scale "
            "down, no scale out) until the series return.",
            _alerts(f, "VllmSeriesAbsent", "KedaScalerErrors"),
        )
    return Cell(FAILS, "An empty result reads 0: the workload scales down to its minimum under load.")


def metrics_server_down(f: EnvFacts) -> Cell:
    if f.keda_metrics_servers >= 2 and f.keda_metrics_server_pdb:
        return Cell(SURVIVES, "Two replicas over zones and a PDB: the other serves the HPAs.")
    return Cell(DEGRADES, "HPAs cannot read external metrics: every count is frozen until it restarts.")


def karpenter_down(f: EnvFacts) -> Cell:
    if f.karpenter_replicas >= 2:
        return Cell(SURVIVES, "Two replicas with leader election: the other takes over.")
    return Cell(DEGRADES, "No node is launched or drained until it restarts.")


def _start_dependency(f: EnvFacts, depends: Callable[[Workload], bool], what: str, bound: str) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        if not depends(w):
            return SURVIVES, f"its start does not need {what}."
        if w.min_replicas == 1:
            return FAILS, f"a replica starting then (a replacement, a scale-out) waits for {what}: {bound}."
        return DEGRADES, f"running replicas serve; one starting then waits for {what}: {bound}."

    return _judged(*_per_workload(f, judge), _alerts(f, "GpuPodsPendingTooLong", "VllmNoReadyReplica"))


def s3_down(f: EnvFacts) -> Cell:
    return _start_dependency(
        f,
        lambda w: w.weights in ("staged", "s3"),
        "S3",
        "the wait for the weights gives up after 10 minutes with one line and retries (Init:CrashLoopBackOff) until "
        "S3 is back",
    )


def hub_down(f: EnvFacts) -> Cell:
    return _start_dependency(f, lambda w: w.weights == "hub", "the Hugging Face Hub", "until the Hub is back")


def new_staging_key(f: EnvFacts) -> Cell:
    staged = [w for w in f.workloads if w.weights == "staged"]
    if not staged:
        return Cell(NONE, "No staged weights.")
    return Cell(
        SURVIVES,
        "One marker per staging key, written once: the running version's pods start at once while the new one "
        "stages; a staging that would replace a file the running key lists fails before it changes anything. The "
        "new version's pods wait for their own marker (GpuPodsPendingTooLong pages if its staging fails).",
    )


def crash_looping_deploy(f: EnvFacts) -> Cell:
    return Cell(
        DEGRADES,
        "The old replicas keep serving (no pod is removed before its replacement is ready); the rollout stalls and is "
        "not rolled back; a scale-out meanwhile partly lands on the crashing version. kube-prometheus-stack's "
        "KubePodCrashLooping and KubeDeploymentRolloutStuck page.",
    )


def flood(f: EnvFacts) -> Cell:
    alerts = ("VllmWaitingQueueGrowing", "VllmTimeToFirstTokenAboveSlo", "RayVllmWaitingQueueGrowing")
    if f.picker_replicas:
        return Cell(
            DEGRADES,
            "KEDA scales to the maximum, each replica after its cold start; meanwhile the endpoint picker's flow "
            "control holds what the replicas cannot serve within the TTFT target and refuses the rest early (429, or "
            "503 past the hold, with Retry-After), lowest priority first, each tenant within its request and token "
            "limits. A model served without the gateway's picker (Ray Serve) still queues until clients time out.",
            _alerts(f, *alerts, "GatewayTenantRefused"),
        )
    return Cell(
        FAILS,
        "KEDA scales to the maximum, each replica after its cold start; beyond it vLLM's queue grows without bound "
        "and clients wait until their own timeout (no early rejection: that is the gateway's flow control, and this "
        "environment has no gateway).",
        _alerts(f, *alerts),
    )


def failed_lambda(f: EnvFacts) -> Cell:
    alerted = " The stack's failure reaches the alerts topic (EventBridge rule)." if f.stack_failure_rule else ""
    return Cell(SURVIVES, f"CloudFormation rolls the update back; serving is untouched.{alerted}")


def corrupt_cache(f: EnvFacts) -> Cell:
    return Cell(
        SURVIVES,
        "The restore checks the KMS signature and each file's sha256; on any mismatch it discards the cache and vLLM "
        "compiles (tens of seconds more warm-up). A signed cache that crashes vLLM would crash-loop every new "
        "replica (KubePodCrashLooping pages): `compile_cache: false` on the workload retires it in one deploy.",
    )


def api_blip(f: EnvFacts) -> Cell:
    return Cell(SURVIVES, "Serving continues; scaling, provisioning and interruption handling pause.")


def ray_head_lost(f: EnvFacts) -> Cell:
    ray = [w for w in f.workloads if w.engine == "ray-serve"]
    if not ray:
        return Cell(NONE, "No Ray Serve workload.")

    def judge(w: Workload) -> tuple[str, str]:
        if w.gcs_fault_tolerance:
            return DEGRADES, "the workers keep serving while the head restarts (GCS fault tolerance)."
        return FAILS, (
            "no GCS fault tolerance: the Ray cluster and every replica restart, "
            f"{_minutes(w.cold_start_s)} (a documented single point of failure)."
        )

    judged = [(w, *judge(w)) for w in ray]
    verdict = _worst([(v, t) for _, v, t in judged])
    return Cell(verdict, " ".join(f"{w.name}: {t}" for w, _, t in judged), _alerts(f, "RayServeNoHealthyReplica"))


def capacity_unavailable(f: EnvFacts) -> Cell:
    def judge(w: Workload) -> tuple[str, str]:
        options = []
        if len(w.instance_types) > 1:
            options.append(f"{len(w.instance_types)} instance types")
        if len(set(w.capacity_types)) > 1:
            options.append("Spot and on-demand")
        if w.fallback_pools:
            options.append(f"a fallback family ({', '.join(w.fallback_pools)})")
        if options:
            return SURVIVES, f"its pool may launch {', '.join(options)}."
        return DEGRADES, "one instance type, one capacity type: no replacement or scale-out until capacity returns."

    return _judged(*_per_workload(f, judge), _alerts(f, "GpuPodsPendingTooLong"))


def secrets_down(f: EnvFacts) -> Cell:
    return _start_dependency(
        f, lambda w: w.secrets, "Secrets Manager", "its secret volume does not mount until Secrets Manager is back"
    )


def _disaggregated(f: EnvFacts, text: str) -> Cell:
    """A fault of a disaggregated workload's pools: `text` for each such workload, none elsewhere."""
    pd = [w.name for w in f.workloads if w.prefill_pool]
    return Cell(DEGRADES, f"{', '.join(pd)}: {text}") if pd else Cell(NONE, "No disaggregated workload.")


def prefill_pool_down(f: EnvFacts) -> Cell:
    """No prefill pod Ready (scaled to zero, or every one down): the picker's prefill profile finds no endpoint, its
    result is dropped (llm-d router v0.10.0 pkg/epp/scheduling/scheduler.go, a failed profile's result is nil;
    disagg_profile_handler.go ProcessResults needs only the decode one), so the decode pod prefills the prompt
    itself."""
    return _disaggregated(
        f,
        "requests are still served: the endpoint picker's prefill profile finds no pod, so it names no prefill host "
        "and the decode pod prefills the prompt itself (aggregated serving on the decode pool, with its longer "
        "inter-token latency) until KEDA brings the prefill pool back on its waiting prompts.",
    )


def kv_transfer_failed(f: EnvFacts) -> Cell:
    """A prefill pod lost after its prefill, or the KV read failing: vLLM 0.33's kv_load_failure_policy defaults to
    "fail" (config/kv_transfer.py), and the sidecar retries a failed prefill 0 times (--prefill-max-retries default)."""
    return _disaggregated(
        f,
        "the requests whose KV cache was on that prefill pod, or whose transfer failed, fail (vLLM's "
        "kv_load_failure_policy defaults to fail: no local recompute; the routing sidecar does not retry a failed "
        "prefill); the picker stops choosing a pod that is no longer Ready, and later requests are served.",
    )


def prefill_worker_lost(f: EnvFacts) -> Cell:
    """A worker pod of a prefill LeaderWorkerSet group lost (its node reclaimed or failed): the chart's
    RecreateGroupOnPodRestart has LeaderWorkerSet recreate the whole group (kubernetes-sigs/lws v0.10.0), whose
    data-parallel engines all stop with it; its leader leaves the InferencePool's Ready endpoints meanwhile."""
    groups = [w.name for w in f.workloads if w.prefill_group_size > 1]
    if not groups:
        return Cell(NONE, "No disaggregated workload whose replicas span nodes.")
    return Cell(
        DEGRADES,
        f"{', '.join(groups)}: LeaderWorkerSet recreates the whole prefill group (RecreateGroupOnPodRestart): its "
        "prefills in flight fail, and so do the requests whose KV blocks decode pods had yet to read from it (as in "
        "row 25); the picker stops choosing its leader, the other prefill groups take the prompts (with none left the "
        "decode pods prefill themselves, as in row 24) until the group is back after its cold start.",
    )


@dataclass(frozen=True)
class Fault:
    title: str
    cell: Callable[[EnvFacts], Cell]


FAULTS = (
    Fault("Spot reclaim of a GPU node", spot_reclaim),
    Fault("Zone loss (one of two)", zone_loss),
    Fault("One system node lost", system_node_lost),
    Fault("GPU Xid fatal", xid_fatal),
    Fault("GPU hang without an Xid", gpu_hang),
    Fault("Endpoint picker down", picker_down),
    Fault("Gateway Envoy down (every pod)", envoy_down),
    Fault("Prometheus down (one replica)", prometheus_down),
    Fault("Alertmanager down (one replica)", alertmanager_down),
    Fault("vLLM series missing under load", series_missing),
    Fault("KEDA metrics server down", metrics_server_down),
    Fault("Karpenter controller down during a reclaim", karpenter_down),
    Fault("S3 down during a cold start", s3_down),
    Fault("Hugging Face Hub down during a cold start", hub_down),
    Fault("A new staging key while the old version runs", new_staging_key),
    Fault("Crash-looping deploy", crash_looping_deploy),
    Fault("10x request flood", flood),
    Fault("Failed custom-resource Lambda", failed_lambda),
    Fault("Corrupt compile cache", corrupt_cache),
    Fault("API-server blip", api_blip),
    Fault("Ray head lost", ray_head_lost),
    Fault("GPU capacity unavailable for the pool", capacity_unavailable),
    Fault("Secrets Manager down during a cold start", secrets_down),
    Fault("Prefill pool at zero or down (disaggregated)", prefill_pool_down),
    Fault("Prefill pod lost mid-request, or KV transfer fails (disaggregated)", kv_transfer_failed),
    Fault("Worker lost in a prefill group (disaggregated, replicas spanning nodes)", prefill_worker_lost),
)


def matrix(facts: Mapping[str, EnvFacts]) -> list[tuple[Fault, dict[str, Cell]]]:
    return [(fault, {env: fault.cell(f) for env, f in facts.items()}) for fault in FAULTS]


def counts(rows: list[tuple[Fault, dict[str, Cell]]], env: str) -> dict[str, int]:
    verdicts = [cells[env].verdict for _, cells in rows]
    return {v: verdicts.count(v) for v in (SURVIVES, DEGRADES, FAILS)}


def markdown(facts: Mapping[str, EnvFacts]) -> str:
    """The page's generated block: the matrix, the counts, then each fault per environment."""
    rows = matrix(facts)
    envs = list(facts)
    out = [f"| # | Fault | {' | '.join(envs)} |", f"|---|---|{'---|' * len(envs)}"]
    for i, (fault, cells) in enumerate(rows, 1):
        out.append(f"| {i} | [{fault.title}](#{_anchor(i, fault)}) | {' | '.join(cells[e].verdict for e in envs)} |")
    out.append("")
    tallies = []
    for env in envs:
        c = counts(rows, env)
        tallies.append(f"{env} {c[SURVIVES]} S / {c[DEGRADES]} D / {c[FAILS]} F ({sum(c.values())})")
    out += [f"Counts (applicable cells): {'; '.join(tallies)}.", ""]
    for i, (fault, cells) in enumerate(rows, 1):
        out += [f"### {i}. {fault.title}", ""]
        for env in envs:
            cell = cells[env]
            alerts = f" Alerts: {', '.join(f'`{a}`' for a in cell.alerts)}." if cell.alerts else ""
            out.append(f"- **{env}** ({cell.verdict}): {cell.text}{alerts}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _anchor(i: int, fault: Fault) -> str:
    slug = re.sub(r"[^a-z0-9 -]", "", f"{i}. {fault.title}".lower()).strip().replace(" ", "-")
    return re.sub(r"-+", "-", slug)
