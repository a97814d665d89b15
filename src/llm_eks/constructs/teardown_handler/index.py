"""Safety net on stack delete: remove what Karpenter created for one cluster and CloudFormation does not know about.

Runs as the on_event handler of a CDK Provider-framework custom resource (`KarpenterTeardown`). Create and Update
do nothing. Delete, for the cluster in ResourceProperties.ClusterName and the region in .Region:

1. terminates the EC2 instances Karpenter launched for the cluster and waits until they are terminated
   (a running instance holds ENIs in the VPC's subnets and security groups, so the VPC delete would fail);
2. deletes the launch templates Karpenter created for the cluster;
3. removes the node role from, then deletes, the instance profiles Karpenter created for the cluster (the role
   itself cannot be deleted while a profile holds it).

Resources are selected by the tags Karpenter v1 puts on them, and never by name alone:
instances and launch templates carry `kubernetes.io/cluster/<name>=owned`, `eks:eks-cluster-name=<name>` and
`karpenter.sh/nodepool` (launch templates also `karpenter.k8s.aws/ec2nodeclass`); instance profiles live under the
IAM path `/karpenter/<region>/<name>/<nodeclass-uid>/` and carry `kubernetes.io/cluster/<name>=owned`,
`eks:eks-cluster-name=<name>` and `karpenter.k8s.aws/ec2nodeclass`. Managed node group instances (the system nodes)
have no `karpenter.sh/nodepool` tag and are left to EKS.

Errors are raised: the Provider framework reports them to CloudFormation as FAILED with the message, so a stuck
teardown fails the stack delete instead of hanging it. Waiting stops at a deadline taken from the Lambda's
remaining time, so the handler always returns before the Lambda is killed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import boto3

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

# States in which an instance still holds its ENIs; "terminated" is the only state that releases everything.
LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
POLL_SECONDS = 10
# Left for deleting launch templates and instance profiles and for answering the framework after the wait.
RESERVE_SECONDS = 60
# TerminateInstances takes at most 1000 ids per call; smaller batches keep error messages readable.
TERMINATE_BATCH = 100

NODEPOOL_TAG = "karpenter.sh/nodepool"
NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
CLUSTER_NAME_TAG = "eks:eks-cluster-name"


class TeardownError(RuntimeError):
    """A step failed or did not finish in time; the message names the step, the cluster and the resources."""


def on_event(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Provider-framework entry point."""
    request = event["RequestType"]
    props = event.get("ResourceProperties", {})
    cluster_name = props["ClusterName"]
    physical_id = event.get("PhysicalResourceId") or f"karpenter-teardown-{cluster_name}"
    if request != "Delete":
        LOG.info("%s: nothing to do for cluster %s", request, cluster_name)
        return {"PhysicalResourceId": physical_id}
    region = props["Region"]
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS
    session = boto3.session.Session(region_name=region)
    summary = teardown(
        cluster_name,
        region,
        ec2=session.client("ec2"),
        iam=session.client("iam"),
        deadline=deadline,
    )
    LOG.info("teardown of cluster %s done: %s", cluster_name, summary)
    return {"PhysicalResourceId": physical_id, "Data": {k: str(len(v)) for k, v in summary.items()}}


def teardown(
    cluster_name: str,
    region: str,
    *,
    ec2: Any,
    iam: Any,
    deadline: float,
    sleep: Callable[[float], None] | None = None,
    now: Callable[[], float] | None = None,
) -> dict[str, list[str]]:
    """Instances first (they use the launch templates and instance profiles), then templates, then profiles."""
    instances = terminate_instances(cluster_name, ec2=ec2, deadline=deadline, sleep=sleep, now=now)
    templates = delete_launch_templates(cluster_name, ec2=ec2)
    profiles = delete_instance_profiles(cluster_name, region, iam=iam)
    return {"instances": instances, "launch_templates": templates, "instance_profiles": profiles}


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def _owned_by(tags: dict[str, str], cluster_name: str) -> bool:
    return tags.get(f"kubernetes.io/cluster/{cluster_name}") == "owned" and tags.get(CLUSTER_NAME_TAG) == cluster_name


def _live_karpenter_instances(cluster_name: str, ec2: Any) -> dict[str, str]:
    """Instance id -> state of this cluster's Karpenter instances that are not terminated yet."""
    filters = [
        {"Name": f"tag:kubernetes.io/cluster/{cluster_name}", "Values": ["owned"]},
        {"Name": f"tag:{CLUSTER_NAME_TAG}", "Values": [cluster_name]},
        {"Name": "tag-key", "Values": [NODEPOOL_TAG]},
        {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
    ]
    found = {}
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                tags = _tags(instance)
                # The API filters already select these; checking again keeps a filter typo from widening the scope.
                if _owned_by(tags, cluster_name) and NODEPOOL_TAG in tags:
                    found[instance["InstanceId"]] = instance["State"]["Name"]
    return found


def terminate_instances(
    cluster_name: str,
    *,
    ec2: Any,
    deadline: float,
    sleep: Callable[[float], None] | None = None,
    now: Callable[[], float] | None = None,
) -> list[str]:
    """Terminate this cluster's Karpenter instances and wait until none is left alive, or raise at the deadline.

    Each round looks again by tag, so an instance launched while we wait is terminated too. `sleep` and `now`
    default to time.sleep and time.monotonic (looked up at call time, so tests can replace them).
    """
    sleep = sleep or time.sleep
    now = now or time.monotonic
    terminated: list[str] = []
    while True:
        live = _live_karpenter_instances(cluster_name, ec2)
        if not live:
            return terminated
        to_terminate = [i for i, state in live.items() if state != "shutting-down" and i not in terminated]
        for start in range(0, len(to_terminate), TERMINATE_BATCH):
            batch = to_terminate[start : start + TERMINATE_BATCH]
            LOG.info("terminating Karpenter instances of %s: %s", cluster_name, batch)
            try:
                ec2.terminate_instances(InstanceIds=batch)
            except Exception as error:
                raise TeardownError(
                    f"terminating instances {batch} of cluster {cluster_name} failed: {error}"
                ) from error
            terminated.extend(batch)
        if now() + POLL_SECONDS >= deadline:
            raise TeardownError(
                f"instances {sorted(live)} of cluster {cluster_name} were still not terminated at the deadline; "
                "delete the stack again once they are gone"
            )
        sleep(POLL_SECONDS)


def delete_launch_templates(cluster_name: str, *, ec2: Any) -> list[str]:
    """Delete the launch templates Karpenter created for this cluster (names start with karpenter.k8s.aws/)."""
    filters = [
        {"Name": f"tag:kubernetes.io/cluster/{cluster_name}", "Values": ["owned"]},
        {"Name": f"tag:{CLUSTER_NAME_TAG}", "Values": [cluster_name]},
        {"Name": "tag-key", "Values": [NODECLASS_TAG]},
    ]
    deleted = []
    for page in ec2.get_paginator("describe_launch_templates").paginate(Filters=filters):
        for template in page["LaunchTemplates"]:
            if not _owned_by(_tags(template), cluster_name):
                continue
            template_id = template["LaunchTemplateId"]
            try:
                ec2.delete_launch_template(LaunchTemplateId=template_id)
            except Exception as error:
                raise TeardownError(
                    f"deleting launch template {template_id} ({template.get('LaunchTemplateName')}) of cluster "
                    f"{cluster_name} failed: {error}"
                ) from error
            deleted.append(template_id)
    LOG.info("deleted %d launch templates of %s: %s", len(deleted), cluster_name, deleted)
    return deleted


def delete_instance_profiles(cluster_name: str, region: str, *, iam: Any) -> list[str]:
    """Remove the role from, then delete, every instance profile Karpenter created for this cluster in this region."""
    path_prefix = f"/karpenter/{region}/{cluster_name}/"
    deleted = []
    for page in iam.get_paginator("list_instance_profiles").paginate(PathPrefix=path_prefix):
        for listed in page["InstanceProfiles"]:
            name = listed["InstanceProfileName"]
            if not listed["Path"].startswith(path_prefix):
                continue
            # ListInstanceProfiles returns no tags; GetInstanceProfile does.
            profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
            tags = _tags(profile)
            if not (_owned_by(tags, cluster_name) and NODECLASS_TAG in tags):
                LOG.info("skipping instance profile %s: not tagged as Karpenter's for %s", name, cluster_name)
                continue
            try:
                for role in profile.get("Roles", []):
                    iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role["RoleName"])
                iam.delete_instance_profile(InstanceProfileName=name)
            except Exception as error:
                raise TeardownError(
                    f"deleting instance profile {name} of cluster {cluster_name} failed: {error}"
                ) from error
            deleted.append(name)
    LOG.info("deleted %d instance profiles of %s: %s", len(deleted), cluster_name, deleted)
    return deleted
