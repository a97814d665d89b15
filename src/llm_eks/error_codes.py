"""The stable codes of the errors a user sees: one per kind of mistake, each with its meaning and fix.

A code (`LLMEKS-E122`) never changes meaning once released: a user searches for it, a script or test pins it, and the
errors reference page (docs/reference/errors.md, generated from this module) explains it. Codes are grouped in
hundreds by where the mistake is found (`AREAS`); several raise sites share a code when they report the same kind of
mistake. A retired code is not reused. tests/test_error_codes.py fails when a raise site in src/ carries no code or
one not listed here, and when a code listed here is raised nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorCode:
    number: int
    title: str
    meaning: str
    fix: str
    # The documentation page (relative to docs/) that explains the setting, or "" when the fix says it all.
    see: str = ""

    @property
    def id(self) -> str:
        return f"LLMEKS-E{self.number:03d}"

    def __str__(self) -> str:
        return self.id


AREAS = {
    1: "Configuration (cdk.json)",
    2: "Planner and model catalog",
    3: "Constructs (AWS side)",
    4: "Charts (Kubernetes side)",
    5: "Verification against a cluster",
    6: "Command line",
    7: "Images and the Hugging Face Hub",
}

# Configuration (cdk.json): found while the environment is read, before anything is synthesized.
E100 = ErrorCode(
    100,
    "Context file cannot be read",
    "cdk.json (or the file given with --context-file) does not exist, cannot be read, or is not JSON.",
    "Run from the project root or pass the file's path; the message names the line of a JSON syntax error.",
    "getting-started/configure.md",
)
E101 = ErrorCode(
    101,
    "JSON that would be read differently than written",
    "A key is given twice in one object (JSON keeps only the last) or a number is not finite (NaN, Infinity).",
    "Write each key once and give finite numbers.",
)
E102 = ErrorCode(
    102,
    "Environment missing or unknown",
    "The context has no `environments`, an environment name is malformed or is not an object, or `env` names an "
    "environment that is not defined.",
    "Define the environment under `environments` with a lowercase name, or select one of those defined "
    "(`-c env=NAME`).",
    "getting-started/environments.md",
)
E103 = ErrorCode(
    103,
    "Unknown setting",
    "An object holds a key llm-eks does not know; usually a typo, and the message suggests the closest known key.",
    "Use one of the keys the message lists.",
    "reference/configuration.md",
)
E104 = ErrorCode(
    104,
    "Required setting missing",
    "A setting without a default is not given.",
    "Add the setting the message names.",
    "reference/configuration.md",
)
E105 = ErrorCode(
    105,
    "Setting of the wrong type",
    "A value is not of the type its setting takes (an object, list, string, integer, number or boolean), or an "
    "integer is too large to be one.",
    "Give a value of the type the message names.",
    "reference/configuration.md",
)
E106 = ErrorCode(
    106,
    "Setting no longer exists",
    "A setting an earlier release read has been removed or replaced.",
    "Remove it, or move its value where the message says; the changelog lists every setting a release removed.",
    "reference/configuration.md",
)
E110 = ErrorCode(
    110,
    "AWS account or region not allowed",
    "The environment's account is not a 12-digit id, its region is not one llm-eks deploys to, or only one of the "
    "two is given.",
    "Give both (or neither, for an environment-agnostic stack), with a region from the list the message shows.",
    "getting-started/environments.md",
)
E111 = ErrorCode(
    111,
    "Deployment pipeline settings not allowed",
    "A `pipeline` setting (account, region, source connection, repository, branch, stages) is malformed or "
    "inconsistent.",
    "Correct the setting the message names.",
    "how-to/deploy.md",
)
E112 = ErrorCode(
    112,
    "VPC or subnet settings not allowed",
    "An existing VPC's id, CIDR, availability zones or subnets, a new VPC's CIDRs, or the load balancer subnets are "
    "malformed, missing, overlapping or inconsistent with one another.",
    "Give the VPC's real ids and CIDRs: an existing VPC needs its CIDR, zones and private subnets listed.",
    "reference/configuration.md",
)
E113 = ErrorCode(
    113,
    "Cluster endpoint access not allowed",
    "The Kubernetes API endpoint's access is neither private nor public, or its public CIDRs are missing, given "
    "for a private endpoint, or open too much of the internet.",
    "Use access 'private', or 'public' with the few CIDRs your operators connect from.",
    "concepts/security.md",
)
E114 = ErrorCode(
    114,
    "Compute mode or system nodes not allowed",
    "The compute mode is unknown, or the system node group (instance type, sizes) does not suit it: GPU types, too "
    "few nodes for the controllers, or settings Auto Mode does not take.",
    "Use a compute mode from the list and a CPU instance type with at least two system nodes.",
    "how-to/compute-modes.md",
)
E115 = ErrorCode(
    115,
    "Weights bucket settings not allowed",
    "An existing weights bucket's name or KMS key ARN is malformed, or a KMS key is given for the bucket llm-eks "
    "creates.",
    "Name an existing S3 bucket (and its KMS key ARN), or leave both out for the bucket llm-eks creates.",
    "how-to/cold-start.md",
)
E116 = ErrorCode(
    116,
    "Tag not allowed",
    "A tag key or value breaks AWS's tag rules, starts with 'aws:', or is a key Karpenter sets itself.",
    "Use tag keys of 1-128 and values of 0-256 allowed characters, and choose another key for those reserved.",
)
E117 = ErrorCode(
    117,
    "Unknown risk, feature or warning id, or no reason given",
    "An accepted risk, Alpha feature or acknowledged plan warning is not an id llm-eks knows, is given where "
    "nothing would refuse it, or lacks its one-line reason.",
    "Use an id from the list the message shows and say why in one line.",
    "concepts/checks.md",
)
E118 = ErrorCode(
    118,
    "Production needs pinned model revisions",
    "A production environment serves a model or LoRA adapter by a branch or tag, which can move under running "
    "replicas.",
    "Pin the revision to a 40-hex commit (`llm-eks models add` records it), or accept the risk the message names.",
    "how-to/upgrades.md",
)
E120 = ErrorCode(
    120,
    "Workload names not allowed",
    "A workload name is malformed, two workloads serve the same model or adapter name, or a call that takes one "
    "workload gets an environment with several.",
    "Give each workload a unique lowercase name and each served model a unique name.",
    "how-to/add-a-workload.md",
)
E121 = ErrorCode(
    121,
    "Setting not served by the workload's engine or accelerator",
    "The engine is unknown, or a setting is given that the chosen engine (vLLM or Ray Serve) or a Neuron "
    "accelerator does not support.",
    "Use engine vllm for that setting, or leave the setting out.",
    "concepts/workloads.md",
)
E122 = ErrorCode(
    122,
    "Capacity types or replicas not allowed",
    "The capacity types are empty, repeated or unknown, the replica bounds are inverted or below their minimum, "
    "or the on-demand floor cannot be kept with them.",
    "Give capacity types from the list, replicas.min <= replicas.max, and the floor's requirements.",
    "concepts/capacity.md",
)
E123 = ErrorCode(
    123,
    "Capacity reservation not allowed",
    "A capacity reservation's ids, tags, node count, family or price are malformed, or no workload runs on the "
    "family it reserves, or a pool using it lacks the 'reserved' capacity type.",
    "Name the reservations (cr-...) or select them by tags, for a family a workload's plan uses.",
    "concepts/capacity.md",
)
E124 = ErrorCode(
    124,
    "EFA not possible or not needed",
    "EFA is asked for an instance type without it or a replica that fits one node, or a replica spans nodes of a "
    "type without EFA, or more EFA interfaces are asked than the type has, or EFA is turned off where the plan "
    "moves prefill's KV cache to decode over it.",
    "Enable EFA only for replicas that span nodes of an EFA instance type (or that move KV caches between pools); "
    "otherwise choose such a type.",
    "how-to/serve-across-nodes.md",
)
E125 = ErrorCode(
    125,
    "Weights source or revision not allowed",
    "The weights source is unknown, its S3 URI or staging settings are missing or malformed, or the model "
    "revision is not a commit, branch or tag.",
    "Use weights 'hf', 's3' with an s3:// URI, or 'staged' with a weights bucket, and a valid revision.",
    "how-to/cold-start.md",
)
E126 = ErrorCode(
    126,
    "Benchmark settings not allowed",
    "The benchmark Job's request rate, prompt count, concurrency or token counts are out of range or inconsistent.",
    "Give the values within the bounds the message names.",
    "how-to/verify.md",
)
E127 = ErrorCode(
    127,
    "LoRA adapters not allowed",
    "An adapter name, repository or rank is malformed, the engine or weights source cannot serve adapters, or the "
    "model's attention layout takes none.",
    "Serve adapters with engine vllm and staged weights, on a model that supports LoRA.",
    "how-to/add-a-model.md",
)
E128 = ErrorCode(
    128,
    "API key settings not allowed",
    "An API key secret is given without api_key, for an engine that does not check keys, or is not a Secrets "
    "Manager secret name.",
    "Set api_key true with engine vllm and name the secret (not its ARN).",
    "concepts/security.md",
)
E129 = ErrorCode(
    129,
    "Latency target out of range",
    "A TTFT or ITL target is below what any GPU serves or above the ceiling llm-eks plans for.",
    "Give a target in milliseconds within the range the message names.",
    "concepts/planner.md",
)
E130 = ErrorCode(
    130,
    "Autoscaling or scale-to-zero not allowed",
    "Autoscaling bounds, the queue target, or the scale-to-zero schedule (timezone, cron, engine, replicas.min) "
    "are out of range or inconsistent.",
    "Correct the setting the message names; only the vLLM engine scales to zero.",
    "concepts/capacity.md",
)
E131 = ErrorCode(
    131,
    "Gateway settings not allowed",
    "The inference gateway's exposure, load balancer, certificate, inbound CIDRs, routes, pickers or flow control "
    "settings are malformed or inconsistent.",
    "Correct the setting the message names.",
    "how-to/gateway.md",
)
E132 = ErrorCode(
    132,
    "Tenant settings not allowed",
    "A tenant's name, priority, credential (API key secret or JWT issuer), models or limits are malformed, "
    "repeated or inconsistent.",
    "Give each tenant one credential, the models it may call, and limits of at least 1.",
    "how-to/share-an-endpoint.md",
)
E133 = ErrorCode(
    133,
    "Canary settings not allowed",
    "A canary changes nothing, its weight or steps are out of range, it is not behind a gateway, or its next "
    "version needs capacity or settings the workload cannot give.",
    "Name what the next version changes and serve the workload behind the environment's gateway.",
    "how-to/promote.md",
)
E134 = ErrorCode(
    134,
    "Alerting settings not allowed",
    "An alert receiver, route, email address or topic name is malformed, repeated, or lacks what it needs.",
    "Correct the receiver or route the message names.",
    "reference/configuration.md",
)
E135 = ErrorCode(
    135,
    "Fallback instance type cannot serve the plan",
    "A fallback accelerator is of the planned family, of another vendor, cannot serve the replica, or needs other "
    "engine arguments than the planned type.",
    "Choose a fallback of another family of the same vendor that serves the same replica with the same arguments.",
    "concepts/capacity.md",
)
E136 = ErrorCode(
    136,
    "Instance type has no price",
    "The planned instance type has no on-demand or Spot offer in the catalog (Capacity Blocks only), which the node "
    "pools cannot launch.",
    "Pick an instance type with an on-demand price, or reserve capacity with its price.",
    "concepts/capacity.md",
)
E137 = ErrorCode(
    137,
    "Warm capacity or node pool limit not allowed",
    "Warm replicas or headroom do not fit one node or the node pool's limit, or the pool's accelerator limit is "
    "below what replicas.max needs.",
    "Raise the limit to what the message names, or lower the warm replicas or replicas.max.",
    "concepts/capacity.md",
)
E138 = ErrorCode(
    138,
    "Prefill/decode disaggregation not possible",
    "The workload asks for prefill/decode pools the plan cannot give: a pipeline-parallel layout (which vLLM's NIXL "
    "connector cannot split), an accelerator that is not an NVIDIA GPU, pools that cannot meet the latency target, "
    "or sizes out of range.",
    "Let the planner decide (auto), or serve the workload aggregated.",
    "how-to/disaggregate.md",
)
E139 = ErrorCode(
    139,
    "Image reference not allowed",
    "A container image reference is malformed, untagged, or carries a digest where a tag is expected.",
    "Write repository:tag (the lock file holds the digest).",
    "how-to/pin-images.md",
)
E140 = ErrorCode(
    140,
    "ALB ingress not allowed",
    "An ALB is asked for where it cannot serve (several workloads, a replica that spans nodes), or its host, group "
    "or certificate is malformed.",
    "Use the gateway for several workloads, or correct the ingress setting the message names.",
    "how-to/load-balancer.md",
)
E141 = ErrorCode(
    141,
    "Prefix-cache scorer not possible",
    "prefix_cache_scorer is not auto, precise or approximate, or precise is asked where the endpoint picker cannot "
    "subscribe to the pods' KV events or render prompts on them (no gateway, vLLM checking its own API key, Ray "
    "Serve, Neuron, several data-parallel engines per replica, an '@' in the served model name).",
    "Use auto or approximate, or serve the workload behind the gateway with tenants (which turns api_key off).",
    "concepts/gateway.md",
)

# Planner and model catalog: the request, the model's description, and whether anything fits.
E200 = ErrorCode(
    200,
    "Unknown model",
    "The model is not in the catalog and no model record or description is given for it.",
    "Use a catalog model id, or describe the model: `llm-eks models add ORG/NAME` records it.",
    "how-to/add-a-model.md",
)
E201 = ErrorCode(
    201,
    "Unknown or unusable accelerator",
    "The accelerator is not an EC2 instance type the catalog knows, or has no engine path in llm-eks.",
    "Use an instance type from the list the message shows, or auto.",
    "reference/compatibility.md",
)
E202 = ErrorCode(
    202,
    "Plan request value not allowed",
    "A request or engine setting (lengths, concurrency, memory utilization, batch sizes, compute mode, "
    "disaggregation, KV cache dtype) is not one of its choices, is outside its bounds, or is inconsistent with "
    "another.",
    "Give one of the choices, or a value within the bounds, the message names.",
    "reference/configuration.md",
)
E203 = ErrorCode(
    203,
    "Model description not allowed",
    "A model_spec or config.json field is missing, malformed, or inconsistent with the model's architecture.",
    "Correct the field the message names, or describe the model from its config.json (`llm-eks models add`).",
    "how-to/add-a-model.md",
)
E204 = ErrorCode(
    204,
    "Model config file cannot be read",
    "The model's config.json path does not exist, cannot be read, or is not JSON.",
    "Give the path of a Hugging Face config.json.",
    "how-to/add-a-model.md",
)
E205 = ErrorCode(
    205,
    "Weight format not allowed",
    "The weight format or the checkpoint's quantization is not one the planner sizes, or not one vLLM serves on "
    "that accelerator.",
    "Choose a format from the format table for that accelerator.",
    "reference/formats.md",
)
E206 = ErrorCode(
    206,
    "Parallel layout not allowed",
    "A tensor, pipeline, data or expert parallel size does not divide the model or does not fill whole nodes of "
    "the instance type.",
    "Use a size the message lists, or leave it out for the planner to choose.",
    "how-to/serve-across-nodes.md",
)
E207 = ErrorCode(
    207,
    "Image snapshot not possible",
    "An image source from an EBS snapshot needs a node data volume restored from it, which the compute mode does "
    "not give.",
    "Use compute karpenter with image_snapshot_id, or pull images from the registry.",
    "how-to/cold-start.md",
)
E208 = ErrorCode(
    208,
    "CPU KV cache tier not allowed",
    "The KV offload size, conversation turns or think time are out of range, or the tier does not fit the host "
    "memory or the accelerator.",
    "Give a size within the bounds the message names, or auto.",
    "how-to/offload-kv-cache.md",
)
E209 = ErrorCode(
    209,
    "Nothing fits",
    "No instance type (or not the one named) holds a replica of the model at this format, context length and layout.",
    "Apply one of the changes the message lists, cheapest first.",
    "concepts/planner.md",
)
E210 = ErrorCode(
    210,
    "Concurrency or latency target cannot be met",
    "No replica holds target_concurrency sequences, or none meets the TTFT or ITL target at that concurrency.",
    "Lower the target concurrency (and scale out with replicas), raise the latency target, or use fp8.",
    "concepts/planner.md",
)
E211 = ErrorCode(
    211,
    "Not served on Neuron",
    "The model, adapters or parallel layout are not served by the Neuron engine on that instance type.",
    "Serve the model on a GPU instance type, or change the setting the message names.",
    "how-to/serve-on-neuron.md",
)

# Constructs (AWS side): props of a construct used in your own CDK app, checked before it synthesizes.
E300 = ErrorCode(
    300,
    "Add-on props not allowed",
    "An add-on's name, CIDRs, KMS key, replicas, Helm timeout or values, IAM statements or permissions boundary, "
    "or a placement group's node classes are malformed.",
    "Correct the prop the message names.",
    "reference/api/constructs.md",
)
E301 = ErrorCode(
    301,
    "Cluster without kubectl",
    "An add-on that applies Helm releases or manifests is given a cluster with no kubectl provider.",
    "Create the cluster with a kubectl provider (InferenceCluster does).",
    "how-to/own-cdk-app.md",
)
E302 = ErrorCode(
    302,
    "Karpenter props not allowed",
    "Karpenter's chart version, replicas, resources or settings are malformed or out of range.",
    "Correct the prop the message names.",
    "reference/api/constructs.md",
)
E303 = ErrorCode(
    303,
    "Cluster props not allowed",
    "The cluster's system nodes, subnets or load balancer subnets are malformed, overlap, or do not suit Auto Mode.",
    "Correct the prop the message names.",
    "reference/api/constructs.md",
)
E304 = ErrorCode(
    304,
    "Not allowed in this compute mode",
    "A composition step or compute guard does not match the cluster's compute mode: Karpenter or the load balancer "
    "controller on an Auto Mode cluster, Auto Mode nodes on a self-managed one.",
    "Call the step that matches the cluster's compute mode.",
    "how-to/compute-modes.md",
)
E305 = ErrorCode(
    305,
    "Weights bucket props not allowed",
    "The weights bucket's removal policy, lifecycle days, or a reader, stager or cache grant's prefix, key or names "
    "are malformed or conflict.",
    "Correct the prop the message names.",
    "reference/api/constructs.md",
)
E306 = ErrorCode(
    306,
    "Observability props not allowed",
    "Prometheus retention, volume size, storage provisioner or resources are malformed or out of range.",
    "Correct the prop the message names.",
    "reference/api/constructs.md",
)
E307 = ErrorCode(
    307,
    "Object access trail props not allowed",
    "The audit trail's buckets, retention, lock mode or name are out of range or missing.",
    "Correct the prop the message names.",
    "reference/api/constructs.md",
)
E308 = ErrorCode(
    308,
    "Secret props not allowed",
    "A Secrets Manager secret is named by ARN instead of name, or an API key length or secret reader replicas are "
    "out of range.",
    "Name the secret (not its ARN) and keep the values within the bounds the message names.",
    "concepts/security.md",
)
E309 = ErrorCode(
    309,
    "Pinned CRD sources not allowed",
    "A CRD source's name, URL or sha256 is malformed, repeated, or none is listed.",
    "List each CRD once with its https URL and sha256.",
    "reference/api/constructs.md",
)
E310 = ErrorCode(
    310,
    "Controller props not allowed",
    "A webhook controller (LeaderWorkerSet, Envoy Gateway) lacks the control plane CIDRs it must admit, or its "
    "counter store or metrics headers are out of range.",
    "Give the VPC's CIDR as the control plane CIDRs, and values within the bounds the message names.",
    "reference/api/constructs.md",
)
E311 = ErrorCode(
    311,
    "GPU device software props not allowed",
    "Neither NVIDIA nor Neuron is enabled, or the Neuron scheduler or AMI family does not suit them.",
    "Enable the accelerators the pools use, with an AMI family from the list.",
    "reference/api/constructs.md",
)
E312 = ErrorCode(
    312,
    "Interruption queue or teardown props not allowed",
    "The cluster name does not make a valid queue name, or a retention or timeout is out of range.",
    "Give the cluster's fixed name and values within the bounds the message names.",
    "reference/api/constructs.md",
)
E313 = ErrorCode(
    313,
    "Verify runner props not allowed",
    "The in-VPC verify runner's timeout, trusted account or role is malformed, or the cluster has no VPC.",
    "Correct the prop the message names.",
    "how-to/deploy.md",
)

# Charts (Kubernetes side): chart props, checked before any object is built.
E400 = ErrorCode(
    400,
    "Kubernetes name or quantity not allowed",
    "A name is not a DNS label, a served model name has characters vLLM rejects, or a quantity is not a Kubernetes "
    "quantity.",
    "Use lowercase letters, digits and '-' for names, and quantities such as 8, 500m or 16Gi.",
    "reference/api/charts.md",
)
E401 = ErrorCode(
    401,
    "vLLM chart props not allowed",
    "The vLLM chart's model source, layout, resources, floor pools or Neuron settings are out of range or "
    "inconsistent with one another.",
    "Correct the prop the message names.",
    "reference/api/charts.md",
)
E402 = ErrorCode(
    402,
    "Engine argument not allowed",
    "An extra engine argument is not a string, or sets a flag llm-eks sets itself from the plan.",
    "Remove the flag; set the workload field it comes from instead.",
    "reference/api/charts.md",
)
E403 = ErrorCode(
    403,
    "Drain does not fit the grace period",
    "The preStop sleep plus the engine's shutdown or drain timeout exceeds the pod's termination grace period.",
    "Shorten the timeouts or lengthen the grace period.",
    "concepts/workloads.md",
)
E404 = ErrorCode(
    404,
    "Compile cache not possible",
    "A compile cache writer needs staged weights, a one-node replica, and a short enough name.",
    "Stage the weights, or leave compile_cache out for replicas that span nodes.",
    "how-to/cold-start.md",
)
E405 = ErrorCode(
    405,
    "Ray Serve chart props not allowed",
    "A Ray Serve chart prop is out of range or malformed.",
    "Correct the prop the message names.",
    "reference/api/charts.md",
)
E406 = ErrorCode(
    406,
    "Node pool spec not allowed",
    "A GPU or CPU node pool's vendor, instance family, capacity types, categories, generation, limits or name are "
    "malformed or unsupported.",
    "Correct the field the message names.",
    "reference/api/charts.md",
)
E407 = ErrorCode(
    407,
    "Node pools props not allowed",
    "The node pools chart's cluster name, compute mode, node role, security groups, snapshot, AMI, placement groups "
    "or pool names are malformed, repeated, or do not match one another.",
    "Correct the prop the message names.",
    "reference/api/charts.md",
)
E408 = ErrorCode(
    408,
    "Not allowed with Auto Mode node classes",
    "An AMI, block device or node class setting is given that EKS Auto Mode's NodeClass does not take.",
    "Leave the setting at its default with compute auto-mode.",
    "reference/compute-modes.md",
)
E409 = ErrorCode(
    409,
    "Disruption settings not allowed",
    "A node pool's consolidation policy, durations or disruption budget are malformed.",
    "Use the forms the message shows (WhenEmpty, 30m, '1' or '10%').",
    "concepts/capacity.md",
)
E410 = ErrorCode(
    410,
    "Monitoring props not allowed",
    "Monitoring targets, planned values or workload names for the dashboards and alert rules are missing, out of "
    "range or inconsistent.",
    "Correct the prop the message names.",
    "reference/api/charts.md",
)
E411 = ErrorCode(
    411,
    "Weights staging props not allowed",
    "The staging Job's name, repository, revision, file patterns or sizes are malformed or out of range.",
    "Correct the prop the message names.",
    "how-to/cold-start.md",
)
E412 = ErrorCode(
    412,
    "Synth-time checks failed",
    "A check over the synthesized objects (scheduling on the node pools, probes, disruption, limits) found an "
    "object that would deploy and then fail; one line per finding names the rule, the object and the fix. Findings "
    "that are all Pod Security ones carry LLMEKS-E413.",
    "Apply the fix each line gives (`[RULE] object: problem. Fix: ...`).",
    "concepts/checks.md",
)
E413 = ErrorCode(
    413,
    "Pod Security Standard not met",
    "A pod template (a container or volume added to a chart, say) breaks the Pod Security level its namespace "
    "enforces (label pod-security.kubernetes.io/enforce): the API server would reject its pods, so the workload "
    "applies and never runs. One `[POD_SECURITY]` line per rule broken names the object, the containers and the fix.",
    "Apply the fix the line gives (drop the privilege, set the security context), or run the pod in a namespace whose "
    "level allows it, with the reason on the Namespace.",
    "concepts/checks.md",
)

# Verification against a cluster: `llm-eks verify`, `canary` and the load run.
E500 = ErrorCode(
    500,
    "Kubeconfig or context unusable",
    "The kubeconfig does not exist, cannot be read or parsed, has no current context, or lacks the context asked.",
    "Write one with `aws eks update-kubeconfig`, or pass --kubeconfig and --context.",
    "how-to/verify.md",
)
E501 = ErrorCode(
    501,
    "Kubernetes API refused or unreachable",
    "The cluster's API server refused a request (permissions, missing object) or could not be reached (network, TLS).",
    "Check access to the cluster (kubectl against the same context) and the RBAC the message names.",
    "how-to/verify.md",
)
E502 = ErrorCode(
    502,
    "Prometheus unreachable or refused",
    "Prometheus, reached through the API server's service proxy, refused the query or did not answer with its API.",
    "Check that observability is deployed and that your identity may use the service proxy.",
    "how-to/verify.md",
)
E503 = ErrorCode(
    503,
    "Duration not allowed",
    "A window or duration option is not a Prometheus duration within its bounds.",
    "Write it as 30s, 5m or 1h.",
    "reference/cli.md",
)
E504 = ErrorCode(
    504,
    "Output file cannot be written",
    "A journal, record or model file cannot be written where the option points.",
    "Point the option at a writable path.",
    "reference/cli.md",
)
E505 = ErrorCode(
    505,
    "Load run not possible",
    "The load Job is still running from another run, could not be replaced, did not finish in time, or no replica "
    "is Ready to send load to.",
    "Wait for (or delete) the earlier Job, and check the workload is serving.",
    "how-to/verify.md",
)
E506 = ErrorCode(
    506,
    "Canary rollout not possible",
    "The workload has no canary, the canary is not deployed, or its replicas are not ready in time.",
    "Deploy the environment with the canary first, then step it.",
    "how-to/promote.md",
)
E507 = ErrorCode(
    507,
    "Usage window not allowed",
    "A --from or --to time of `llm-eks usage` is not an ISO 8601 time, --to lies in the future, or the window is "
    "shorter than a minute.",
    "Give UTC times such as 2026-11-01 or 2026-11-01T09:00:00Z, --from at least a minute before --to.",
    "how-to/share-an-endpoint.md",
)
E508 = ErrorCode(
    508,
    "No tenants to report",
    "`llm-eks usage` was asked about an environment without a gateway: no tenant is authenticated, so no token is "
    "counted per tenant.",
    "Declare `gateway` (and its `tenants`) in the environment, or ask about one that has them.",
    "how-to/share-an-endpoint.md",
)

# Command line: arguments of `llm-eks`.
E600 = ErrorCode(
    600,
    "Command line not allowed",
    "An option is unknown, missing, or given with one it does not go with.",
    "Run the command with --help for its options.",
    "reference/cli.md",
)
E601 = ErrorCode(
    601,
    "Option value not allowed",
    "An option's value is malformed or out of range (ids, names, regions, sizes, workloads).",
    "Give the value in the form the message shows.",
    "reference/cli.md",
)
E602 = ErrorCode(
    602,
    "Node.js missing or unsupported",
    "jsii runs the AWS CDK on Node.js, and no supported `node` (22 or 24) is on PATH.",
    "Run `make setup` (it installs the pinned Node), or put Node 22 or 24 first on PATH.",
    "getting-started/install.md",
)
E603 = ErrorCode(
    603,
    "Nothing to compare",
    "No catalog instance type can serve the request, or none with a price to plot.",
    "Change the request until `llm-eks plan` finds a plan.",
    "how-to/compare.md",
)
E604 = ErrorCode(
    604,
    "Optional dependency missing",
    "The command needs a package of an llm-eks extra that is not installed.",
    "Install the extra the message names.",
    "getting-started/install.md",
)

# Images and the Hugging Face Hub: the image lock, snapshots, registries and model records.
E700 = ErrorCode(
    700,
    "Image lock file not allowed",
    "The image lock file cannot be read, is not JSON, or holds keys, a version or digests it should not.",
    "Rewrite it with `llm-eks images lock`.",
    "how-to/pin-images.md",
)
E701 = ErrorCode(
    701,
    "Registry answer not usable",
    "A registry answered without a manifest llm-eks can trust: not found, an error status, another media type, "
    "a digest that does not match, or a token it cannot get anonymously.",
    "Check the image reference exists and is public, or lock it by hand from a trusted source.",
    "how-to/pin-images.md",
)
E702 = ErrorCode(
    702,
    "Registry unreachable",
    "A registry gave no HTTP answer (DNS, connection, TLS, timeout).",
    "Run the command where the registry is reachable.",
    "how-to/pin-images.md",
)
E703 = ErrorCode(
    703,
    "Image snapshot build failed",
    "Building the image snapshot stopped: the builder AMI is not Amazon's, a step failed or timed out, or a record "
    "cannot be reused or read.",
    "Act on the step the message names, then run `llm-eks images snapshot` again.",
    "how-to/cold-start.md",
)
E704 = ErrorCode(
    704,
    "Images not pinned",
    "The environment requires image digests (or is production) and an image has no digest in the lock file, or "
    "the snapshot record holds another image list.",
    "Run `llm-eks images lock` (and snapshot again when the images changed).",
    "how-to/pin-images.md",
)
E705 = ErrorCode(
    705,
    "Hugging Face Hub unreachable",
    "The Hub (or HF_ENDPOINT's mirror) gave no HTTP answer.",
    "Run `llm-eks models add` where the Hub is reachable.",
    "how-to/add-a-model.md",
)
E706 = ErrorCode(
    706,
    "Hugging Face Hub answer not usable",
    "The Hub refused the request (gated model, missing revision or file) or answered with what is not a model llm-eks "
    "sizes (no config.json, not JSON, not safetensors).",
    "Follow the message: accept a gated model's licence and set HF_TOKEN, or give an existing revision.",
    "how-to/add-a-model.md",
)
E707 = ErrorCode(
    707,
    "HF_ENDPOINT not allowed",
    "The HF_ENDPOINT environment variable is not a URL.",
    "Set it to the Hub's URL (https://huggingface.co) or a mirror's.",
    "how-to/add-a-model.md",
)
E708 = ErrorCode(
    708,
    "Model record not allowed",
    "A model record file cannot be read, or holds keys or values `llm-eks models add` does not write.",
    "Write it again with `llm-eks models add`.",
    "how-to/add-a-model.md",
)


def all_codes() -> tuple[ErrorCode, ...]:
    """Every code, by number."""
    return tuple(sorted((v for v in globals().values() if isinstance(v, ErrorCode)), key=lambda c: c.number))


def area(code: ErrorCode) -> str:
    return AREAS[code.number // 100]
