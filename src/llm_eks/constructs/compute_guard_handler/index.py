"""Refuses a change of compute mode on a deployed cluster, before CloudFormation touches the cluster.

A Lambda-backed custom resource (`ComputeModeGuard`) that the EKS cluster resource depends on, so on every deploy that
changes its properties it runs first. Create and Update read the cluster named in ResourceProperties.ClusterName
(eks:DescribeCluster): a cluster that does not exist yet is a new environment and passes; one whose Auto Mode compute
(`computeConfig.enabled`) differs from ResourceProperties.ComputeMode fails the deploy with a one-line reason, and
CloudFormation rolls back what it changed before it. Delete does nothing.

It answers CloudFormation itself (an HTTPS PUT of the response to the pre-signed ResponseURL), so it needs no
framework Lambda; any error is reported as FAILED with its message, never left to time out.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

KARPENTER = "karpenter"
AUTO_MODE = "auto-mode"
# CloudFormation shows a response's Reason up to 4 KB; ours is one line.
_REASON_LIMIT = 4000


class ComputeModeChange(RuntimeError):
    """The deployed cluster runs the other compute mode."""


def deployed_mode(cluster: dict[str, Any]) -> str:
    """The compute mode of a cluster as eks:DescribeCluster returns it."""
    return AUTO_MODE if (cluster.get("computeConfig") or {}).get("enabled") else KARPENTER


def check(cluster_name: str, wanted: str, describe: Callable[[str], dict[str, Any] | None]) -> str:
    """What the deployed cluster runs, or raise ComputeModeChange when it is not `wanted`. `describe` returns None
    for a cluster that does not exist (yet)."""
    cluster = describe(cluster_name)
    if cluster is None:
        return f"cluster {cluster_name} does not exist yet: compute {wanted} from the start"
    deployed = deployed_mode(cluster)
    if deployed != wanted:
        raise ComputeModeChange(
            f"compute: {deployed} -> {wanted} on the deployed cluster {cluster_name} is refused: nodes, NodePools, "
            "load balancers and volumes would all move in one deployment, and the NodePools' node class cannot "
            f"change in place; deploy a new environment with compute {wanted}, move traffic to it, then destroy "
            "this one (docs: how-to, Self-managed Karpenter or Auto Mode)"
        )
    return f"cluster {cluster_name} runs compute {deployed}, as this deploy wants"


def _describe(cluster_name: str) -> dict[str, Any] | None:
    client = boto3.client("eks")
    try:
        cluster: dict[str, Any] = client.describe_cluster(name=cluster_name)["cluster"]
    except client.exceptions.ResourceNotFoundException:
        return None
    return cluster


def handle(
    event: dict[str, Any],
    describe: Callable[[str], dict[str, Any] | None],
    respond: Callable[[str, dict[str, Any]], None],
) -> dict[str, Any]:
    """Answer one CloudFormation event through `respond(url, body)`; returns the body sent."""
    props = event.get("ResourceProperties", {})
    cluster_name = str(props.get("ClusterName", ""))
    body: dict[str, Any] = {
        "Status": "SUCCESS",
        "Reason": "",
        "PhysicalResourceId": event.get("PhysicalResourceId") or f"compute-mode-guard-{cluster_name}",
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
    }
    try:
        if event["RequestType"] in ("Create", "Update"):
            body["Reason"] = check(cluster_name, str(props.get("ComputeMode", "")), describe)
    except Exception as err:  # reported to CloudFormation as FAILED: a raised error would leave it waiting
        LOG.exception("compute mode guard failed")
        body["Status"], body["Reason"] = "FAILED", str(err)[:_REASON_LIMIT]
    respond(event["ResponseURL"], body)
    return body


def _put(url: str, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    # The pre-signed S3 URL is signed for an empty Content-Type.
    request = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30) as response:
        LOG.info("CloudFormation answered %s", response.status)


def on_event(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point."""
    LOG.info("%s for %s", event.get("RequestType"), event.get("LogicalResourceId"))
    return handle(event, _describe, _put)
