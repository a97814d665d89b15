"""The EKS node monitoring agent's ServiceAccount may patch the status of its own node only (the add-on's ClusterRole
grants every node's): the admission policy, evaluated as the API server would, and its place in every stack."""

from __future__ import annotations

from typing import Any

import pytest

from llm_eks.infra.review import applied_objects
from llm_eks.manifests.node_status_guard import NODE_NAME_EXTRA, POLICY, node_status_guard
from tests.admission import denials, matches
from tests.conftest import ENVIRONMENTS, Synthesized
from tests.kube_schema import assert_valid

AGENT = "system:serviceaccount:kube-system:eks-node-monitoring-agent"
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-0-1-17.ec2.internal"}}
MESSAGE = "the eks-node-monitoring-agent ServiceAccount may update the status of the node its pod runs on only"


def _request(username: str, node: str | None) -> dict[str, Any]:
    extra = {NODE_NAME_EXTRA: [node]} if node is not None else {}
    return {"userInfo": {"username": username, "extra": extra}, "subResource": "status"}


@pytest.fixture(scope="module")
def policy() -> dict[str, Any]:
    objects = node_status_guard()
    assert_valid(objects)
    (binding,) = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert binding["spec"] == {"policyName": POLICY, "validationActions": ["Deny"]}
    (found,) = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    assert found["spec"]["failurePolicy"] == "Fail"
    assert found["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["nodes/status"], "operations": ["UPDATE"]}
    ]
    return found


def test_the_agent_sets_its_own_nodes_conditions(policy: dict[str, Any]) -> None:
    request = _request(AGENT, NODE["metadata"]["name"])
    assert matches(policy, NODE, kind="Node", request=request)
    assert denials(policy, NODE, kind="Node", request=request) == []


@pytest.mark.parametrize("node", ["ip-10-0-2-99.ec2.internal", None], ids=["another node", "a token bound to no node"])
def test_the_agent_cannot_touch_another_nodes_status(policy: dict[str, Any], node: str | None) -> None:
    request = _request(AGENT, node)
    assert matches(policy, NODE, kind="Node", request=request)
    assert denials(policy, NODE, kind="Node", request=request) == [MESSAGE]


@pytest.mark.parametrize(
    "username",
    ["system:node:ip-10-0-2-99.ec2.internal", "system:serviceaccount:kube-system:node-controller"],
    ids=["the kubelet (NodeRestriction's)", "the node lifecycle controller"],
)
def test_nobody_else_is_judged_by_it(policy: dict[str, Any], username: str) -> None:
    assert not matches(policy, NODE, kind="Node", request=_request(username, None))


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_environment_applies_it(synthesized: Synthesized, env: str) -> None:
    applied = {(o["kind"], o["metadata"]["name"]) for _, o in applied_objects(synthesized.template(env))}
    assert {("ValidatingAdmissionPolicy", POLICY), ("ValidatingAdmissionPolicyBinding", POLICY)} <= applied
