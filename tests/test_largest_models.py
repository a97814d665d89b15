"""The largest models, synthesized whole: DeepSeek-V3 (fp8 block weights) on 2 x p5.48xlarge, TP 8 x PP 2, in a
two-node Capacity Block. The stack passes cdk-nag, llm-eks's checks, cfn-lint and checkov; every object validates
against the upstream schemas; the stack creates the placement group, installs the EFA device plugin and the EKS node
monitoring agent, and turns on Karpenter's node repair (every environment gets the last two)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_eks.infra.app import add_checks, build_app, new_app, write_review
from tests.checkov_run import CHECKOV, run_checkov
from tests.conftest import ENVIRONMENTS
from tests.crd_cel import EC2_NODE_CLASS, failed_rules
from tests.kube_schema import assert_valid
from tests.test_reserved_capacity import LARGEST

ENV = "largest"
# Two replicas of two nodes in a block of two: synth shows the reservation warning, acknowledged here.
BODY = {
    **LARGEST,
    "alpha_features": {"node-repair": "A GPU with a fatal error heals only when its node is replaced."},
    "workload": {
        **LARGEST["workload"],
        "replicas": {"min": 1, "max": 2},
        "acknowledged_warnings": {"llm-eks:plan-reservation": "the second replica waits for a second block"},
    },
}


class Synth:
    def __init__(self, outdir: Path) -> None:
        self.outdir = outdir
        self.template: dict[str, Any] = json.loads((outdir / f"LlmEks-{ENV}.template.json").read_text())
        folder = outdir / "manifests" / ENV
        self.files = {
            p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(folder.glob("*.yaml"))
        }
        self.objects = [o for name, objs in self.files.items() if name != "helm-releases.yaml" for o in objs]

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == kind}

    def release(self, name: str) -> dict[str, Any]:
        (found,) = [
            r["Properties"]
            for r in self.resources("Custom::AWSCDK-EKS-HelmChart").values()
            if r["Properties"]["Release"] == name
        ]
        return found

    def named(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        return found


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The environment's app, synthesized with cdk-nag and llm-eks's checks (synth fails on any finding)."""
    outdir = tmp_path_factory.mktemp("largest")
    app = new_app(context={"environments": {ENV: BODY}}, outdir=str(outdir))
    stacks = build_app(app)
    add_checks(app)
    write_review(app, stacks, app.synth())
    return Synth(outdir)


def test_the_stack_passes_cdk_nag_and_llm_eks_checks(synth: Synth) -> None:
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    assert report["pluginReports"], "no validation plugin ran"
    assert all(not plugin["violations"] for plugin in report["pluginReports"]), report
    # The reservation warning was raised and acknowledged where the workload is applied.
    metadata = (synth.outdir / f"LlmEks-{ENV}.metadata.json").read_text()
    assert "llm-eks:plan-reservation" in metadata


def test_cfn_lint_passes(synth: Synth) -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    path = synth.outdir / f"LlmEks-{ENV}.template.json"
    result = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", str(path)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_object_validates_against_the_upstream_schemas(synth: Synth) -> None:
    assert_valid(synth.objects)
    for node_class in (o for o in synth.objects if o["kind"] == "EC2NodeClass"):
        for field in ("networkInterfaces", "placementGroupSelector", "capacityReservationSelectorTerms"):
            if field in node_class["spec"]:
                assert failed_rules(EC2_NODE_CLASS, field, node_class["spec"][field]) == [], field


def test_checkov_reports_no_failed_check(synth: Synth, tmp_path: Path) -> None:
    if not CHECKOV.exists():
        pytest.skip(f"{CHECKOV} is missing: `make test` installs it from requirements-checkov.txt")
    shutil.copy(synth.outdir / f"LlmEks-{ENV}.template.json", tmp_path)
    for path in sorted((synth.outdir / "manifests" / ENV).glob("*.yaml")):
        if path.name != "helm-releases.yaml":
            shutil.copy(path, tmp_path / path.name)
    results = run_checkov(tmp_path, "cloudformation", "kubernetes")
    assert results is not None
    failed = [f"{f['check_id']} {f['resource']}" for r in results for f in r["results"]["failed_checks"]]
    assert not failed, failed


def test_the_efa_node_class_selects_the_stacks_cluster_placement_group(synth: Synth) -> None:
    (group_id, group), *more = synth.resources("AWS::EC2::PlacementGroup").items()
    assert not more
    assert group["Properties"]["Strategy"] == "cluster"
    spec = synth.named("EC2NodeClass", "gpu-nvidia-p5-efa32")["spec"]
    assert spec["placementGroupSelector"] == {"id": f"${{GetAtt:{group_id}.GroupId}}"}
    assert spec["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert len(spec["networkInterfaces"]) == 33
    # A group with instances in it cannot be deleted: it goes only after Karpenter's teardown has run.
    (teardown,) = synth.resources("Custom::KarpenterTeardown").values()
    assert group_id in teardown["DependsOn"]


def test_nodes_use_only_the_eks_cluster_security_group_and_nothing_narrows_it(synth: Synth) -> None:
    """EFA needs all traffic to and from the nodes' own security group. EKS's cluster security group has exactly
    that ("Inbound All All Self", "Outbound All All Self (for EFA traffic)", EKS user guide sec-group-reqs) and EKS
    puts those rules back on every cluster update; the stack only adds ingress to it and never an egress rule."""
    for node_class in (o for o in synth.objects if o["kind"] == "EC2NodeClass"):
        assert node_class["spec"]["securityGroupSelectorTerms"] == [
            {"id": "${GetAtt:PlatformCluster6842C9C4.ClusterSecurityGroupId}"}
        ]
    text = json.dumps(synth.template)
    assert "AWS::EC2::SecurityGroupEgress" not in {r["Type"] for r in synth.template["Resources"].values()}
    for ingress in synth.resources("AWS::EC2::SecurityGroupIngress").values():
        assert "IpProtocol" in ingress["Properties"]  # additions only (a security group is an allow list)
    assert '"ClusterSecurityGroupId"' in text


def test_the_efa_device_plugin_runs_on_efa_nodes_only(synth: Synth) -> None:
    release = synth.release("aws-efa-k8s-device-plugin")
    assert (release["Chart"], release["Repository"], release["Version"], release["Namespace"]) == (
        "aws-efa-k8s-device-plugin",
        "https://aws.github.io/eks-charts",
        "v0.5.30",
        "nvidia-gpu",
    )
    values = json.loads(release["Values"])
    assert values["nodeSelector"] == {"llm-eks.io/efa": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    # The chart's own supportedInstanceLabels (p5.48xlarge among them) stay as published.
    assert "supportedInstanceLabels" not in values
    pool = synth.named("NodePool", "gpu-p5-efa32")
    assert pool["spec"]["template"]["metadata"]["labels"]["llm-eks.io/efa"] == "true"


def _feature_gates(template: dict[str, Any]) -> dict[str, Any]:
    (values,) = [
        r["Properties"]["Values"]
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Release"] == "karpenter"
    ]
    text = "".join(part for part in values["Fn::Join"][1] if isinstance(part, str))
    start = text.index('"featureGates":')
    return dict(json.loads(text[start + len('"featureGates":') : text.index("}", start) + 1]))


def _monitoring_addon(template: dict[str, Any]) -> dict[str, Any]:
    (addon,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "eks-node-monitoring-agent"
    ]
    return addon


def test_node_repair_only_where_the_environment_accepts_the_alpha_gate(
    synth: Synth, templates: dict[str, dict[str, Any]]
) -> None:
    """Node repair (Alpha) where `alpha_features` names it: the shipped prod and this environment; reserved
    capacity (Beta, on in the chart) written explicitly everywhere."""
    for name, template in {ENV: synth.template, **templates}.items():
        assert _feature_gates(template) == {"nodeRepair": name in (ENV, "prod"), "reservedCapacity": True}, name
    # Synth says what was accepted, and why.
    metadata = (synth.outdir / f"LlmEks-{ENV}.metadata.json").read_text()
    assert "alpha feature node-repair (Karpenter's node repair (feature gate nodeRepair)" in metadata
    assert "A GPU with a fatal error heals only when its node is replaced." in metadata
    for template in (synth.template, *templates.values()):
        addon = _monitoring_addon(template)
        # No version: EKS picks its default for the cluster's Kubernetes version (as for coredns); no IAM.
        assert "AddonVersion" not in addon["Properties"]
        assert "PodIdentityAssociations" not in addon["Properties"]
        assert "ServiceAccountRoleArn" not in addon["Properties"]
        # Its DCGM host engine must reach the tainted GPU nodes, or GPU health is never checked.
        assert json.loads(addon["Properties"]["ConfigurationValues"]) == {
            "dcgmAgent": {"tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]}
        }
    assert len(templates) == len(ENVIRONMENTS)
