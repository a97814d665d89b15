"""examples/extend_vllm_chart: a plain cdk8s app that adds a sidecar and a volume to the vLLM chart through
cdk8s-plus. It synthesizes and passes the synth-time checks; a bad extension fails them with the one-line finding
`cdk synth` reports for the same objects (LlmEksChecks), before any YAML is written."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import cdk8s
import cdk8s_plus_35 as kplus
import pytest
import yaml

from llm_eks.infra.checks import MANIFEST_TYPE, LlmEksChecks
from llm_eks.manifests.app_checks import ChecksFailed, chart_objects, check_app
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "extend_vllm_chart"
NAME = "vllm-qwen3-8b"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extend_vllm_chart", EXAMPLE / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == NAME]
    return found


def _cdk_synth_lines(objects: list[dict[str, Any]]) -> list[str]:
    """What `cdk synth` reports for these objects applied by one stack: LlmEksChecks on a template holding them
    as one manifest, each violation as its one line."""
    template = {"Resources": {"Manifest": {"Type": MANIFEST_TYPE, "Properties": {"Manifest": json.dumps(objects)}}}}
    violations = LlmEksChecks().check_template(template, "LlmEks-team-a.template.json")
    return [f"[{v.rule_name}] {v.description}. Fix: {v.fix}" for v in violations]


def test_the_example_synthesizes_with_the_sidecar_and_passes_the_checks(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "app.py"), str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    objects = [o for o in yaml.safe_load_all((tmp_path / "vllm.k8s.yaml").read_text()) if o]
    spec = _deployment(objects)["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["vllm", "log-shipper"]
    assert spec["containers"][1]["volumeMounts"] == [{"mountPath": "/spool", "name": "log-spool"}]
    assert {"name": "log-spool", "emptyDir": {"sizeLimit": "1024Mi"}} in spec["volumes"]


def test_the_extension_leaves_the_charts_own_objects_as_they_were() -> None:
    example = _example()
    plain_app, extended_app = cdk8s.App(), cdk8s.App()
    plain = example.platform(plain_app).to_json()
    example.add_log_shipper(example.platform(extended_app))
    extended = chart_objects(extended_app.charts)
    check_app(extended_app)
    before, after = _deployment(plain), _deployment(extended)
    assert after["spec"]["selector"] == before["spec"]["selector"]
    assert after["spec"]["template"]["metadata"] == before["spec"]["template"]["metadata"]
    spec = dict(after["spec"]["template"]["spec"])
    assert spec.pop("containers")[0] == before["spec"]["template"]["spec"]["containers"][0]
    assert [v for v in spec.pop("volumes") if v["name"] != "log-spool"] == before["spec"]["template"]["spec"]["volumes"]
    assert spec == {k: v for k, v in before["spec"]["template"]["spec"].items() if k not in ("containers", "volumes")}
    # Every other object of the environment is unchanged.
    assert [o for o in extended if o is not after] == [o for o in chart_objects(plain_app.charts) if o != before]


def test_a_sidecar_that_does_not_fit_the_gpu_node_fails_with_cdk_synths_one_line() -> None:
    example = _example()
    app = cdk8s.App()
    example.add_log_shipper(example.platform(app), memory_mib=200_000)
    with pytest.raises(ChecksFailed) as err:
        check_app(app)
    line = (
        f"[SCHEDULING] Deployment/inference/{NAME}: no NodePool can run this pod (gpu-g6e: needs 221.9Gi memory but "
        "the largest allowed type, g6e.2xlarge, has allocatable 58.2Gi); Karpenter would leave it Pending. Fix: lower "
        "the pod's memory request to at most 58.2Gi memory or allow a larger instance type in NodePool gpu-g6e"
    )
    assert err.value.message == line and err.value.code.id == "LLMEKS-E412"
    # The same line `cdk synth` reports when a CDK stack applies these objects.
    assert _cdk_synth_lines(chart_objects(app.charts)) == [line]


def test_the_unextended_environment_passes_both_ways() -> None:
    app = cdk8s.App()
    _example().platform(app)
    check_app(app)
    assert _cdk_synth_lines(chart_objects(app.charts)) == []


def _restricted_sidecar(**security: Any) -> Any:
    """A sidecar that meets the namespace's restricted level, with `security` overriding its security context."""
    props = {
        "ensure_non_root": True,
        "user": 1000,
        "allow_privilege_escalation": False,
        "capabilities": kplus.ContainerSecutiryContextCapabilities(drop=[kplus.Capability.ALL]),
        **security,
    }
    return kplus.ContainerSecurityContextProps(**props)


def _add_sidecar(chart: Any, security: Any) -> None:
    chart.deployment.add_container(
        name="log-shipper",
        image="public.ecr.aws/aws-observability/aws-for-fluent-bit:3.2.1",
        resources=kplus.ContainerResources(
            cpu=kplus.CpuResources(request=kplus.Cpu.millis(100)),
            memory=kplus.MemoryResources(request=cdk8s.Size.mebibytes(128), limit=cdk8s.Size.mebibytes(128)),
        ),
        security_context=security,
    )


def _failed(app: cdk8s.App) -> ChecksFailed:
    with pytest.raises(ChecksFailed) as err:
        check_app(app)
    # The same lines `cdk synth` reports when a CDK stack applies these objects.
    assert _cdk_synth_lines(chart_objects(app.charts)) == err.value.message.split("\n")
    return err.value


RESTRICTED = (
    "which Pod Security restricted (enforced on namespace inference) forbids; the API server would reject its pods"
)


def _tokenizer(chart: Any, security: Any = None) -> kplus.Deployment:
    """A workload of the user's own beside vLLM, in its namespace."""
    return kplus.Deployment(
        chart,
        "tokenizer",
        metadata=cdk8s.ApiObjectMetadata(namespace="inference"),
        containers=[
            kplus.ContainerProps(
                name="tokenizer",
                image="tokenizer:1",
                resources=kplus.ContainerResources(
                    cpu=kplus.CpuResources(request=kplus.Cpu.millis(100)),
                    memory=kplus.MemoryResources(request=cdk8s.Size.mebibytes(64)),
                ),
                security_context=security,
            )
        ],
    )


def test_a_privileged_sidecar_fails_pod_security_with_cdk_synths_one_line() -> None:
    example = _example()
    app = cdk8s.App()
    _add_sidecar(example.platform(app), _restricted_sidecar(privileged=True))
    err = _failed(app)
    assert err.message == (
        f"[POD_SECURITY] Deployment/inference/{NAME}: container log-shipper sets securityContext.privileged=true, "
        f"{RESTRICTED}. Fix: remove securityContext.privileged, or, if it needs the host, run it in a namespace whose "
        "pod-security.kubernetes.io/enforce label is privileged"
    )
    assert err.code.id == "LLMEKS-E413"


def test_a_root_sidecar_and_a_workload_without_seccomp_fail_with_one_line_each() -> None:
    example = _example()
    app = cdk8s.App()
    chart = example.platform(app)
    _add_sidecar(chart, _restricted_sidecar(ensure_non_root=False, user=0))
    # A workload of the user's own beside vLLM: cdk8s-plus has no seccomp setting, and its default container
    # security context keeps every capability.
    _tokenizer(chart)
    err = _failed(app)
    assert err.message.split("\n") == [
        f"[POD_SECURITY] Deployment/inference/{NAME}: container log-shipper sets securityContext.runAsNonRoot=false, "
        f"{RESTRICTED}. Fix: set the pod's securityContext.runAsNonRoot: true, with runAsUser a non-zero user the "
        "image can run as",
        f"[POD_SECURITY] Deployment/inference/{NAME}: container log-shipper sets securityContext.runAsUser=0, "
        f"{RESTRICTED}. Fix: run as a non-zero user (securityContext.runAsUser, e.g. the image's own non-root user)",
        "[POD_SECURITY] Deployment/inference/vllm-tokenizer: container tokenizer does not drop ALL capabilities, "
        f'{RESTRICTED}. Fix: set securityContext.capabilities.drop: ["ALL"] and add nothing but NET_BIND_SERVICE',
        "[POD_SECURITY] Deployment/inference/vllm-tokenizer: neither the pod nor container tokenizer sets "
        f"seccompProfile.type RuntimeDefault or Localhost, {RESTRICTED}. Fix: set the pod's "
        "securityContext.seccompProfile.type to RuntimeDefault (or Localhost with a profile)",
    ]
    assert err.code.id == "LLMEKS-E413"


def test_the_fixes_the_how_to_gives_pass() -> None:
    example = _example()
    app = cdk8s.App()
    chart = example.platform(app)
    _add_sidecar(chart, _restricted_sidecar())
    tokenizer = _tokenizer(chart, _restricted_sidecar())
    seccomp = {"type": "RuntimeDefault"}
    cdk8s.ApiObject.of(tokenizer).add_json_patch(
        cdk8s.JsonPatch.add("/spec/template/spec/securityContext/seccompProfile", seccomp)
    )
    check_app(app)
