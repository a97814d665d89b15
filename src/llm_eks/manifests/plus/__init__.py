"""cdk8s-plus objects (cdk8s-plus-35 2.0.5) for the charts' standard kinds that synthesize exactly the object dict a
chart has built and the golden files pin, so a user extends them with cdk8s-plus's own API (`add_container`,
`add_volume`, `containers[0].env.add_variable`, ...) while a deployed workload's selector and pod template stay
byte-identical (a changed selector is refused by the API server; a changed pod template restarts every GPU pod).

How: the object is built through cdk8s-plus from what it models the way we write it (metadata; a workload's replicas,
strategy, selector, pod labels, service account, grace period; each container's name, image, pull policy, command,
args, ports, env and volume mounts; emptyDir and CSI volumes; a Service's type and ports; a ServiceAccount's token
mount), rendered once, and compared with the dict. Where cdk8s-plus renders something else, JSON patches at the exact
paths set our value (`reconcile`):
- its defaults that we leave to the API server: a pod's `dnsPolicy`, `restartPolicy`, `hostNetwork`,
  `shareProcessNamespace`, `setHostnameAsFqdn`; a Deployment's `minReadySeconds` and `revisionHistoryLimit`;
- its own label `cdk8s.io/metadata.addr` on the pod template, which it adds even with `select=False` (cdk8s-plus-35
  2.0.5 lib/workload.js, `podMetadata`): removed, so the template is the one deployed clusters run;
- security contexts: cdk8s-plus always renders runAsNonRoot, privileged and readOnlyRootFilesystem (lib/container.js
  ContainerSecurityContext, lib/pod.js PodSecurityContext with fsGroupChangePolicy Always);
- what it has no API for: extended resources (nvidia.com/gpu, vpc.amazonaws.com/efa) and exact quantities (it renders
  memory in Mi and storage in Gi, lib/container.js Container._toKube), probes on a named port, a preStop `sleep`,
  affinity and topology spread as we write them, nodeSelector, tolerations, schedulerName, projected volumes, a
  Service's named targetPort (lib/service.js: a number only).
Patches name list items by index; our containers, init containers and the volumes our containers mount come first in
cdk8s-plus's rendering (lib/pod.js AbstractPod._toPodSpec: containers' mounts, then init containers', then the pod's
volumes), and what a user adds later is appended after them, so the patches keep to our items. A volume cdk8s-plus
cannot express is appended by a patch (`volumes/-`).

Modules: `reconcile` (the patches, and PlusChart, which synthesizes its objects in the reviewed dicts' key order and
holds its NetworkPolicies by name), `builders` (one dict in, one cdk8s-plus object out: ServiceAccount, ConfigMap,
Service, Job, Deployment, DaemonSet, Namespace), `network` (NetworkPolicy: each rule from its first peer, the others
patched into it), `rbac` (Role, each rule from its first group and resource; RoleBinding, by name to its subjects).

Cost: one jsii round trip per call. A container is one ContainerProps (its fields in one call, each env value one
more), the rendering one `to_json`, the patches one `add_json_patch` call plus one per operation. The vLLM chart
makes about 150 round trips (about 45 ms) more than as plain objects, and loading the cdk8s-plus assembly costs about
0.13 s once per process.

Selecting pods: the pod templates carry our labels (`app.kubernetes.io/name`, `app.kubernetes.io/instance`), not
cdk8s-plus's address label, so cdk8s-plus selectors built from a workload object (`expose_via_service`,
`connections.allow_from(deployment)`) would select nothing: select by the chart's labels
(`kplus.Pods.select(scope, id, labels=chart.selector)`).
"""

from llm_eks.manifests.plus.builders import (
    BUILDERS,
    PodParts,
    config_map,
    daemon_set,
    deployment,
    job,
    namespace,
    service,
    service_account,
)
from llm_eks.manifests.plus.network import network_policy
from llm_eks.manifests.plus.rbac import role, role_binding
from llm_eks.manifests.plus.reconcile import PROPS_KEYS, PlusChart, in_order, reconcile

__all__ = [
    "BUILDERS",
    "PROPS_KEYS",
    "PlusChart",
    "PodParts",
    "config_map",
    "daemon_set",
    "deployment",
    "in_order",
    "job",
    "namespace",
    "network_policy",
    "reconcile",
    "role",
    "role_binding",
    "service",
    "service_account",
]
