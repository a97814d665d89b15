"""NetworkPolicies and Pod Security: the evaluator on textbook cases, then every allowed and every denied flow of the
default environments' synthesized objects (the review YAML `cdk synth` writes), and the Pod Security levels."""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.manifests import network_policies as netpol
from llm_eks.manifests.checks import POD_SECURITY, check_objects, namespace_levels
from llm_eks.manifests.checks.objects import pod_templates
from llm_eks.manifests.gateway import platform
from llm_eks.manifests.source import SOURCE_ANNOTATION
from tests.conftest import Synthesized
from tests.netpol import Cluster, External, Pod

# -- the evaluator itself -----------------------------------------------------------------------------------------


def _policy(ns: str, selector: dict[str, Any], ingress: list[dict[str, Any]] | None, types: Any = None) -> dict:
    spec: dict[str, Any] = {"podSelector": selector}
    if ingress is not None:
        spec["ingress"] = ingress
    if types is not None:
        spec["policyTypes"] = types
    return {"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": ns}, "spec": spec}


WEB = Pod("prod", {"app": "web"}, ports={"http": (8080, "TCP")})
DB = Pod("prod", {"app": "db"}, ports={"pg": (5432, "TCP")})
OTHER_NS = Pod("dev", {"app": "web"})
NAMESPACES = {"prod": {"env": "prod"}, "dev": {"env": "dev"}}


def test_no_policy_selecting_a_pod_allows_everything() -> None:
    cluster = Cluster([_policy("prod", {"matchLabels": {"app": "db"}}, [])], NAMESPACES)
    assert cluster.allows(OTHER_NS, WEB, 8080)
    assert not cluster.allows(WEB, DB, 5432)


def test_default_deny_and_a_policy_in_another_namespace() -> None:
    deny = _policy("prod", {}, None, ["Ingress"])
    cluster = Cluster([deny], NAMESPACES)
    assert not cluster.allows(DB, WEB, 8080)
    assert cluster.allows(WEB, OTHER_NS, 80)  # the policy lives in prod: dev is untouched
    egress_only = Cluster([_policy("prod", {}, None, ["Egress"])], NAMESPACES)
    assert egress_only.allows(DB, WEB, 8080)


def test_pod_selector_alone_means_the_policys_own_namespace() -> None:
    allow = _policy(
        "prod", {"matchLabels": {"app": "db"}}, [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]
    )
    cluster = Cluster([allow], NAMESPACES)
    assert cluster.allows(WEB, DB, 5432)
    assert not cluster.allows(OTHER_NS, DB, 5432)


def test_namespace_and_pod_selector_in_one_peer_are_anded_in_two_peers_ored() -> None:
    anded = {"namespaceSelector": {"matchLabels": {"env": "dev"}}, "podSelector": {"matchLabels": {"app": "api"}}}
    ored = [{"namespaceSelector": {"matchLabels": {"env": "dev"}}}, {"podSelector": {"matchLabels": {"app": "api"}}}]
    dev_web, dev_api = Pod("dev", {"app": "web"}), Pod("dev", {"app": "api"})
    one = Cluster([_policy("prod", {}, [{"from": [anded]}])], NAMESPACES)
    two = Cluster([_policy("prod", {}, [{"from": ored}])], NAMESPACES)
    assert one.allows(dev_api, DB, 5432) and not one.allows(dev_web, DB, 5432)
    assert two.allows(dev_api, DB, 5432) and two.allows(dev_web, DB, 5432)
    assert not one.allows(Pod("prod", {"app": "api"}), DB, 5432)
    assert two.allows(Pod("prod", {"app": "api"}), DB, 5432)


def test_ip_blocks_with_except_and_pods_by_ip() -> None:
    block = {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.5.0/24"]}}
    cluster = Cluster([_policy("prod", {}, [{"from": [block]}])], NAMESPACES)
    assert cluster.allows(External("10.0.1.9"), DB, 5432)
    assert not cluster.allows(External("10.0.5.9"), DB, 5432)
    assert not cluster.allows(External("192.168.0.1"), DB, 5432)
    assert not cluster.allows(WEB, DB, 5432)  # a pod without an address never matches an ipBlock
    assert cluster.allows(Pod("dev", {}, ip="10.0.2.2"), DB, 5432)


def test_ports_numbers_names_ranges_protocols_and_empty_rules() -> None:
    ports = [{"port": "pg"}, {"protocol": "UDP", "port": 53}, {"port": 9000, "endPort": 9002}]
    cluster = Cluster([_policy("prod", {}, [{"from": [], "ports": ports}])], NAMESPACES)
    assert cluster.allows(OTHER_NS, DB, 5432)
    assert not cluster.allows(OTHER_NS, WEB, 5432)  # `pg` names no port of WEB
    assert cluster.allows(OTHER_NS, DB, 53, "UDP") and not cluster.allows(OTHER_NS, DB, 53)
    assert cluster.allows(OTHER_NS, DB, 9001) and not cluster.allows(OTHER_NS, DB, 9003)
    allow_all = Cluster([_policy("prod", {}, [{}])], NAMESPACES)
    assert allow_all.allows(External("8.8.8.8"), DB, 1)


def test_match_expressions() -> None:
    selector = {
        "matchExpressions": [
            {"key": "app", "operator": "In", "values": ["db"]},
            {"key": "x", "operator": "DoesNotExist"},
        ]
    }
    cluster = Cluster([_policy("prod", selector, [])], NAMESPACES)
    assert not cluster.allows(WEB, DB, 5432)
    assert cluster.allows(DB, WEB, 8080)
    assert cluster.allows(WEB, Pod("prod", {"app": "db", "x": "1"}), 5432)


# -- the synthesized environments ---------------------------------------------------------------------------------

VPC_POD_IP = "10.0.40.7"  # any pod: the VPC CNI gives pods addresses of the VPC (10.0.0.0/16 by default)
CONTROL_PLANE = External("10.0.1.20")  # an EKS control-plane ENI in a private subnet
OUTSIDE = External("172.31.9.9")

PROMETHEUS = Pod(
    "monitoring",
    {"app.kubernetes.io/name": "prometheus", "operator.prometheus.io/name": "kube-prometheus-stack-prometheus"},
)
GRAFANA = Pod(
    "monitoring", {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": "kube-prometheus-stack"}
)
ALERTMANAGER = Pod("monitoring", {"app.kubernetes.io/name": "alertmanager"})
THANOS_QUERY = Pod("monitoring", {"app.kubernetes.io/name": "thanos-query", "app.kubernetes.io/part-of": "llm-eks"})
KSM = Pod("monitoring", {"app.kubernetes.io/name": "kube-state-metrics"})
PROM_OPERATOR = Pod(
    "monitoring",
    {"app": "kube-prometheus-stack-operator", "app.kubernetes.io/name": "kube-prometheus-stack-prometheus-operator"},
)
KEDA_OPERATOR = Pod("keda", {"app": "keda-operator", "app.kubernetes.io/name": "keda-operator"})
KEDA_METRICS = Pod("keda", {"app": "keda-operator-metrics-apiserver"})
KEDA_WEBHOOKS = Pod("keda", {"app": "keda-admission-webhooks"})
KUBERAY = Pod(
    "kuberay-system", {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kuberay-operator"}
)
DCGM = Pod("nvidia-gpu", {"app.kubernetes.io/name": "dcgm-exporter"})
STRANGER = Pod("team-a", {"app": "notebook"})  # any pod of a namespace we do not own
CLIENT = {netpol.CLIENT_LABEL: "true"}


def _objects(synthesized: Synthesized, env: str) -> list[dict[str, Any]]:
    assert synthesized.error is None, synthesized.error
    return synthesized.objects(env)


def _cluster(objects: list[dict[str, Any]]) -> Cluster:
    namespaces: dict[str, dict[str, str]] = {"default": {}, "kube-system": {}, "team-a": {}, "clients": CLIENT}
    namespaces.update(
        {o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in objects if o["kind"] == "Namespace"}
    )
    return Cluster(objects, namespaces)


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def _vllm_deployments(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "vllm"
    ]


def _vllm_pods(objects: list[dict[str, Any]]) -> tuple[Pod, Pod]:
    (deployment,) = _vllm_deployments(objects)
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].startswith("bench-")]
    ports = {
        p["name"]: (p["containerPort"], p["protocol"])
        for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    vllm = Pod(deployment["metadata"]["namespace"], deployment["spec"]["template"]["metadata"]["labels"], ports)
    bench = Pod(job["metadata"]["namespace"], job["spec"]["template"]["metadata"]["labels"])
    return vllm, bench


def _ray_pods(objects: list[dict[str, Any]]) -> tuple[Pod, Pod]:
    service = _one(objects, "RayService")
    cluster = service["spec"]["rayClusterConfig"]
    ns, name = service["metadata"]["namespace"], service["metadata"]["name"]

    def pod(template: dict[str, Any], node_type: str, group: str) -> Pod:
        # What KubeRay 1.7.0 adds (common/pod.go labelPod); the template's own labels win except these three.
        labels = {
            "ray.io/is-ray-node": "yes",
            "ray.io/cluster": f"{name}-x7k2p",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
            **template["metadata"]["labels"],
            "ray.io/node-type": node_type,
            "ray.io/group": group,
        }
        return Pod(ns, labels)

    head = pod(cluster["headGroupSpec"]["template"], "head", "headgroup")
    worker = pod(cluster["workerGroupSpecs"][0]["template"], "worker", cluster["workerGroupSpecs"][0]["groupName"])
    return head, worker


def _vllm_flows(objects: list[dict[str, Any]], alb: bool, direct: bool) -> list[tuple[str, Any, Pod, int, bool]]:
    vllm, bench = _vllm_pods(objects)
    ns = vllm.namespace
    stray = Pod(ns, {"app": "debug"})
    flows = [
        ("Prometheus", PROMETHEUS, vllm, 8000, True),
        ("benchmark Job", bench, vllm, 8000, True),
        # Behind staging's JWT-checking gateway, clients of a workload without a key go through the gateway only.
        ("labelled client pod in the workload namespace", Pod(ns, CLIENT), vllm, 8000, direct),
        ("labelled client pod in a labelled namespace", Pod("clients", CLIENT), vllm, 8000, direct),
        ("unlabelled pod in the workload namespace", stray, vllm, 8000, False),
        ("labelled pod in an unlabelled namespace", Pod("team-a", CLIENT), vllm, 8000, False),
        ("pod in another namespace", STRANGER, vllm, 8000, False),
        ("Grafana", GRAFANA, vllm, 8000, False),
        ("KEDA operator", KEDA_OPERATOR, vllm, 8000, False),
        ("Prometheus, another port", PROMETHEUS, vllm, 8001, False),
        ("address outside the VPC", OUTSIDE, vllm, 8000, False),
        ("pod in another namespace", STRANGER, bench, 8000, False),
        ("vLLM", vllm, bench, 8000, False),
        ("internal ALB (its own subnet)", External("10.0.255.130"), vllm, 8000, alb),
        ("an address of the pods' subnets", External("10.0.100.5"), vllm, 8000, False),
        # KEDA
        ("EKS control plane", CONTROL_PLANE, KEDA_METRICS, 6443, True),
        ("EKS control plane", CONTROL_PLANE, KEDA_WEBHOOKS, 9443, True),
        ("KEDA metrics server", KEDA_METRICS, KEDA_OPERATOR, 9666, True),
        ("pod in another namespace", STRANGER, KEDA_OPERATOR, 9666, False),
        ("pod in another namespace", STRANGER, KEDA_METRICS, 6443, False),
        ("EKS control plane", CONTROL_PLANE, KEDA_OPERATOR, 9666, False),
        ("address outside the VPC", OUTSIDE, KEDA_METRICS, 6443, False),
        ("KEDA operator", KEDA_OPERATOR, THANOS_QUERY, 10902, True),
        ("Prometheus", PROMETHEUS, KEDA_OPERATOR, 8080, True),
        ("pod in another namespace", STRANGER, KEDA_OPERATOR, 8080, False),
        ("KEDA operator", KEDA_OPERATOR, PROMETHEUS, 9090, False),
        ("KEDA metrics server", KEDA_METRICS, THANOS_QUERY, 10902, False),
    ]
    return flows


def _monitoring_flows() -> list[tuple[str, Any, Pod, int, bool]]:
    return [
        ("Grafana", GRAFANA, THANOS_QUERY, 10902, True),
        ("Grafana", GRAFANA, PROMETHEUS, 9090, True),
        ("Grafana", GRAFANA, ALERTMANAGER, 9093, True),
        # Both Prometheus replicas' sidecars serve the querier; Alertmanagers gossip with each other.
        ("Thanos querier", THANOS_QUERY, PROMETHEUS, 10901, True),
        ("Thanos querier", THANOS_QUERY, PROMETHEUS, 9090, False),
        ("Alertmanager", ALERTMANAGER, ALERTMANAGER, 9094, True),
        ("Grafana", GRAFANA, ALERTMANAGER, 9094, False),
        ("Prometheus", PROMETHEUS, THANOS_QUERY, 10902, True),
        ("Prometheus (self-scrape)", PROMETHEUS, PROMETHEUS, 9090, True),
        ("Prometheus", PROMETHEUS, ALERTMANAGER, 9093, True),
        ("Prometheus", PROMETHEUS, KSM, 8080, True),
        ("Prometheus", PROMETHEUS, GRAFANA, 3000, True),
        ("Prometheus", PROMETHEUS, DCGM, 9400, True),
        ("EKS control plane", CONTROL_PLANE, PROM_OPERATOR, 10250, True),
        # `llm-eks verify` queries the query endpoint through the API server's service proxy, which connects from the
        # control plane's ENIs in the VPC: the VPC CIDR is admitted on 10902, so a pod holding a VPC address is too
        # (by address; docs/concepts/security.md says why that is accepted). Prometheus itself no longer is.
        ("EKS control plane", CONTROL_PLANE, THANOS_QUERY, 10902, True),
        ("pod with a VPC address, in another namespace", Pod("team-a", {}, ip=VPC_POD_IP), THANOS_QUERY, 10902, True),
        ("EKS control plane", CONTROL_PLANE, PROMETHEUS, 9090, False),
        ("pod with a VPC address, in another namespace", Pod("team-a", {}, ip=VPC_POD_IP), PROMETHEUS, 9090, False),
        ("pod in another namespace", STRANGER, THANOS_QUERY, 10902, False),
        ("EKS control plane", CONTROL_PLANE, PROMETHEUS, 8080, False),
        ("EKS control plane", CONTROL_PLANE, ALERTMANAGER, 9093, False),
        ("EKS control plane", CONTROL_PLANE, GRAFANA, 3000, False),
        ("address outside the VPC", OUTSIDE, PROMETHEUS, 9090, False),
        ("pod in another namespace", STRANGER, PROMETHEUS, 9090, False),
        ("pod in another namespace", STRANGER, GRAFANA, 3000, False),
        ("pod in another namespace", STRANGER, ALERTMANAGER, 9093, False),
        ("kube-state-metrics", KSM, PROMETHEUS, 9090, False),
        ("Grafana", GRAFANA, KSM, 8080, False),
        ("pod in another namespace", STRANGER, DCGM, 9400, False),
        ("Grafana", GRAFANA, DCGM, 9400, False),
    ]


def _ray_flows(objects: list[dict[str, Any]], keda: bool, direct: bool) -> list[tuple[str, Any, Pod, int, bool]]:
    head, worker = _ray_pods(objects)
    ns = head.namespace
    other_ray = Pod(ns, {**head.labels, "app.kubernetes.io/instance": "ray-other", "ray.io/cluster": "ray-other-abcde"})
    stray = Pod(ns, {"app": "debug"})
    flows: list[tuple[str, Any, Pod, int, bool]] = [
        ("Ray worker", worker, head, 6379, True),
        ("Ray worker", worker, head, 8265, True),
        ("Ray head", head, worker, 40000, True),
        ("Ray worker", worker, worker, 40000, True),
        ("KubeRay operator", KUBERAY, head, 8265, True),
        ("KubeRay operator", KUBERAY, head, 8000, True),
        ("KubeRay operator", KUBERAY, head, 6379, False),
        ("KubeRay operator", KUBERAY, worker, 8265, False),
        ("Prometheus", PROMETHEUS, head, 8080, True),
        ("Prometheus", PROMETHEUS, worker, 8080, True),
        ("Prometheus", PROMETHEUS, head, 8265, False),
        ("labelled client pod in the workload namespace", Pod(ns, CLIENT), head, 8000, direct),
        ("labelled client pod in a labelled namespace", Pod("clients", CLIENT), worker, 8000, direct),
        ("labelled client pod", Pod("clients", CLIENT), head, 10001, False),
        ("unlabelled pod in the workload namespace", stray, head, 8000, False),
        ("pod of another RayService", other_ray, head, 6379, False),
        ("address outside the VPC", OUTSIDE, head, 8265, False),
        ("EKS control plane", CONTROL_PLANE, head, 8265, False),
        ("pod in another namespace", STRANGER, KUBERAY, 8080, False),
        ("Prometheus", PROMETHEUS, DCGM, 9400, True),
    ]
    if not keda:
        # No KEDA in a Ray Serve-only environment, so nothing outside `monitoring` may query Prometheus.
        flows.append(
            ("pod labelled as KEDA's operator in a `keda` namespace", KEDA_OPERATOR, THANOS_QUERY, 10902, False)
        )
    for port in (8265, 6379, 10001, 8000, 52365):
        flows.append(("pod in another namespace", STRANGER, head, port, False))
        flows.append(("unlabelled pod in the workload namespace", stray, head, port, False))
    flows.append(("pod in another namespace", STRANGER, worker, 8000, False))
    return flows


def flows(env: str, objects: list[dict[str, Any]]) -> list[tuple[str, Any, Pod, int, bool]]:
    """(source description, source, destination, port, allowed) for every flow of `env` the table covers."""
    ray = any(o["kind"] == "RayService" for o in objects)
    vllm = bool(_vllm_deployments(objects))
    alb = any(o["kind"] == "Ingress" for o in objects)
    # staging's gateway checks a JWT and its workloads no key: they admit clients only through it.
    direct = not any(o["kind"] == "Gateway" for o in objects)
    table = _monitoring_flows()
    if ray:
        table += _ray_flows(objects, keda=vllm, direct=direct)
    if vllm:
        table += _vllm_flows(objects, alb, direct)
    if ray and vllm:
        # Two workloads, two namespaces: neither's pods reach the other's unless labelled as clients.
        (head, worker), (server, bench) = _ray_pods(objects), _vllm_pods(objects)
        table += [
            ("vLLM of another workload", server, head, 8000, False),
            ("benchmark Job of another workload", bench, head, 8000, False),
            ("Ray worker of another workload", worker, server, 8000, False),
            ("Ray head of another workload", head, server, 8000, False),
        ]
    if any(o["kind"] == "Gateway" for o in objects):
        table += _gateway_flows(objects)
    return table


def _gateway_flows(objects: list[dict[str, Any]]) -> list[tuple[str, Any, Pod, int, bool]]:
    """The gateway (staging, in-cluster only): labelled clients to Envoy's two listeners (api-key on 80, which Envoy
    binds as 10080; jwt on 8080), Envoy to the pickers and the model pods, each picker to its own pool's /metrics,
    Envoy to Envoy Gateway's xDS and the rate-limit service, the rate-limit service to its counters, Envoy Gateway to
    the AI Gateway's extension server, the control plane to its webhook; nothing else."""
    (head, worker), (server, bench) = _ray_pods(objects), _vllm_pods(objects)
    envoy = Pod("inference-gateway", {**platform.ENVOY_POD, platform.OWNING_GATEWAY_NAME: "inference"}, ip="10.0.1.10")
    (picker_deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-epp")]
    picker = Pod(server.namespace, picker_deployment["spec"]["template"]["metadata"]["labels"])
    eg = Pod(platform.ENVOY_GATEWAY_NAMESPACE, platform.ENVOY_GATEWAY_POD)
    ratelimit = Pod(platform.ENVOY_GATEWAY_NAMESPACE, platform.RATELIMIT_POD)
    valkey = Pod(platform.ENVOY_GATEWAY_NAMESPACE, platform.VALKEY_POD)
    aigw = Pod(platform.AI_GATEWAY_NAMESPACE, platform.AI_GATEWAY_POD)
    eso = Pod(platform.EXTERNAL_SECRETS_NAMESPACE, platform.EXTERNAL_SECRETS_POD)
    return [
        ("labelled client pod in a labelled namespace", Pod("clients", CLIENT), envoy, 10080, True),
        ("labelled client pod in a labelled namespace", Pod("clients", CLIENT), envoy, 8080, True),
        ("labelled pod in an unlabelled namespace", Pod("team-a", CLIENT), envoy, 10080, False),
        ("pod in another namespace", STRANGER, envoy, 10080, False),
        ("pod in another namespace", STRANGER, envoy, 8080, False),
        ("an address of the pods' subnets", External("10.0.100.5"), envoy, 10080, False),
        ("where an NLB's subnet would be", External("10.0.255.130"), envoy, 10080, False),
        ("address outside the VPC", OUTSIDE, envoy, 10080, False),
        ("labelled client, Envoy's admin port", Pod("clients", CLIENT), envoy, 19000, False),
        ("labelled client, Envoy's stats", Pod("clients", CLIENT), envoy, 19001, False),
        ("Prometheus", PROMETHEUS, envoy, 19001, True),
        ("Prometheus", PROMETHEUS, envoy, 1064, True),
        ("gateway Envoy", envoy, picker, 9002, True),
        ("pod in another namespace", STRANGER, picker, 9002, False),
        ("vLLM", server, picker, 9002, False),
        ("Prometheus", PROMETHEUS, picker, 9090, True),
        ("gateway Envoy", envoy, server, 8000, True),
        ("endpoint picker", picker, server, 8000, True),
        ("endpoint picker of another workload", picker, head, 8000, False),
        ("gateway Envoy", envoy, head, 8000, True),
        ("gateway Envoy", envoy, worker, 8000, True),
        ("gateway Envoy", envoy, head, 6379, False),
        ("gateway Envoy", envoy, head, 8265, False),
        ("gateway Envoy", envoy, bench, 8000, False),
        ("gateway Envoy", envoy, eg, platform.ENVOY_XDS_PORT, True),
        ("pod in another namespace", STRANGER, eg, platform.ENVOY_XDS_PORT, False),
        ("gateway Envoy", envoy, eg, platform.RATELIMIT_XDS_PORT, False),
        ("rate-limit service", ratelimit, eg, platform.RATELIMIT_XDS_PORT, True),
        ("gateway Envoy", envoy, ratelimit, platform.RATELIMIT_GRPC_PORT, True),
        ("pod in another namespace", STRANGER, ratelimit, platform.RATELIMIT_GRPC_PORT, False),
        ("rate-limit service", ratelimit, valkey, platform.VALKEY_PORT, True),
        ("gateway Envoy", envoy, valkey, platform.VALKEY_PORT, False),
        ("pod in another namespace", STRANGER, valkey, platform.VALKEY_PORT, False),
        ("Envoy Gateway", eg, aigw, platform.AI_GATEWAY_EXTENSION_PORT, True),
        ("gateway Envoy", envoy, aigw, platform.AI_GATEWAY_EXTENSION_PORT, False),
        ("EKS control plane", CONTROL_PLANE, aigw, platform.AI_GATEWAY_WEBHOOK_PORT, True),
        ("pod in another namespace", STRANGER, aigw, platform.AI_GATEWAY_WEBHOOK_PORT, False),
        ("Prometheus", PROMETHEUS, eso, platform.EXTERNAL_SECRETS_METRICS_PORT, True),
        ("gateway Envoy", envoy, eso, platform.EXTERNAL_SECRETS_METRICS_PORT, False),
    ]


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_flow_gets_its_verdict(synthesized: Synthesized, env: str) -> None:
    objects = _objects(synthesized, env)
    cluster = _cluster(objects)
    wrong = [
        f"{name} -> {dest.namespace}/{dict(dest.labels)}:{port}: expected {'allowed' if want else 'denied'}"
        for name, source, dest, port, want in flows(env, objects)
        if cluster.allows(source, dest, port) != want
    ]
    assert not wrong, "\n".join(wrong)


def test_no_pod_reaches_vllm_by_address_alone(synthesized: Synthesized) -> None:
    """A pod that reaches vLLM by IP alone is denied; no serving port admits an address block (an internal ALB,
    target type ip, would have subnets of its own, which the serving port admits: tests/test_ingress.py)."""
    for env in ("dev", "prod"):
        objects = _objects(synthesized, env)
        vllm, _ = _vllm_pods(objects)
        stray = Pod("team-a", {"app": "notebook"}, ip=VPC_POD_IP)
        assert not _cluster(objects).allows(stray, vllm, 8000), env
        assert not _cluster(objects).allows(stray, vllm, 8001), env
        blocks = [
            peer["ipBlock"]["cidr"]
            for o in objects
            if o["kind"] == "NetworkPolicy"
            for rule in o["spec"].get("ingress", [])
            for peer in rule.get("from", [])
            if "ipBlock" in peer and o["metadata"]["namespace"] == "inference"
        ]
        assert blocks == [], env


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_namespace_we_create_denies_by_default(synthesized: Synthesized, env: str) -> None:
    objects = _objects(synthesized, env)
    ours = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    denied = {
        o["metadata"]["namespace"]
        for o in objects
        if o["kind"] == "NetworkPolicy" and o["spec"]["podSelector"] == {} and o["spec"]["ingress"] == []
    }
    expected = (
        {
            "inference-qwen",
            "inference-llama",
            "inference-gateway",
            "monitoring",
            "nvidia-gpu",
            "keda",
            "kuberay-system",
            "envoy-gateway-system",
            "envoy-ai-gateway-system",
            "external-secrets",
        }
        if env == "staging"
        else {"inference", "monitoring", "nvidia-gpu", "keda"}
    )
    assert ours == denied == expected
    assert "kube-system" not in ours


# -- Pod Security ---------------------------------------------------------------------------------------------------

LEVELS = {
    "inference": "restricted",
    "inference-qwen": "restricted",
    "inference-llama": "restricted",
    "inference-gateway": "restricted",
    "envoy-gateway-system": "restricted",
    "envoy-ai-gateway-system": "restricted",
    "external-secrets": "restricted",
    "keda": "restricted",
    "kuberay-system": "restricted",
    "monitoring": "privileged",
    "nvidia-gpu": "privileged",
}


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_namespace_pod_security_levels_and_reasons(synthesized: Synthesized, env: str) -> None:
    for ns in (o for o in _objects(synthesized, env) if o["kind"] == "Namespace"):
        name, labels = ns["metadata"]["name"], ns["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == LEVELS[name], name
        assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
        reason = ns["metadata"].get("annotations", {}).get(netpol.REASON_ANNOTATION)
        assert (reason is None) == (LEVELS[name] == "restricted"), name
        assert reason is None or "\n" not in reason


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_every_pod_we_run_meets_its_namespaces_level(synthesized: Synthesized, env: str) -> None:
    """The library's POD_SECURITY check (the one `cdk synth` runs) on every pod template of the environment, KubeRay's
    autoscaler sidecar in the Ray head included; the workloads all land in namespaces that enforce restricted."""
    objects = _objects(synthesized, env)
    levels = namespace_levels(objects)
    judged = {
        (template.obj["kind"], template.part): levels[template.obj["metadata"]["namespace"]]
        for template in pod_templates(objects, daemonsets=True)
        if template.obj["kind"] != "EnvoyProxy"
    }
    assert {kind for kind, _ in judged} >= {"Deployment", "Job"}
    assert set(judged.values()) <= {"restricted", "privileged"}
    if env == "staging":
        assert judged[("RayService", "head")] == judged[("RayService", "worker group gpu")] == "restricted"
    problems = [str(f) for f in check_objects(objects) if f.rule == POD_SECURITY]
    assert not problems, "\n".join(problems)


def test_namespace_below_restricted_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        netpol.namespace("gpu", "privileged")
    assert netpol.namespace("gpu", "privileged", "device plugin hostPath")["metadata"]["annotations"] == {
        netpol.REASON_ANNOTATION: "device plugin hostPath",
        SOURCE_ANNOTATION: "llm_eks.manifests.network_policies",
    }
