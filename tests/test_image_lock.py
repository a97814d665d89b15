"""Image lock: the lock file's format and errors, digests applied by synth (our charts and the Helm releases'
values), and `require_image_digests` refusing synth while an image has no digest.

Digests here are sha256 of the reference text: test data, never a real image's digest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import cdk8s
import pytest

from llm_eks import versions
from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.error_codes import E105, E700, E704
from llm_eks.errors import ConfigError
from llm_eks.images.charts import CHART_IMAGES, IMAGE_DIGESTS_CONTEXT, NOT_COVERED
from llm_eks.images.lock import ImageLock, LockEntry, load_lock, parse_lock, write_lock
from llm_eks.infra.app import build_app
from llm_eks.infra.charts import build_charts
from llm_eks.infra.images import LOCK_FILE_CONTEXT, environment_charts, environment_images
from llm_eks.infra.review import readable
from llm_eks.infra.workloads import build_workload
from tests.coded import raises_code
from tests.conftest import CDK_JSON, ENVIRONMENTS, REPO_ROOT
from tests.environments import plan_environment
from tests.kube_schema import assert_valid

VLLM = versions.VLLM_IMAGE
RAY = versions.RAY_LLM_IMAGE
SOURCE = "https://registry.example/v2/x/manifests/y"


def fake_digest(ref: str) -> str:
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()


def lock_of(*refs: str, name: str = "images.lock.json") -> ImageLock:
    return ImageLock(name, {ref: LockEntry(fake_digest(ref), "2026-11-30T14:00:00Z", SOURCE) for ref in refs})


def all_images() -> tuple[str, ...]:
    return (VLLM, RAY, *(i.ref for chart in CHART_IMAGES.values() for i in chart.images))


# -- the file ---------------------------------------------------------------------------------------------------


def test_round_trip_and_pin(tmp_path: Path) -> None:
    path = tmp_path / "images.lock.json"
    write_lock(lock_of(VLLM), path)
    body = json.loads(path.read_text())
    assert body == {
        "version": 1,
        "images": {VLLM: {"digest": fake_digest(VLLM), "resolved_at": "2026-11-30T14:00:00Z", "source": SOURCE}},
    }
    lock = load_lock(path)
    # The tag stays beside the digest for the humans reading the YAML.
    assert lock.pin(VLLM) == f"vllm/vllm-openai:v0.33.0@{fake_digest(VLLM)}"
    assert lock.pin(RAY) == RAY
    assert load_lock(tmp_path / "absent.json").entries == {}


GOOD = {"digest": "sha256:" + "a" * 64, "resolved_at": "2026-11-30T14:00:00Z", "source": SOURCE}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "lock.json: [] is not allowed; must be a JSON object {\"version\": 1, \"images\": {...}} [LLMEKS-E700]"),
        ({"version": 2, "images": {}}, "lock.json: version: 2 is not allowed; must be 1 [LLMEKS-E700]"),
        ({"version": 1, "imgs": {}}, "lock.json: unknown key 'imgs'; allowed: images, version [LLMEKS-E700]"),
        ({"version": 1, "images": {"vllm/vllm-openai": GOOD}}, "lock.json: images: 'vllm/vllm-openai' is not "
         "allowed; keys must carry a tag (repository:tag); an untagged reference means ':latest', which moves"
         " [LLMEKS-E139]"),
        ({"version": 1, "images": {f"{VLLM}@{GOOD['digest']}": GOOD}}, "is not allowed; keys must be a tagged "
         "reference without '@digest' (the digest is the entry's value)"),
        ({"version": 1, "images": {VLLM: {**GOOD, "digest": "sha256:" + "A" * 64}}}, f"lock.json: images['{VLLM}']"
         f".digest: 'sha256:{'A' * 64}' is not allowed; must be 'sha256:' followed by 64 lowercase hex digits"),
        ({"version": 1, "images": {VLLM: {**GOOD, "digest": "sha512:" + "a" * 128}}}, "must be 'sha256:' followed"),
        ({"version": 1, "images": {VLLM: {**GOOD, "resolved_at": "yesterday"}}}, f"lock.json: images['{VLLM}']"
         ".resolved_at: 'yesterday' is not allowed; must be a UTC time such as 2026-11-30T14:00:00Z"),
        ({"version": 1, "images": {VLLM: {**GOOD, "source": "http://x"}}}, "source: 'http://x' is not allowed; "
         "must be the https URL the digest was read from"),
        ({"version": 1, "images": {VLLM: {**GOOD, "tag": "v1"}}}, f"lock.json: images['{VLLM}']: unknown key "
         "'tag'; allowed: digest, resolved_at, source"),
    ],
)  # fmt: skip
def test_malformed_lock_is_one_line_naming_file_and_entry(data: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_lock(data, "lock.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_not_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "images.lock.json"
    path.write_text("{")
    with raises_code(E700, match=rf"^{path}: is not JSON \(line 1: "):
        load_lock(path)


def test_shipped_defaults_hold_no_digest() -> None:
    """No digest can be verified without the registries: the repo ships no lock, and its environments on tags."""
    shipped = load_lock(REPO_ROOT / "images.lock.json")
    assert shipped.entries == {}
    for env in CDK_JSON["context"]["environments"].values():
        assert not env.get("require_image_digests", False)


# -- our charts ---------------------------------------------------------------------------------------------------


def _workload(body: dict[str, Any], lock: ImageLock) -> Any:
    config = parse_environment("dev", body)
    return build_workload(config, plan_environment(config), images=lock)


def test_vllm_and_benchmark_run_the_locked_digest() -> None:
    workload = _workload({}, lock_of(VLLM))
    charts = build_charts(cdk8s.App(), parse_environment("dev", {}), [workload], node_role_name="r",
                          security_group_ids=("sg-0123456789abcdef0",))  # fmt: skip
    images = {
        (c.id, o["kind"]): [x["image"] for x in o["spec"]["template"]["spec"]["containers"]]
        for c in charts
        for o in c.chart.to_json()
        if o["kind"] in ("Deployment", "Job")
    }
    pinned = f"{VLLM}@{fake_digest(VLLM)}"
    assert images == {("vllm", "Deployment"): [pinned], ("benchmark", "Job"): [pinned]}
    assert_valid([o for c in charts if c.id in ("vllm", "benchmark") for o in c.chart.to_json()])


def test_ray_head_and_workers_run_the_locked_digest() -> None:
    workload = _workload({"workload": {"engine": "ray-serve"}}, lock_of(RAY))
    chart = next(c.chart for c in build_charts(cdk8s.App(), parse_environment("dev", {"workload": {"engine":
        "ray-serve"}}), [workload], node_role_name="r", security_group_ids=("sg-0123456789abcdef0",)) if c.id ==
        "ray-serve")  # fmt: skip
    (service,) = [o for o in chart.to_json() if o["kind"] == "RayService"]
    cluster = service["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    images = {c["image"] for pod in pods for c in pod["spec"]["containers"]}
    assert images == {f"{RAY}@{fake_digest(RAY)}"}


def test_without_a_lock_images_stay_on_their_tags() -> None:
    assert _workload({}, ImageLock()).vllm.image == VLLM


# -- the switch ---------------------------------------------------------------------------------------------------


def test_require_image_digests_refuses_the_first_unlocked_image() -> None:
    body = {"require_image_digests": True}
    with pytest.raises(ConfigError) as info:
        _workload(body, lock_of(VLLM))
    assert str(info.value) == (
        "environments.dev.require_image_digests: true is not allowed while public.ecr.aws/karpenter/controller:1.14.1 "
        "and 19 more have no digest in images.lock.json; run `llm-eks images lock --env dev` where the registries are "
        "reachable, review and commit the file, or set require_image_digests to false [LLMEKS-E704]"
    )
    config = parse_environment("dev", body)
    full = lock_of(*environment_images(config, [plan_environment(config)]))
    assert _workload(body, full).vllm.image.endswith(fake_digest(VLLM))


def test_require_image_digests_is_a_boolean() -> None:
    with raises_code(E105, match=r"^environments.dev.require_image_digests: 'yes' is not allowed; "):
        parse_environment("dev", {"require_image_digests": "yes"})


def test_app_refuses_synth_before_building_stacks(tmp_path: Path) -> None:
    environments = {"dev": {**CDK_JSON["context"]["environments"]["dev"], "require_image_digests": True}}
    app = cdk.App(context={"environments": environments, LOCK_FILE_CONTEXT: str(tmp_path / "images.lock.json")})
    with raises_code(E704, match=r"^environments.dev.require_image_digests: true is not allowed while vllm/"):
        build_app(app)
    assert app.node.children == []


# -- Helm releases ------------------------------------------------------------------------------------------------


def test_app_hands_the_lock_to_the_helm_releases(tmp_path: Path) -> None:
    path = tmp_path / "team.lock.json"
    write_lock(lock_of(*all_images()), path)
    app = cdk.App(context={"environments": CDK_JSON["context"]["environments"], "env": "staging",
                           LOCK_FILE_CONTEXT: str(path)})  # fmt: skip
    (stack,) = build_app(app)
    assert app.node.try_get_context(IMAGE_DIGESTS_CONTEXT) == {ref: fake_digest(ref) for ref in all_images()}
    releases = helm_values(stack)
    assert releases["kuberay-operator"]["image"] == {"tag": f"v1.7.0@{fake_digest('quay.io/kuberay/operator:v1.7.0')}"}
    assert stack.workload.ray.image == f"{RAY}@{fake_digest(RAY)}"


def helm_values(stack: cdk.Stack) -> dict[str, Any]:
    template = cdk.assertions.Template.from_stack(stack).to_json()
    return {
        r["Properties"]["Release"]: json.loads(readable(r["Properties"].get("Values", "{}")))
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }


@pytest.fixture(scope="module")
def locked_addons() -> dict[str, Any]:
    """Every add-on construct in one small stack, with every chart image locked through CDK context."""
    from llm_eks.constructs.gpu_devices import GpuDeviceSoftware, GpuDeviceSoftwareProps
    from llm_eks.constructs.interruption import InterruptionQueue, InterruptionQueueProps
    from llm_eks.constructs.karpenter import Karpenter, KarpenterProps
    from llm_eks.constructs.keda import Keda, KedaProps
    from llm_eks.constructs.kuberay import KubeRayOperator, KubeRayOperatorProps
    from llm_eks.constructs.load_balancer import AwsLoadBalancerController, AwsLoadBalancerControllerProps
    from llm_eks.constructs.observability import Observability, ObservabilityProps
    from llm_eks.constructs.secrets import SecretsStoreCsi, SecretsStoreCsiProps
    from tests.cdk_fixtures import minimal_cluster

    app = cdk.App(context={IMAGE_DIGESTS_CONTEXT: {ref: fake_digest(ref) for ref in all_images()}})
    stack = cdk.Stack(app, "Locked", env=cdk.Environment(account="123456789012", region="us-west-2"))
    cluster = minimal_cluster(stack, cluster_name="locked")
    queue = InterruptionQueue(stack, "Queue", InterruptionQueueProps(cluster_name="locked"))
    Karpenter(stack, "Karpenter", KarpenterProps(cluster=cluster, interruption_queue=queue, teardown=False))
    Keda(stack, "Keda", KedaProps(cluster=cluster))
    Observability(stack, "Observability", ObservabilityProps(cluster=cluster))
    KubeRayOperator(stack, "KubeRay", KubeRayOperatorProps(cluster=cluster))
    SecretsStoreCsi(stack, "Secrets", SecretsStoreCsiProps(cluster=cluster))
    AwsLoadBalancerController(stack, "Alb", AwsLoadBalancerControllerProps(cluster=cluster))
    GpuDeviceSoftware(stack, "Gpu", GpuDeviceSoftwareProps(cluster=cluster, ami_family="al2023"))
    return helm_values(stack)


def d(ref: str) -> str:
    return fake_digest(ref)


def hex_of(ref: str) -> str:
    return fake_digest(ref).removeprefix("sha256:")


def test_helm_values_carry_each_charts_digest(locked_addons: dict[str, Any]) -> None:
    v = locked_addons
    assert v["karpenter"]["controller"]["image"] == {"digest": d("public.ecr.aws/karpenter/controller:1.14.1")}
    assert v["karpenter-crd"] == {}
    keda = v["keda"]["image"]
    assert keda["keda"] == {"tag": f"2.20.2@{d('ghcr.io/kedacore/keda:2.20.2')}"}
    assert keda["metricsApiServer"] == {"tag": f"2.20.2@{d('ghcr.io/kedacore/keda-metrics-apiserver:2.20.2')}"}
    assert keda["webhooks"] == {"tag": f"2.20.2@{d('ghcr.io/kedacore/keda-admission-webhooks:2.20.2')}"}
    kps = v["kube-prometheus-stack"]
    operator = kps["prometheusOperator"]
    assert operator["image"] == {"sha": hex_of("quay.io/prometheus-operator/prometheus-operator:v0.93.0")}
    assert operator["prometheusConfigReloader"]["image"] == {
        "sha": hex_of("quay.io/prometheus-operator/prometheus-config-reloader:v0.93.0")
    }
    certgen = "ghcr.io/jkroepke/kube-webhook-certgen:1.8.5"
    assert operator["admissionWebhooks"]["patch"]["image"] == {"sha": hex_of(certgen)}
    prometheus, alertmanager = (
        "quay.io/prometheus/prometheus:v3.13.2-distroless",
        "quay.io/prometheus/alertmanager:v0.33.1",
    )
    assert kps["prometheus"]["prometheusSpec"]["image"] == {"sha": hex_of(prometheus)}
    assert kps["alertmanager"]["alertmanagerSpec"]["image"] == {"sha": hex_of(alertmanager)}
    assert kps["grafana"]["image"] == {"sha": hex_of("docker.io/grafana/grafana:13.1.3")}
    assert kps["grafana"]["sidecar"]["image"] == {"sha": hex_of("quay.io/kiwigrid/k8s-sidecar:2.10.1")}
    ksm, node_exporter = (
        "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.19.1",
        "quay.io/prometheus/node-exporter:v1.12.1-distroless",
    )
    assert kps["kube-state-metrics"]["image"] == {"sha": d(ksm)}  # this chart's `sha` takes the sha256: prefix
    assert kps["prometheus-node-exporter"]["image"] == {"digest": d(node_exporter)}
    assert v["prometheus-operator-crds"] == {}
    driver = v["secrets-store-csi-driver"]["linux"]
    assert driver["image"] == {"digest": d("registry.k8s.io/csi-secrets-store/driver:v1.6.0")}
    assert driver["crds"] == {"image": {"tag": f"v1.6.0@{d('registry.k8s.io/csi-secrets-store/driver-crds:v1.6.0')}"}}
    assert driver["registrarImage"] == {"digest": d("registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.16.0")}
    assert driver["livenessProbeImage"] == {"digest": d("registry.k8s.io/sig-storage/livenessprobe:v2.18.0")}
    provider = "public.ecr.aws/aws-secrets-manager/secrets-store-csi-driver-provider-aws:3.1.1"
    assert v["secrets-store-csi-driver-provider-aws"]["image"] == {"tag": f"3.1.1@{d(provider)}"}
    alb = "public.ecr.aws/eks/aws-load-balancer-controller:v3.5.0"
    assert v["aws-load-balancer-controller"]["image"] == {"tag": f"v3.5.0@{d(alb)}"}
    dcgm = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"
    assert v["dcgm-exporter"]["image"] == {"tag": f"4.5.3-4.8.2-distroless@{d(dcgm)}"}
    plugin = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert v["nvidia-device-plugin"]["image"] == {"tag": f"v0.20.0@{d(plugin)}"}


def test_digests_merge_into_the_charts_own_values(locked_addons: dict[str, Any]) -> None:
    """Helm merges maps: the digest must sit beside our other values, not replace them."""
    kps = locked_addons["kube-prometheus-stack"]
    assert kps["grafana"]["sidecar"]["dashboards"]["label"] == "grafana_dashboard"
    assert kps["prometheus"]["prometheusSpec"]["retention"] == "15d"
    assert locked_addons["karpenter"]["controller"]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert locked_addons["secrets-store-csi-driver"]["linux"]["tolerations"] == [{"operator": "Exists"}]


def test_bad_digest_in_context_is_one_line() -> None:
    from llm_eks.images.lock import check_digests

    with pytest.raises(ConfigError) as info:
        check_digests({VLLM: "latest"}, IMAGE_DIGESTS_CONTEXT)
    assert str(info.value) == (
        f"llm-eks:image-digests['{VLLM}']: 'latest' is not allowed; must be 'sha256:' followed by 64 lowercase hex "
        "digits [LLMEKS-E700]"
    )


# -- coverage ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_inventory_matches_the_releases_the_stack_installs(env: str, templates: dict[str, Any]) -> None:
    """infra.images lists the same Helm charts (and versions) the synthesized stack installs."""
    installed = {
        r["Properties"]["Chart"]: r["Properties"]["Version"]
        for r in templates[env]["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }
    config = parse_environment(env, CDK_JSON["context"]["environments"][env])
    assert environment_charts(config, plan_workloads(config)) == installed
    # Every chart is either pinned through its values or listed with the reason it is not.
    assert set(installed) <= set(CHART_IMAGES) | set(NOT_COVERED)


def test_api_key_alone_brings_the_secrets_store_charts() -> None:
    """A public model (no Hub token) still mounts vLLM's API key through the Secrets Store CSI driver."""
    body = {"workload": {"model": "Qwen/Qwen2.5-7B-Instruct", "max_model_len": 8192}}
    charts = environment_charts(config := parse_environment("qa", body), [plan_environment(config)])
    assert {"secrets-store-csi-driver", "secrets-store-csi-driver-provider-aws"} <= set(charts)
    body["workload"]["api_key"] = False
    charts = environment_charts(config := parse_environment("qa", body), [plan_environment(config)])
    assert "secrets-store-csi-driver" not in charts
