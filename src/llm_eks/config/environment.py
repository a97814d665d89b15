"""The typed configuration of one environment: frozen dataclasses whose defaults are the production-right choice,
each with a one-line reason. Built from cdk.json by `llm_eks.config.parse_environment`."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from llm_eks.catalog.models import ModelSpec
from llm_eks.config.alerting import AlertingConfig
from llm_eks.config.canary import OVERRIDES, CanaryConfig, canary_key
from llm_eks.config.tenants import ClusterIssuerConfig, IssuerConfig, TenantConfig, no_issuers, no_tenants
from llm_eks.config.workload_options import (
    AlbConfig,
    AutoscalingConfig,
    BenchmarkConfig,
    LoadBalancerConfig,
    ReplicasConfig,
    SloConfig,
)
from llm_eks.planner.compute_mode import COMPUTE_MODES, KARPENTER
from llm_eks.planner.engine import GPU_MEMORY_UTILIZATION
from llm_eks.planner.plan_warnings import WARN_NO_EFA
from llm_eks.planner.request import PlanRequest
from llm_eks.versions import KUBERNETES_VERSION

ENGINES = ("vllm", "ray-serve")
# Where an environment's nodes come from (planner/compute_mode.py).
COMPUTE = COMPUTE_MODES
# 64 addresses per AZ: an ALB needs at least a /27 with 8 free addresses and grows into more as it scales.
LOAD_BALANCER_SUBNET_PREFIX = 26
CAPACITY_TYPES = ("spot", "on-demand")
WEIGHT_SOURCES = ("hf", "s3", "staged")


@dataclass(frozen=True)
class VpcConfig:
    """A new VPC (cidr, az_count) or an existing one (vpc_id with its AZs and private subnets)."""

    # /16 leaves room for Karpenter to add GPU nodes and the VPC CNI's one-IP-per-pod without exhaustion.
    cidr: str = "10.0.0.0/16"
    # Two AZs is what an env-agnostic stack can resolve without a lookup; Karpenter and KEDA need at least two.
    az_count: int = 2
    # Pin AZ names to get more than two zones without a context lookup (needs account and region).
    availability_zones: tuple[str, ...] = ()
    # Existing VPC: its id and private subnet ids (imported as given; synth never looks them up).
    vpc_id: str | None = None
    # The existing VPC's private subnets, where nodes and pods run (one per AZ at least).
    private_subnet_ids: tuple[str, ...] = ()
    # The existing VPC's public subnets, imported with it; optional: every load balancer llm-eks creates is internal.
    public_subnet_ids: tuple[str, ...] = ()
    # The CIDRs of the existing VPC's private subnets, where nodes and pods run: required with a load balancer (the
    # gateway's NLB, an ALB), whose inbound_cidrs may not overlap them. A new VPC's are inside `cidr`.
    private_subnet_cidrs: tuple[str, ...] = ()
    # The internal ALB's own subnets, one per AZ (only with an internal ALB). The serving port admits the ALB by
    # these addresses, and no pod ever holds one. Empty: for a new VPC llm-eks carves one /26 per AZ from the top of
    # `cidr`; an existing VPC must list the CIDRs of the subnets it tags `kubernetes.io/role/internal-elb`.
    load_balancer_cidrs: tuple[str, ...] = ()
    # The existing VPC's S3 endpoint (gateway or interface, vpce-...), through which pods reach S3. A weights bucket
    # the stack creates refuses object requests from anywhere else, so it is required then. A new VPC gets its own.
    s3_endpoint_id: str | None = None

    @property
    def imported(self) -> bool:
        return self.vpc_id is not None

    def load_balancer_subnet_cidrs(self) -> tuple[str, ...]:
        """The internal ALB subnets' CIDRs: as listed, or for a new VPC the last /26 blocks of `cidr`, one per AZ."""
        if self.load_balancer_cidrs or self.imported:
            return self.load_balancer_cidrs
        zones = len(self.availability_zones) or self.az_count
        blocks = list(ipaddress.IPv4Network(self.cidr).subnets(new_prefix=LOAD_BALANCER_SUBNET_PREFIX))
        return tuple(str(block) for block in blocks[-zones:])


@dataclass(frozen=True)
class EndpointConfig:
    """Kubernetes API endpoint: private only, or public restricted to listed CIDRs (plus private)."""

    # Private by default: the API of a GPU cluster is not something to expose to the internet.
    access: str = "private"
    # With access "public": the only ranges that may reach it (at most one /8 of addresses in all, never 0.0.0.0/0).
    public_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class SystemNodesConfig:
    """The managed node group that runs controllers (Karpenter, KEDA, Prometheus, operators)."""

    # 4 vCPU / 16 GiB holds Karpenter, KEDA, Prometheus and Grafana with headroom; Graviton is not used because
    # some operator images are amd64-only. Checked against EC2's instance types as the pinned botocore lists them.
    instance_type: str = "m7i.xlarge"
    # Three: Karpenter, KEDA, both Prometheus and Alertmanager replicas and the query endpoint still fit when one
    # node (or its zone) is gone; 2 is the floor Karpenter's one-per-host replicas need.
    min_size: int = 3
    # Start at the minimum.
    desired_size: int = 3
    # Room for two more nodes during a node group update or a controller's burst.
    max_size: int = 5
    # Enough for container images and logs of the controllers; encrypted by the launch template default.
    disk_gib: int = 50


@dataclass(frozen=True)
class WeightsBucketConfig:
    """The environment's S3 bucket for model weights, which llm-eks's staging Jobs fill (workloads with weights
    "staged"). `{}`: the stack creates one (SSE-KMS with a key of its own, TLS only, its name generated by
    CloudFormation, kept on stack delete). `name`: an existing bucket."""

    # An existing bucket; None: the stack creates one.
    name: str | None = None
    # Only for an existing bucket encrypted with a customer managed key (its ARN); SSE-S3 needs none.
    kms_key_arn: str | None = None
    # A CloudTrail trail of the stack's own records every object request on the created bucket (who, through which
    # endpoint). Off only where an organisation trail already records this bucket's data events (each is billed).
    data_events_trail: bool = True


# Risks `accepted_risks` may name, and what each lets through in production.
ACCEPTED_RISKS = {
    "images-by-tag": "images without a digest in images.lock.json run by tag",
    "revisions-by-name": "model and adapter revisions that are branch or tag names, resolved anew at each start",
}
# Alpha feature gates `alpha_features` may turn on, and what each does. Off unless an environment names it with a
# reason: Alpha behaviour can change or go between releases (Karpenter 1.14.1 charts/karpenter/values.yaml:
# "nodeRepair is ALPHA and is disabled by default").
ALPHA_FEATURES = {
    "node-repair": "Karpenter's node repair (feature gate nodeRepair): a node whose health condition stays bad is "
    "replaced, e.g. AcceleratedHardwareReady False for 10 minutes after a fatal GPU error",
}
# A Hub commit id: what a pinned revision is.
COMMIT = re.compile(r"^[0-9a-f]{40}$")


def split_revision(source: str) -> tuple[str, str]:
    """ "org/name@rev" -> ("org/name", "rev"); no "@": ("org/name", "main") (Hub repo ids never hold "@")."""
    repo, _, revision = source.partition("@")
    return repo, revision or "main"


GATEWAY_EXPOSE = ("nlb", "cluster")


@dataclass(frozen=True)
class GatewayConfig(LoadBalancerConfig):
    """The environment's one endpoint (Envoy Gateway with Envoy AI Gateway, in front of every workload): the listener
    and inbound CIDRs of `LoadBalancerConfig` (inbound_cidrs required here: with the VPC CNI every pod holds a VPC
    address, so the VPC's CIDR would admit every pod), who may call it (tenants), and how large a request it takes."""

    # nlb: an internal NLB for clients outside the cluster (inbound_cidrs and a certificate or allow_http required);
    # cluster: no load balancer, only in-cluster clients labelled llm-eks.io/inference-client reach it.
    expose: str = "nlb"
    # Who may call the gateway, by name. Empty: one tenant per workload, named after it, whose credential is that
    # workload's own API key (its api_key_secret, or llm-eks/<env>/<workload>/api-key) and whose models are its own.
    tenants: Mapping[str, TenantConfig] = field(default_factory=no_tenants)
    # OIDC providers a JWT tenant may name (besides eks-cluster, the cluster's own tokens), by name.
    issuers: Mapping[str, IssuerConfig] = field(default_factory=no_issuers)
    # The cluster's own tokens, when a tenant names issuer eks-cluster.
    eks_cluster_issuer: ClusterIssuerConfig = field(default_factory=ClusterIssuerConfig)
    # 8 MiB holds a 128k-token prompt several times over; larger bodies get 413 from Envoy before anything reads them.
    max_request_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True)
class WorkloadConfig:
    """What to serve and how; the planner turns it into instance types, parallelism and engine arguments."""

    # vLLM directly is the leanest path to an OpenAI-compatible endpoint; ray-serve for Ray-based platforms.
    engine: str = "vllm"
    # A small, widely used instruction model: fits one 24 GB GPU, so a new environment starts cheap.
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    # A model not in the catalog: the same fields as the catalog rows.
    model_spec: Mapping[str, Any] | None = None
    # The checkpoint's own format unless asked: quantization is a quality decision, not a default.
    weight_format: str = "auto"
    # The activation dtype unless asked: fp8 halves the KV cache at a small accuracy cost, a choice to make per model.
    kv_cache_dtype: str = "auto"
    # 8k context keeps KV cache per sequence small enough for useful concurrency on one GPU.
    max_model_len: int = 8192
    # vLLM 0.33's own default (planner.engine.GPU_MEMORY_UTILIZATION); the CUDA context, NCCL and cuBLAS live in the
    # remaining 8 %.
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    # Let the planner pick the cheapest instance that meets the targets.
    accelerator: str = "auto"
    # Concurrent sequences one replica must hold at the typical request size (sizes KV cache and max-num-seqs).
    target_concurrency: int = 16
    # A chat turn with some context in, a paragraph out: the shape most interactive traffic has.
    typical_input_tokens: int = 1024
    # A paragraph out: with typical_input_tokens, the request size the KV cache and the latency are sized for.
    typical_output_tokens: int = 256
    # Spot first (cheaper), on-demand as the fallback when Spot has no capacity. Karpenter takes Spot whenever both
    # are allowed and Spot is offered, whatever the order here; on_demand_floor is what keeps replicas on on-demand.
    capacity_types: tuple[str, ...] = ("spot", "on-demand")
    # The minimum replicas run as a Deployment of their own (`<name>-floor`) on on-demand capacity, spread over
    # zones (required), on a NodePool of their own weighted above the Spot one; the rest scale out from the Spot
    # pool. None: on where the environment is production or capacity_types lists on-demand first.
    on_demand_floor: bool | None = None
    # An instance type of another GPU family for a lower-weight NodePool Karpenter falls back to when the planned
    # family has no capacity; the planner sizes it with the same engine arguments and pod. None: the planned family.
    fallback_accelerator: str | None = None
    # Replicas KEDA scales between (below).
    replicas: ReplicasConfig = field(default_factory=ReplicasConfig)
    # Cap on accelerators this environment's node pool may launch; None: what max replicas need.
    accelerator_limit: int | None = None
    # Warm headroom: replica-shaped placeholder pods that keep GPU nodes up, so a scale-out skips the node launch.
    # 0 by default: each one costs a replica's $/h around the clock (`llm-eks plan` prints it).
    warm_replicas: int = 0
    # Latency targets: a sizing input, alert thresholds and the benchmark's goodput (below).
    slo: SloConfig = field(default_factory=SloConfig)
    # When KEDA adds and removes replicas (below).
    autoscaling: AutoscalingConfig = field(default_factory=AutoscalingConfig)
    # hf: download from Hugging Face into the node's NVMe cache; s3: stream from weights_s3_uri (a bucket you fill);
    # staged: stream from the environment's weights_bucket, filled once by llm-eks's staging Job (engine ray-serve:
    # each worker pod copies the staged files to its node, verified, and serves them from there).
    weights: str = "hf"
    # Only with weights "s3": the bucket and prefix holding the checkpoint files.
    weights_s3_uri: str | None = None
    # Only with weights "staged" and engine vllm (Ray Serve keeps none): keep vLLM's torch.compile cache in the
    # weights bucket, so a replica on a new node restores it instead of compiling. A Job of its own (no traffic, no
    # secrets) compiles once per image and flags and publishes it add-only and signed; serving pods only read it and
    # refuse a file the signature does not cover.
    compile_cache: bool = True
    # The Hub commit (40 hex) of the checkpoint the plan serves. A branch or tag is resolved anew at each staging or
    # start, so what runs can change under you (production refuses it). None: the commit `llm-eks models add`
    # recorded in models/<org>/<name>.json, else "main".
    revision: str | None = None
    # Run the checkpoint's own Python code (vLLM --trust-remote-code). Off: its *.py files are neither staged nor run.
    trust_remote_code: bool = False
    # Secrets Manager secret NAME holding the Hugging Face token (gated models); never the token itself.
    hf_token_secret: str | None = None
    # An internal ALB in front of the Service (HTTPS only, from listed client ranges); None by default: in-cluster
    # clients use the ClusterIP Service. Only in the one-model `workload`.
    alb: AlbConfig | None = None
    # Encrypted EBS snapshot of a Bottlerocket data volume that already holds the inference images: every new GPU
    # node restores it instead of pulling ~10 GB. None: nodes pull images (no snapshot to keep up to date).
    image_snapshot_id: str | None = None
    # The load the benchmark Job sends after a deploy (below).
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    # API key of the OpenAI endpoint (engine vllm): on by default, so no client in the VPC calls it anonymously.
    # Off (false) only where something in front already authenticates every request.
    api_key: bool = True
    # Secrets Manager secret NAME whose SecretString is the key; None: the stack generates llm-eks/<env>/api-key.
    api_key_secret: str | None = None
    # Plan warnings accepted, by id (`llm-eks plan` prints it) -> one line why. Empty: `cdk synth` shows every
    # warning, and `cdk synth --strict` fails on it, until someone decides.
    acknowledged_warnings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # LoRA adapters served by this workload (engine vllm, weights "staged"): the name clients send as `model` ->
    # Hugging Face repo id, pinned as "org/adapter@<commit>" (no @: "main"). Each is staged into the weights bucket
    # and restored at start, checked against its staging record. Empty: LoRA off (its buffers cost KV cache).
    lora_adapters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # vLLM's default --max-lora-rank; an adapter of a higher rank fails to load, a higher cap costs KV cache.
    max_lora_rank: int = 16
    # Reproduce a vLLM deployment: `vllm serve`'s --tensor-parallel-size, --pipeline-parallel-size and --max-num-seqs.
    # None (the default): the planner chooses them for the targets above; a given one that cannot work is an error.
    tensor_parallel_size: int | None = None
    # As tensor_parallel_size: None lets the planner choose the pipeline stages (they may span nodes).
    pipeline_parallel_size: int | None = None
    # As tensor_parallel_size: None sizes it from target_concurrency and what fits.
    max_num_seqs: int | None = None
    # As tensor_parallel_size, vLLM's --data-parallel-size (a MoE model's attention ranks, experts over DP x TP GPUs).
    data_parallel_size: int | None = None
    # As tensor_parallel_size, vLLM's --enable-expert-parallel; None lets the planner weigh it for a MoE model.
    enable_expert_parallel: bool | None = None
    # EFA between the nodes of a replica: null (wherever the plan spans nodes of a type with EFA), true (required: no
    # EFA or a one-node replica is an error), false (TCP; needs acknowledged_warnings llm-eks:plan-no-efa).
    efa: bool | None = None
    # The serving image instead of llm-eks's pinned one (versions.py), e.g. vLLM built with the EFA userspace
    # (libfabric, aws-ofi-nccl): the stock vllm/vllm-openai image may lack it, and NCCL then falls back to TCP sockets.
    image: str | None = None
    # The next version of this workload (a workload of `workloads` behind the gateway), served beside it while the
    # route moves traffic to it by weight (`llm-eks canary`). None: changes replace the running version in place.
    canary: CanaryConfig | None = None
    # A NodePool of this workload's own instead of sharing its GPU family's with the environment's other workloads:
    # off by default, since a shared pool packs replicas of several models onto the same nodes and limit.
    dedicated_pool: bool = False
    # Separate prefill and decode pools: auto lets the planner recommend them where they cost less per million output
    # tokens at the SLO (or meet an SLO one pool misses; `llm-eks plan` says which and why); on always, off never.
    # Served as a prefill and a decode Deployment (a LeaderWorkerSet each where a replica spans nodes); a
    # pipeline-parallel layout stays aggregated. engine ray-serve: off (on is refused).
    disaggregation: str = "auto"
    # Prefill replicas of a disaggregated plan; None: the fewest that meet the TTFT target.
    prefill_replicas: int | None = None
    # A CPU tier for the KV cache (vLLM --kv-offloading-size, native backend): a size in GiB per engine, "auto" (what
    # the pod's memory share holds beyond vLLM's needs) or null. Off by default: it pays only where prompts share
    # prefixes the GPU cache evicts (multi-turn chat, agents), and pins host memory. engine vllm only.
    kv_offload: float | str | None = None
    # Turns per conversation of this workload's traffic; above 1 `llm-eks plan` estimates their prefix reuse.
    conversation_turns: int = 1
    # Mean seconds between an answer and the next message of a conversation (the reuse estimate's assumption).
    think_time_s: float = 30.0
    # How the gateway's endpoint picker scores prefix-cache hits: auto is precise (fed by vLLM's KV-cache events, the
    # CPU tier included) where kv_offload is on, approximate elsewhere; precise asks for it (refused where the picker
    # cannot tokenize on the workload's pods: an API key, no gateway, Ray Serve, Neuron, several data-parallel
    # engines); approximate never publishes events.
    prefix_cache_scorer: str = "auto"
    # Read from models/<org>/<name>.json (`llm-eks models add`) when `model` is recorded there; filled by config
    # loading, never written in cdk.json (the schema skips derived fields).
    recorded_model: ModelSpec | None = field(default=None, metadata={"derived": True})
    # The commit that file records (what `revision` defaults to); filled by config loading, never in cdk.json.
    recorded_commit: str | None = field(default=None, metadata={"derived": True})

    @property
    def adapters(self) -> tuple[tuple[str, str, str], ...]:
        """Each LoRA adapter as (name, repo id, revision): "org/adapter@rev" split, "main" when no revision given."""
        return tuple((name, *split_revision(source)) for name, source in self.lora_adapters.items())

    @property
    def weights_source(self) -> str:
        """The planner's weights path: the Hub into NVMe, an S3 stream, or (staged with its compile cache) both the
        stream and a restored torch.compile cache. Ray Serve keeps no compile cache: its staged weights are "s3"."""
        if self.weights == "staged" and self.compile_cache and self.engine == "vllm":
            return "staged"
        return "s3" if self.weights in ("s3", "staged") else "nvme"

    def plan_request(self, compute: str = KARPENTER, gateway: bool | None = None) -> PlanRequest:
        """The planner's input for this workload, on the environment's `compute`; `gateway`: whether the
        environment routes it through a gateway (None: not known, as for `llm-eks plan --model`)."""
        from llm_eks.planner import LoraAdapters
        from llm_eks.planner.kv_events import Picker

        model: Any = self.model
        if self.model_spec is not None:
            model = ModelSpec.from_mapping({"id": self.model, **self.model_spec})
        elif self.recorded_model is not None:
            model = self.recorded_model
        return PlanRequest(
            model=model,
            weight_format=self.weight_format,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
            gpu_memory_utilization=self.gpu_memory_utilization,
            accelerator=self.accelerator,
            target_concurrency=self.target_concurrency,
            typical_input_tokens=self.typical_input_tokens,
            typical_output_tokens=self.typical_output_tokens,
            weights_source=self.weights_source,
            # The node classes pull in parallel unless they restore an image snapshot (manifests/node_pools).
            image_source="snapshot" if self.image_snapshot_id is not None else "parallel-pull",
            compute=compute,
            # The SLO's inter-token latency is a sizing input: auto skips instances too slow to meet it.
            max_itl_ms=self.slo.itl_p99_ms,
            # The SLO's time to first token too: auto skips instances whose estimate misses it.
            max_ttft_ms=self.slo.ttft_p99_ms,
            tensor_parallel_size=self.tensor_parallel_size,
            pipeline_parallel_size=self.pipeline_parallel_size,
            max_num_seqs=self.max_num_seqs,
            data_parallel_size=self.data_parallel_size,
            # Ray Serve's engine_kwargs here carry no data parallelism: its workloads keep TP x PP unless asked.
            enable_expert_parallel=(
                False
                if self.engine == "ray-serve" and self.enable_expert_parallel is None
                else self.enable_expert_parallel
            ),
            # Accepting the no-EFA warning is accepting a replica whose nodes talk over TCP.
            allow_without_efa=WARN_NO_EFA in self.acknowledged_warnings,
            warm_replicas=self.warm_replicas,
            # Ray Serve's chart renders no prefill/decode pools: its workloads are planned aggregated.
            disaggregation="off" if self.engine == "ray-serve" else self.disaggregation,
            prefill_replicas=self.prefill_replicas,
            kv_offload=self.kv_offload,
            conversation_turns=self.conversation_turns,
            think_time_s=self.think_time_s,
            prefix_cache_scorer=self.prefix_cache_scorer,
            # vLLM checks a key only where api_key is on and the engine is vLLM (Ray Serve LLM has none).
            picker=None if gateway is None else Picker(gateway, self.api_key and self.engine == "vllm", self.engine),
            lora=(
                LoraAdapters(tuple((name, repo) for name, repo, _ in self.adapters), self.max_lora_rank)
                if self.lora_adapters
                else None
            ),
        )


# PlanRequest fields a workload sets under the same name, and those it sets under another (plan_request maps them).
_SAME_NAMED = frozenset({f.name for f in fields(WorkloadConfig)} & {f.name for f in fields(PlanRequest)} - {"model"})
_REQUEST_SETTINGS = {"max_itl_ms": "slo.itl_p99_ms", "max_ttft_ms": "slo.ttft_p99_ms"}


@dataclass(frozen=True)
class ServedWorkload:
    """One workload of an environment, with where it sits in cdk.json (for names and error paths)."""

    environment: str
    # None: the one-model `workload` shorthand; else its short name in `workloads`.
    key: str | None
    config: WorkloadConfig
    # A next version: the key of the workload it is the canary of (its own key is <that key>-canary).
    canary_of: str | None = None

    @property
    def path(self) -> str:
        """Its config path in error messages: environments.<env>.workload or environments.<env>.workloads.<key>
        (a canary's: that workload's `.canary`)."""
        if self.canary_of is not None:
            return f"environments.{self.environment}.workloads.{self.canary_of}.canary"
        if self.key is None:
            return f"environments.{self.environment}.workload"
        return f"environments.{self.environment}.workloads.{self.key}"

    def setting(self, field: str, value: Any) -> str | None:
        """How cdk.json sets the plan request's `field` to `value` for this workload (for an error's advice); None
        where it has no such setting. A canary sets only its OVERRIDES; the rest it takes from its workload."""
        path = self.path
        if self.canary_of is not None and field not in OVERRIDES:
            path = path.removesuffix(".canary")
        if field == "allow_without_efa":
            return f'{path}.acknowledged_warnings["{WARN_NO_EFA}"]' if value is True else None
        name = _REQUEST_SETTINGS.get(field, field if field in _SAME_NAMED else None)
        return None if name is None else f"{path}.{name} {value}"


@dataclass(frozen=True)
class CapacityReservationConfig:
    """Reserved capacity of one GPU family (On-Demand Capacity Reservations or Capacity Blocks for ML), which the
    family's NodePools launch into first (Karpenter's `reserved` capacity type)."""

    # Instances the reservations hold together: the plan warns (llm-eks:plan-reservation) when replicas.max needs more.
    nodes: int
    # The reservations by id (cr-...), Capacity Blocks included: Karpenter uses no reservation it is not given.
    ids: tuple[str, ...] = ()
    # Or by tags ("*" matches any value): reservations tagged later are used too, without a deploy.
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Required with tags: the account that owns the reservations (yours, or the one sharing them through AWS RAM), so
    # the tags never match a reservation another account shares with this one. Not with ids.
    owner_id: str | None = None
    # default (an ODCR, billed at the on-demand rate used or not) or capacity-block (paid up front for its whole term;
    # Karpenter drains its nodes 40 minutes before it ends).
    reservation_type: str = "default"
    # $ per reserved instance-hour, for costing; None: the catalog's on-demand price (what an ODCR bills). Required
    # for a Capacity Block: its price is what you paid up front, divided over the block's hours.
    usd_per_hour: float | None = None
    # False: the NodePool launches only into the reservations, so a scale-out beyond them waits instead of adding
    # on-demand or Spot nodes at list price beside capacity already paid for. True: the workload's capacity_types too.
    fallback: bool = False


@dataclass(frozen=True)
class EnvironmentConfig:
    """One deployable environment: becomes the stack `LlmEks-<name>`."""

    # The environment's key in cdk.json: names the stack, the cluster and every secret.
    name: str
    # Env-agnostic when both are absent: synth needs no account and no lookups.
    account: str | None = None
    # With account: a commercial, GovCloud or China region (llm_eks/aws_regions.py).
    region: str | None = None
    # The one Kubernetes minor llm-eks pins (versions.py): the kubectl layer and the node AMIs move with it.
    kubernetes_version: str = KUBERNETES_VERSION
    # karpenter keeps every cold-start path and no per-node fee; auto-mode: EKS Auto Mode runs nodes, AMIs and drivers.
    compute: str = KARPENTER
    # A new VPC by default (below).
    vpc: VpcConfig = field(default_factory=VpcConfig)
    # Private by default (below).
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    # The managed node group of the controllers (below).
    system_nodes: SystemNodesConfig = field(default_factory=SystemNodesConfig)
    # IAM roles that get cluster-admin through EKS access entries (no aws-auth ConfigMap).
    admin_role_arns: tuple[str, ...] = ()
    # IAM roles that may move traffic between a workload's versions (`llm-eks canary`, `llm-eks rollback`) and run
    # `llm-eks verify`: access entries mapped to groups llm-eks-rollout and llm-eks-verify, nothing of cluster-admin.
    rollout_role_arns: tuple[str, ...] = ()
    # Added to every resource and every Karpenter node (AWS's tag rules; no key Karpenter reserves).
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The one-model shorthand; ignored when `workloads` is given (config refuses both).
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    # Several models side by side: short name -> workload, each planned on its own, sharing GPU NodePools per family.
    workloads: Mapping[str, WorkloadConfig] = field(default_factory=lambda: MappingProxyType({}))
    # An S3 bucket for model weights that llm-eks fills (workloads with weights "staged"); None: no bucket.
    weights_bucket: WeightsBucketConfig | None = None
    # One OpenAI endpoint for every workload (Envoy Gateway behind an internal NLB, routing by `model`): its listener,
    # its tenants and who may reach it. None: no gateway; clients use each workload's Service.
    gateway: GatewayConfig | None = None
    # Refuse synth while any image this environment runs has no digest in images.lock.json. Off by default: the
    # shipped lock is empty (no digest can be verified without the registries); turn it on once you have locked.
    require_image_digests: bool = False
    # A production environment refuses what can change under it: images without a digest in images.lock.json and
    # model or adapter revisions that are branch or tag names, unless accepted_risks names the risk. Off by default
    # so a first environment synthesizes before anything is locked; turn it on for what serves users.
    production: bool = False
    # Reserved GPU capacity by instance family (p5, p5en, ...), which its NodePools launch into; empty: none.
    capacity_reservations: Mapping[str, CapacityReservationConfig] = field(default_factory=lambda: MappingProxyType({}))
    # Risks a production environment accepts, by id -> one line why (synth prints each): "images-by-tag" (images
    # without a locked digest), "revisions-by-name" (a branch or tag instead of a commit). Empty: none accepted.
    accepted_risks: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Alpha feature gates this environment turns on, by id -> one line why (synth prints each): "node-repair"
    # (Karpenter replaces a node whose GPU, kernel, storage or network the EKS node monitoring agent reports broken).
    # Empty: every Alpha gate stays off, as upstream ships them.
    alpha_features: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Where alerts go (below): by default every severity to the environment's SNS topic, and Alertmanager's
    # heartbeat to a topic a CloudWatch alarm watches, so a silent pipeline alarms too.
    alerting: AlertingConfig = field(default_factory=AlertingConfig)

    @property
    def served(self) -> tuple[ServedWorkload, ...]:
        """Every workload of the environment, in cdk.json order: `workloads`, or the one `workload`; a workload's
        next version (`canary`) right after it, as a workload of its own."""
        if not self.workloads:
            return (ServedWorkload(self.name, None, self.workload),)
        served = []
        for key, w in self.workloads.items():
            served.append(ServedWorkload(self.name, key, w))
            if w.canary is not None:
                served.append(ServedWorkload(self.name, canary_key(key), next_version(w, w.canary), canary_of=key))
        return tuple(served)

    @property
    def stack_name(self) -> str:
        return f"LlmEks-{self.name}"

    @property
    def cluster_name(self) -> str:
        """Fixed, readable cluster name: Karpenter's queue, tags and IAM conditions all key on it."""
        return f"llm-eks-{self.name}"


def next_version(current: WorkloadConfig, canary: CanaryConfig) -> WorkloadConfig:
    """The next version's workload: the current one with the canary's overrides and replicas, no canary of its own
    and no warm placeholders (those stay with the current version)."""
    changes = {name: getattr(canary, name) for name in OVERRIDES if getattr(canary, name) is not None}
    if canary.replicas is not None:
        changes["replicas"] = canary.replicas
    # The current version's cap covers both versions (build_workloads checks the sum against it).
    return replace(current, **changes, canary=None, warm_replicas=0, accelerator_limit=None)
