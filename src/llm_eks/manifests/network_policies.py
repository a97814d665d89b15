"""Who may reach which pod: default-deny ingress NetworkPolicies plus one allow per real flow, and the Namespace
objects with their Pod Security Standard labels. Plain dicts (no cdk8s, no aws_cdk): the workload charts, the
add-on constructs and the tests all read the same objects.

Ingress only. Egress stays open: DNS, image pulls, the Hugging Face Hub, S3, Pod Identity and the Kubernetes API are
all egress, and a wrong egress rule fails a cold start in ways no test here can see.

Enforcement is the VPC CNI's network policy agent (eBPF on each pod's veth), which matches peers by IP:
- traffic from the pod's own node is always allowed (aws/aws-network-policy-agent pkg/fwruleprocessor/
  fw_rule_processor.go, "Traffic from the local node should always be allowed"), so kubelet probes need no rule;
- the EKS control plane reaches webhooks and the aggregated metrics API from its ENIs in the cluster's subnets, so
  those ports are opened to the VPC CIDR. With the VPC CNI pods hold VPC addresses too, so a VPC-CIDR rule admits
  every pod of the cluster on that port. It is used only where the API server is the caller (webhooks, which only
  answer admission reviews, and the external metrics API, which authenticates its caller);
- the internal ALB (target type ip) connects from its own subnets, which hold no node and so no pod
  (InferenceCluster's load balancer subnets, or `vpc.load_balancer_cidrs` of an existing VPC): the serving port
  admits exactly those CIDRs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llm_eks.manifests.source import builds_objects

# Set by Kubernetes on every Namespace (NamespaceDefaultLabelName, GA since 1.22): selects a namespace by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Opt-in for in-cluster clients of the inference endpoint: the pod, and (outside the workload namespace) its namespace.
CLIENT_LABEL = "llm-eks.io/inference-client"
DEFAULT_DENY = "default-deny-ingress"
# Why a namespace runs at a Pod Security level below `restricted` (one line, kept on the Namespace).
REASON_ANNOTATION = "llm-eks.io/pod-security-reason"

# The add-on namespaces (the constructs' defaults) and the pods the policies name, as their pinned charts label them.
MONITORING_NAMESPACE = "monitoring"
KEDA_NAMESPACE = "keda"
KUBERAY_NAMESPACE = "kuberay-system"
NVIDIA_NAMESPACE = "nvidia-gpu"
NEURON_NAMESPACE = "aws-neuron"
# Set by prometheus-operator on Prometheus pods (kube-prometheus-stack 88.3.0 templates/prometheus/networkpolicy.yaml).
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
PROMETHEUS_PORT = 9090
# kube-prometheus-stack 88.3.0 depends on grafana 12.10.4, whose pods carry the chart name.
GRAFANA_POD = {"app.kubernetes.io/name": "grafana"}
ALERTMANAGER_POD = {"app.kubernetes.io/name": "alertmanager"}
ALERTMANAGER_PORT = 9093
# Alertmanager replicas gossip silences and the notification log on 9094, TCP and UDP (prometheus-operator v0.93.0
# pkg/alertmanager/statefulset.go: --cluster.listen-address=[$(POD_IP)]:9094 with more than one replica).
ALERTMANAGER_CLUSTER_PORT = 9094
# The Prometheus pods' Thanos sidecar serves the StoreAPI on gRPC 10901 (kube-prometheus-stack 88.3.0 thanosService).
THANOS_SIDECAR_GRPC_PORT = 10901
# The one query endpoint (manifests/query_endpoint.py): its pods and HTTP port.
THANOS_QUERY_POD = {"app.kubernetes.io/name": "thanos-query"}
THANOS_QUERY_PORT = 10902
# prometheus-operator's admission webhook: container port `https` = prometheusOperator.tls.internalPort (10250).
PROMETHEUS_OPERATOR_POD = {"app.kubernetes.io/name": "kube-prometheus-stack-prometheus-operator"}
PROMETHEUS_OPERATOR_WEBHOOK_PORT = 10250
# kedacore/keda 2.20.2: pod label `app` per component, their container ports.
KEDA_OPERATOR_POD = {"app": "keda-operator"}
KEDA_OPERATOR_GRPC_PORT = 9666
# The operator's Prometheus metrics (chart value prometheus.operator.port).
KEDA_OPERATOR_METRICS_PORT = 8080
KEDA_METRICS_SERVER_POD = {"app": "keda-operator-metrics-apiserver"}
KEDA_METRICS_SERVER_PORT = 6443
KEDA_WEBHOOKS_POD = {"app": "keda-admission-webhooks"}
KEDA_WEBHOOKS_PORT = 9443
# kuberay-operator 1.7.0 (templates/deployment.yaml): name and instance (the release) on the pod.
KUBERAY_OPERATOR_POD = {"app.kubernetes.io/name": "kuberay-operator"}
# dcgm-exporter 4.8.2 selector labels; its `metrics` port.
DCGM_EXPORTER_POD = {"app.kubernetes.io/name": "dcgm-exporter"}
DCGM_EXPORTER_PORT = 9400
# lws 0.10.0 (charts/lws/templates): the controller's selector labels; its webhook Service targets 9443.
LWS_NAMESPACE = "lws-system"
LWS_CONTROLLER_POD = {"app.kubernetes.io/name": "lws", "control-plane": "controller-manager"}
LWS_WEBHOOK_PORT = 9443
# Ray (KubeRay defaults): the dashboard (the operator's Serve API), Serve, the metrics export. GCS (6379) and the
# Ray client (10001) are only ever reachable from the RayService's own pods.
RAY_DASHBOARD_PORT = 8265
RAY_SERVE_PORT = 8000
RAY_METRICS_PORT = 8080


def pods(labels: Mapping[str, str], namespace: str | None = None) -> dict[str, Any]:
    """A peer: pods with `labels`, in the policy's own namespace or (given) in `namespace`."""
    peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(labels)}}
    if namespace is not None:
        peer["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}
    return peer


def cidrs(blocks: Iterable[str]) -> list[dict[str, Any]]:
    """One ipBlock peer per CIDR."""
    return [{"ipBlock": {"cidr": block}} for block in blocks]


def tcp(*ports: int | str) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def rule(peers: Sequence[Mapping[str, Any]], ports: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """One ingress rule: any of `peers` on any of `ports` (None: every port)."""
    out: dict[str, Any] = {"from": [dict(p) for p in peers]}
    if ports is not None:
        out["ports"] = [dict(p) for p in ports]
    return out


@builds_objects
def network_policy(
    name: str, namespace: str, selected: Mapping[str, str], rules: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """An ingress NetworkPolicy on the pods with `selected` labels ({} = every pod of the namespace)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "llm-eks"}},
        "spec": {
            "podSelector": {"matchLabels": dict(selected)} if selected else {},
            "policyTypes": ["Ingress"],
            "ingress": [dict(r) for r in rules],
        },
    }


def default_deny(namespace: str) -> dict[str, Any]:
    """Every pod of `namespace` selected, no rule: nothing gets in unless another policy allows it."""
    return network_policy(DEFAULT_DENY, namespace, {}, [])


def pod_security_labels(level: str) -> dict[str, str]:
    """Enforce `level`; warn and audit at `restricted`, so anything below it shows up in `kubectl apply` output."""
    if level not in ("restricted", "baseline", "privileged"):
        raise ValueError(f"unknown Pod Security level {level!r}")  # a bug: levels are constants in this package
    return {
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


@builds_objects
def namespace(name: str, level: str, reason: str | None = None) -> dict[str, Any]:
    """A Namespace enforcing Pod Security `level`; below restricted, `reason` says why in one line."""
    if level != "restricted" and not reason:
        raise ValueError(f"namespace {name}: Pod Security {level!r} needs a reason")
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {"app.kubernetes.io/part-of": "llm-eks", **pod_security_labels(level)},
    }
    if reason:
        metadata["annotations"] = {REASON_ANNOTATION: reason}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def client_peers() -> list[dict[str, Any]]:
    """In-cluster clients that opted in: labelled pods of the workload namespace, or labelled pods of a labelled
    namespace (labelling a namespace takes namespace-update rights, so a tenant cannot opt itself in)."""
    client = {CLIENT_LABEL: "true"}
    return [
        pods(client),
        {"podSelector": {"matchLabels": client}, "namespaceSelector": {"matchLabels": client}},
    ]


# -- the workload namespace -------------------------------------------------------------------------------------


def vllm_policies(
    ns: str,
    name: str,
    selector: Mapping[str, str],
    port: int,
    *,
    benchmark: Mapping[str, str] | None = None,
    alb_cidrs: Sequence[str] = (),
    monitoring_namespace: str = MONITORING_NAMESPACE,
    group: bool = False,
    direct_clients: bool = True,
    namespace_default_deny: bool = True,
) -> list[dict[str, Any]]:
    """vLLM serves the API and /metrics on one port: Prometheus, the benchmark Job, opted-in clients and (with an
    internal ALB, target type ip) the ALB's ENIs reach it; nothing else in the cluster does. With `group` (a replica
    spanning nodes, a LeaderWorkerSet) the workload's pods also reach each other on every port: torch.distributed's
    store, vLLM's message queues and NCCL pick theirs at run time. Without `direct_clients` (a workload that checks
    no key of its own, behind a gateway that authenticates) opted-in clients go through the gateway only. Without
    `namespace_default_deny` the namespace's default-deny is another chart's (a next version's, in its current
    version's namespace)."""
    peers = [pods(PROMETHEUS_POD, monitoring_namespace), *(client_peers() if direct_clients else [])]
    if benchmark is not None:
        peers.append(pods(benchmark))
    peers += cidrs(alb_cidrs)
    policies = [
        *([default_deny(ns)] if namespace_default_deny else []),
        network_policy(f"{name}-serving", ns, selector, [rule(peers, tcp(port))]),
    ]
    if group:
        policies.append(network_policy(f"{name}-group", ns, selector, [rule([pods(selector)])]))
    return policies


def prefill_decode_policies(
    ns: str, name: str, prefill: Mapping[str, str], decode: Mapping[str, str]
) -> list[dict[str, Any]]:
    """A disaggregated workload's prefill and decode pods reach each other, and nothing else reaches them but what
    the serving policy admits: the decode pod's routing sidecar sends the prompt to a prefill pod (the serving port),
    the two NIXL agents handshake on the side-channel port (5600 + the data-parallel rank) and move the KV blocks,
    over UCX's TCP transport on ports it picks at run time (every port, as a LeaderWorkerSet group), or over EFA,
    which bypasses the kernel's IP stack and so any NetworkPolicy. Only between this workload's two pools."""
    return [
        network_policy(f"{name}-prefill-from-decode", ns, prefill, [rule([pods(decode)])]),
        network_policy(f"{name}-decode-from-prefill", ns, decode, [rule([pods(prefill)])]),
    ]


def ray_policies(
    ns: str,
    name: str,
    ray_pods: Mapping[str, str],
    *,
    monitoring_namespace: str = MONITORING_NAMESPACE,
    kuberay_namespace: str = KUBERAY_NAMESPACE,
    direct_clients: bool = True,
) -> list[dict[str, Any]]:
    """A RayService's pods talk to each other on every port (GCS, object transfer, NCCL); from outside, the KubeRay
    operator reaches the head's dashboard (Serve config and status) and Serve proxy (its health check), Prometheus
    the metrics export, opted-in clients the Serve port. GCS (6379) and the Ray client (10001) are never opened
    beyond the cluster's own pods: they run arbitrary code on the cluster.

    KubeRay names the RayCluster `<name>-<random>`, so its `ray.io/cluster` label is unknown at synth time: the
    pods are selected by the chart's `app.kubernetes.io/instance` label, i.e. one RayService (its active cluster
    and, during a NewCluster upgrade, the pending one) is one trust domain. Without `direct_clients` (behind a
    gateway that authenticates: Ray Serve LLM checks no key) clients reach the Serve port only through the gateway."""
    head = {**ray_pods, "ray.io/node-type": "head"}
    serving = [network_policy(f"{name}-serving", ns, ray_pods, [rule(client_peers(), tcp(RAY_SERVE_PORT))])]
    return [
        default_deny(ns),
        network_policy(f"{name}-ray-cluster", ns, ray_pods, [rule([pods(ray_pods)])]),
        network_policy(
            f"{name}-kuberay-operator",
            ns,
            head,
            [rule([pods(KUBERAY_OPERATOR_POD, kuberay_namespace)], tcp(RAY_DASHBOARD_PORT, RAY_SERVE_PORT))],
        ),
        network_policy(
            f"{name}-metrics",
            ns,
            ray_pods,
            [rule([pods(PROMETHEUS_POD, monitoring_namespace)], tcp(RAY_METRICS_PORT))],
        ),
        *(serving if direct_clients else []),
    ]


# -- add-on namespaces ------------------------------------------------------------------------------------------


# Pod Security per add-on namespace: (level, why when below restricted). Checked in each pinned chart's defaults.
# keda 2.20.2: pods runAsNonRoot; containers drop ALL, no escalation, RuntimeDefault seccomp.
KEDA_POD_SECURITY = ("restricted", None)
# kuberay-operator 1.7.0: container runAsNonRoot, drop ALL, no escalation, RuntimeDefault seccomp.
KUBERAY_POD_SECURITY = ("restricted", None)
# lws 0.10.0: pod runAsNonRoot, container drops ALL without escalation; LeaderWorkerSetController adds seccomp.
LWS_POD_SECURITY = ("restricted", None)
# Upstream pods that cannot meet restricted or baseline: prometheus-node-exporter 4.56.1 (kube-prometheus-stack's).
MONITORING_POD_SECURITY = (
    "privileged",
    "prometheus-node-exporter runs with hostNetwork, hostPID and hostPath mounts of /proc, /sys and /",
)
# Upstream pods that cannot meet restricted or baseline: dcgm-exporter 4.8.2, nvidia-device-plugin 0.20.0.
NVIDIA_POD_SECURITY = (
    "privileged",
    "dcgm-exporter adds CAP_SYS_ADMIN and mounts the kubelet's pod-resources hostPath; the AL2023 device plugin "
    "mounts the kubelet's device-plugins hostPath",
)
# Upstream pods that cannot meet restricted or baseline: the Neuron device plugin (neuron-helm-chart 1.10.0).
NEURON_POD_SECURITY = ("privileged", "the Neuron device plugin registers through the kubelet's device-plugins hostPath")


def keda_namespace(
    ns: str, control_plane_cidrs: Sequence[str], *, monitoring_namespace: str | None = MONITORING_NAMESPACE
) -> list[dict[str, Any]]:
    """The API server calls the external metrics API and the admission webhooks; the metrics server asks the
    operator over gRPC; Prometheus (in `monitoring_namespace`; None: not scraped) reads the operator's metrics. The
    operator itself only makes outgoing calls (the query endpoint, the Kubernetes API)."""
    scraped = (
        []
        if monitoring_namespace is None
        else [
            network_policy(
                "keda-operator-metrics",
                ns,
                KEDA_OPERATOR_POD,
                [rule([pods(PROMETHEUS_POD, monitoring_namespace)], tcp(KEDA_OPERATOR_METRICS_PORT))],
            )
        ]
    )
    return [
        namespace(ns, *KEDA_POD_SECURITY),
        default_deny(ns),
        network_policy(
            "keda-metrics-apiserver",
            ns,
            KEDA_METRICS_SERVER_POD,
            [rule(cidrs(control_plane_cidrs), tcp(KEDA_METRICS_SERVER_PORT))],
        ),
        network_policy(
            "keda-admission-webhooks",
            ns,
            KEDA_WEBHOOKS_POD,
            [rule(cidrs(control_plane_cidrs), tcp(KEDA_WEBHOOKS_PORT))],
        ),
        network_policy(
            "keda-operator",
            ns,
            KEDA_OPERATOR_POD,
            [rule([pods(KEDA_METRICS_SERVER_POD)], tcp(KEDA_OPERATOR_GRPC_PORT))],
        ),
        *scraped,
    ]


def monitoring_namespace(
    ns: str, control_plane_cidrs: Sequence[str], prometheus_clients: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Prometheus scrapes every pod of its namespace (itself, Alertmanager, Grafana, kube-state-metrics, the
    operator, the querier) on whatever port its ServiceMonitors name, and sends alerts to Alertmanager; the Thanos
    querier reads both Prometheus replicas through their sidecars; Grafana, `prometheus_clients` (the KEDA operator)
    and the API server (for `llm-eks verify`, through its service proxy, from the control plane's ENIs in the VPC)
    query the querier; Grafana reads Alertmanager; Alertmanager replicas gossip with each other; the API server
    calls the operator's webhook. node-exporter runs on the host network, where pod policies do not apply."""
    return [
        namespace(ns, *MONITORING_POD_SECURITY),
        default_deny(ns),
        network_policy("prometheus-scrapes", ns, {}, [rule([pods(PROMETHEUS_POD)])]),
        network_policy(
            "thanos-query",
            ns,
            THANOS_QUERY_POD,
            [
                rule([pods(GRAFANA_POD), *prometheus_clients], tcp(THANOS_QUERY_PORT)),
                rule(cidrs(control_plane_cidrs), tcp(THANOS_QUERY_PORT)),
            ],
        ),
        network_policy(
            "prometheus-sidecars-from-thanos-query",
            ns,
            PROMETHEUS_POD,
            [rule([pods(THANOS_QUERY_POD)], tcp(THANOS_SIDECAR_GRPC_PORT))],
        ),
        network_policy(
            "prometheus-from-grafana", ns, PROMETHEUS_POD, [rule([pods(GRAFANA_POD)], tcp(PROMETHEUS_PORT))]
        ),
        network_policy(
            "alertmanager-from-grafana", ns, ALERTMANAGER_POD, [rule([pods(GRAFANA_POD)], tcp(ALERTMANAGER_PORT))]
        ),
        network_policy(
            "alertmanager-cluster",
            ns,
            ALERTMANAGER_POD,
            [
                rule(
                    [pods(ALERTMANAGER_POD)],
                    [
                        {"protocol": "TCP", "port": ALERTMANAGER_CLUSTER_PORT},
                        {"protocol": "UDP", "port": ALERTMANAGER_CLUSTER_PORT},
                    ],
                )
            ],
        ),
        network_policy(
            "prometheus-operator-webhook",
            ns,
            PROMETHEUS_OPERATOR_POD,
            [rule(cidrs(control_plane_cidrs), tcp(PROMETHEUS_OPERATOR_WEBHOOK_PORT))],
        ),
    ]


def nvidia_namespace(ns: str, monitoring_namespace: str = MONITORING_NAMESPACE) -> list[dict[str, Any]]:
    """Prometheus scrapes the DCGM exporter; the device plugin talks to the kubelet over a socket, not the network."""
    return [
        namespace(ns, *NVIDIA_POD_SECURITY),
        default_deny(ns),
        network_policy(
            "dcgm-exporter-metrics",
            ns,
            DCGM_EXPORTER_POD,
            [rule([pods(PROMETHEUS_POD, monitoring_namespace)], tcp(DCGM_EXPORTER_PORT))],
        ),
    ]


def kuberay_namespace(ns: str) -> list[dict[str, Any]]:
    """The KubeRay operator takes no connections (it has no webhook at the chart's defaults); its probes come from
    the node, which the network policy agent always lets in."""
    return [namespace(ns, *KUBERAY_POD_SECURITY), default_deny(ns)]


def lws_namespace(ns: str, control_plane_cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """The API server calls the LeaderWorkerSet controller's admission webhooks (LeaderWorkerSets, and the pods of
    their groups); the controller itself only makes outgoing calls."""
    return [
        namespace(ns, *LWS_POD_SECURITY),
        default_deny(ns),
        network_policy(
            "lws-webhooks", ns, LWS_CONTROLLER_POD, [rule(cidrs(control_plane_cidrs), tcp(LWS_WEBHOOK_PORT))]
        ),
    ]


def neuron_namespace(ns: str) -> list[dict[str, Any]]:
    """The Neuron device plugin takes no connections (it talks to the kubelet over a socket)."""
    return [namespace(ns, *NEURON_POD_SECURITY), default_deny(ns)]
