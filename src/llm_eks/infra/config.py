"""Typed, validated configuration for one environment, read from cdk.json context `environments`.

Every error is one line: `environments.<env>.<field>: <value> is not allowed; <what is allowed>`, raised before any
construct is built. No aws_cdk import here: the `llm-eks plan` CLI reads the same config and must stay fast.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from llm_eks import aws_ids
from llm_eks.aws_regions import REGIONS
from llm_eks.errors import ConfigError, did_you_mean, fail
from llm_eks.infra import inputs
from llm_eks.infra.schema import build
from llm_eks.versions import KUBERNETES_VERSION

if TYPE_CHECKING:
    from llm_eks.infra.plan import PlanRequest

_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
_INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")

ENGINES = ("vllm", "ray-serve")
# 64 addresses per AZ: an ALB needs at least a /27 with 8 free addresses and grows into more as it scales.
LOAD_BALANCER_SUBNET_PREFIX = 26
CAPACITY_TYPES = ("spot", "on-demand")
WEIGHT_SOURCES = ("hf", "s3")


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
    private_subnet_ids: tuple[str, ...] = ()
    public_subnet_ids: tuple[str, ...] = ()
    # The internal ALB's own subnets, one per AZ (only with an internal ALB). The serving port admits the ALB by
    # these addresses, and no pod ever holds one. Empty: for a new VPC llm-eks carves one /26 per AZ from the top of
    # `cidr`; an existing VPC must list the CIDRs of the subnets it tags `kubernetes.io/role/internal-elb`.
    load_balancer_cidrs: tuple[str, ...] = ()

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
    public_cidrs: tuple[str, ...] = ()


@dataclass(frozen=True)
class SystemNodesConfig:
    """The managed node group that runs controllers (Karpenter, KEDA, Prometheus, operators)."""

    # 4 vCPU / 16 GiB holds Karpenter, KEDA, Prometheus and Grafana with headroom; Graviton is not used because
    # some operator images are amd64-only.
    instance_type: str = "m7i.xlarge"
    # Karpenter runs 2 replicas with one-per-host anti-affinity, so 2 nodes in 2 AZs is the floor.
    min_size: int = 2
    desired_size: int = 2
    max_size: int = 4
    # Enough for container images and logs of the controllers; encrypted by the launch template default.
    disk_gib: int = 50


@dataclass(frozen=True)
class ReplicasConfig:
    # One warm replica: a GPU replica takes minutes to start, so zero is opt-in (scale_to_zero).
    min: int = 1
    max: int = 2


@dataclass(frozen=True)
class SloConfig:
    # Interactive chat expects the first token within about a second at p99.
    ttft_p99_ms: float = 1000.0
    # ~20 tokens/s per stream reads faster than a person reads.
    itl_p99_ms: float = 50.0


@dataclass(frozen=True)
class BenchmarkConfig:
    """The `vllm bench serve` workload the benchmark Job sends."""

    # Request sizes come from the workload's typical sizes, so the benchmark measures what the plan assumed.
    # 4 requests/s is a steady load a single replica of the default plan should hold inside its SLO.
    request_rate: float = 4.0
    # 200 prompts at 4/s is under a minute of load: enough samples for a stable p99 without a long run.
    num_prompts: int = 200


@dataclass(frozen=True)
class WorkingHoursConfig:
    """Keep replicas up inside these hours; outside them the workload may sit at zero (KEDA cron trigger).

    No in-stack signal can wake a Deployment at zero on a request (vLLM's metrics vanish with its pods), so the
    clock is the activation signal. Open the window one cold start early (see the plan's scale-out time).
    """

    timezone: str
    # Cron expressions (minute hour day-of-month month day-of-week).
    start: str
    end: str


@dataclass(frozen=True)
class AutoscalingConfig:
    # Queue-based: scale up once more than this many requests wait per replica.
    waiting_per_replica: int = 4
    # KV-cache pressure: scale up when average usage passes this fraction (vllm:kv_cache_usage_perc is 0..1).
    kv_cache_usage: float = 0.8
    # Off by default: at zero replicas the first request waits for a full GPU cold start.
    scale_to_zero: WorkingHoursConfig | None = None


@dataclass(frozen=True)
class LoadBalancerConfig:
    """The internal ALB of `workload.internal_alb`: its listener and who may reach it."""

    # HTTPS on 443 with this ACM certificate (in the stack's region). Required unless allow_http.
    certificate_arn: str | None = None
    # Plain HTTP on 80 instead: an explicit choice (requests and API keys cross the VPC in clear).
    allow_http: bool = False
    # IPv4 CIDRs the ALB admits; empty: the CIDR of the VPC we create (an existing VPC must list them).
    inbound_cidrs: tuple[str, ...] = ()


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
    kv_cache_dtype: str = "auto"
    # 8k context keeps KV cache per sequence small enough for useful concurrency on one GPU.
    max_model_len: int = 8192
    # vLLM's own default; leaves headroom for activations and CUDA graphs.
    gpu_memory_utilization: float = 0.90
    # Let the planner pick the cheapest instance that meets the targets.
    accelerator: str = "auto"
    # Concurrent sequences one replica must hold at the typical request size (sizes KV cache and max-num-seqs).
    target_concurrency: int = 16
    # A chat turn with some context in, a paragraph out: the shape most interactive traffic has.
    typical_input_tokens: int = 1024
    typical_output_tokens: int = 256
    # Spot first (cheaper), on-demand as the fallback when Spot has no capacity.
    capacity_types: tuple[str, ...] = ("spot", "on-demand")
    replicas: ReplicasConfig = field(default_factory=ReplicasConfig)
    # Cap on accelerators this environment's node pool may launch; None: what max replicas need.
    accelerator_limit: int | None = None
    slo: SloConfig = field(default_factory=SloConfig)
    autoscaling: AutoscalingConfig = field(default_factory=AutoscalingConfig)
    # hf: download from Hugging Face into the node's NVMe cache; s3: stream from weights_s3_uri.
    weights: str = "hf"
    # Only with weights "s3": the bucket and prefix holding the checkpoint files.
    weights_s3_uri: str | None = None
    # Secrets Manager secret NAME holding the Hugging Face token (gated models); never the token itself.
    hf_token_secret: str | None = None
    # Internal ALB in front of the Service; off by default (in-cluster clients use the ClusterIP Service).
    internal_alb: bool = False
    # The ALB's HTTPS certificate (or the explicit HTTP choice) and inbound CIDRs; only with internal_alb.
    load_balancer: LoadBalancerConfig = field(default_factory=LoadBalancerConfig)
    # Encrypted EBS snapshot of a Bottlerocket data volume that already holds the inference images: every new GPU
    # node restores it instead of pulling ~10 GB. None: nodes pull images (no snapshot to keep up to date).
    image_snapshot_id: str | None = None
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    # API key of the OpenAI endpoint (engine vllm): on by default, so no client in the VPC calls it anonymously.
    # Off (false) only where something in front already authenticates every request.
    api_key: bool = True
    # Secrets Manager secret NAME whose SecretString is the key; None: the stack generates llm-eks/<env>/api-key.
    api_key_secret: str | None = None

    def plan_request(self) -> PlanRequest:
        """The planner's input for this workload."""
        from llm_eks.catalog.models import ModelSpec
        from llm_eks.infra.plan import PlanRequest

        model: Any = self.model
        if self.model_spec is not None:
            model = ModelSpec.from_mapping({"id": self.model, **self.model_spec})
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
            weights_source="s3" if self.weights == "s3" else "nvme",
            # The SLO's inter-token latency is a sizing input: auto skips instances too slow to meet it.
            max_itl_ms=self.slo.itl_p99_ms,
        )


@dataclass(frozen=True)
class EnvironmentConfig:
    """One deployable environment: becomes the stack `LlmEks-<name>`."""

    name: str
    # Env-agnostic when both are absent: synth needs no account and no lookups.
    account: str | None = None
    region: str | None = None
    kubernetes_version: str = KUBERNETES_VERSION
    vpc: VpcConfig = field(default_factory=VpcConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    system_nodes: SystemNodesConfig = field(default_factory=SystemNodesConfig)
    # IAM roles that get cluster-admin through EKS access entries (no aws-auth ConfigMap).
    admin_role_arns: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    # Refuse synth while any image this environment runs has no digest in images.lock.json. Off by default: the
    # shipped lock is empty (no digest can be verified without the registries); turn it on once you have locked.
    require_image_digests: bool = False

    @property
    def stack_name(self) -> str:
        return f"LlmEks-{self.name}"

    @property
    def cluster_name(self) -> str:
        """Fixed, readable cluster name: Karpenter's queue, tags and IAM conditions all key on it."""
        return f"llm-eks-{self.name}"


def load_environments(context: Mapping[str, Any]) -> dict[str, EnvironmentConfig]:
    """Every environment in the CDK context key `environments`, validated."""
    raw = context.get("environments")
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("environments: missing or empty; cdk.json context must map environment names to objects")
    return {name: parse_environment(name, body) for name, body in raw.items()}


def select_environments(environments: Mapping[str, EnvironmentConfig], selected: str | None) -> list[EnvironmentConfig]:
    """All environments, or the one named by `-c env=NAME`."""
    if selected is None:
        return list(environments.values())
    if selected not in environments:
        raise ConfigError(
            f"env: {selected!r} is not allowed; {did_you_mean(selected, environments)}"
            f"defined environments: {', '.join(environments)}"
        )
    return [environments[selected]]


def parse_environment(name: str, body: Any) -> EnvironmentConfig:
    """One environment from its cdk.json object; raises ConfigError with the field path."""
    path = f"environments.{name}"
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise fail(
            "environments",
            name,
            "names are 1-20 characters: lowercase letters, digits and '-', starting with a letter",
        )
    if body is None:
        raise fail(path, body, "must be an object (use {} for an environment with every default)")
    if isinstance(body, Mapping) and "name" in body:
        raise ConfigError(f"{path}.name: not allowed; the environment's name is its key in environments")
    config = build(
        EnvironmentConfig, {"name": name, **(body or {})} if isinstance(body, Mapping) else body, path, hidden=("name",)
    )
    _validate(config, path)
    _validate_policy_cidr(body, config, path)
    return config


def _validate_policy_cidr(body: Mapping[str, Any], c: EnvironmentConfig, path: str) -> None:
    """The NetworkPolicies admit the EKS control plane (webhooks, the external metrics API) and the internal ALB from
    the VPC's CIDR, so an existing VPC must state it: the new-VPC default would silently lock the API server out."""
    if not c.vpc.imported:
        return
    vpc = body.get("vpc")
    if not isinstance(vpc, Mapping) or "cidr" not in vpc:
        raise fail(
            f"{path}.vpc.cidr",
            None,
            "an existing VPC needs its CIDR given (NetworkPolicies admit the EKS control plane and the ALB from it)",
        )
    try:
        ipaddress.IPv4Network(c.vpc.cidr)
    except ValueError:
        raise fail(f"{path}.vpc.cidr", c.vpc.cidr, "must be the existing VPC's IPv4 CIDR such as 10.0.0.0/16") from None


def _validate(c: EnvironmentConfig, path: str) -> None:
    if c.account is not None and not aws_ids.ACCOUNT.match(c.account):
        raise fail(f"{path}.account", c.account, "must be a 12-digit AWS account id")
    if c.region is not None and c.region not in REGIONS:
        raise fail(
            f"{path}.region",
            c.region,
            f"{did_you_mean(c.region, REGIONS)}must be a commercial, GovCloud or China AWS region such as us-east-1 "
            "(listed in llm_eks/aws_regions.py)",
        )
    if (c.account is None) != (c.region is None):
        raise ConfigError(f"{path}: account and region must be given together (or neither, for an env-agnostic stack)")
    if c.kubernetes_version != KUBERNETES_VERSION:
        raise fail(
            f"{path}.kubernetes_version",
            c.kubernetes_version,
            f"must be {KUBERNETES_VERSION}, the version llm-eks pins its kubectl layer and cdk8s-plus to "
            "(see llm_eks/versions.py)",
        )
    _validate_vpc(c, f"{path}.vpc")
    _validate_endpoint(c.endpoint, f"{path}.endpoint")
    _validate_system_nodes(c.system_nodes, f"{path}.system_nodes")
    for i, arn in enumerate(c.admin_role_arns):
        if not aws_ids.ROLE_ARN.match(arn):
            raise fail(
                f"{path}.admin_role_arns[{i}]",
                arn,
                "must be an IAM role ARN (arn:aws:iam::<account>:role/...)",
            )
        # IAM role names are unique ignoring case, and EKS allows one access entry per principal.
        if arn.lower() in (earlier.lower() for earlier in c.admin_role_arns[:i]):
            raise fail(
                f"{path}.admin_role_arns[{i}]", arn, "a role may be listed once (EKS allows one access entry per role)"
            )
    inputs.validate_tags(c.tags, f"{path}.tags")
    _validate_workload(c.workload, f"{path}.workload")
    _validate_load_balancer(c, path)


def _validate_vpc(c: EnvironmentConfig, path: str) -> None:
    v = c.vpc
    if v.imported:
        if not aws_ids.VPC_ID.match(v.vpc_id or ""):
            raise fail(f"{path}.vpc_id", v.vpc_id, "must be a VPC id such as vpc-0abc12345def67890")
        if len(v.availability_zones) < 2:
            raise fail(
                f"{path}.availability_zones",
                list(v.availability_zones),
                "an existing VPC needs its availability zones listed (at least 2), so synth needs no lookup",
            )
        if len(v.private_subnet_ids) != len(v.availability_zones):
            raise fail(
                f"{path}.private_subnet_ids",
                list(v.private_subnet_ids),
                f"must list one private subnet per availability zone ({len(v.availability_zones)})",
            )
        for i, subnet in enumerate((*v.private_subnet_ids, *v.public_subnet_ids)):
            if not aws_ids.SUBNET_ID.match(subnet):
                raise fail(f"{path}.subnet_ids[{i}]", subnet, "must be a subnet id such as subnet-0abc12345def67890")
        return
    if v.private_subnet_ids or v.public_subnet_ids:
        raise ConfigError(f"{path}: subnet ids are only allowed with vpc_id (an existing VPC)")
    try:
        network = ipaddress.IPv4Network(v.cidr)
    except ValueError:
        raise fail(f"{path}.cidr", v.cidr, "must be an IPv4 CIDR such as 10.0.0.0/16") from None
    if not any(network.subnet_of(private) for private in inputs.PRIVATE_RANGES):
        raise fail(
            f"{path}.cidr",
            v.cidr,
            "must be inside a private range: 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 (RFC 1918), or "
            "100.64.0.0/10 (RFC 6598); a public range would shadow those addresses on the internet",
        )
    if not 16 <= network.prefixlen <= 20:
        raise fail(f"{path}.cidr", v.cidr, "prefix length must be /16 to /20 (GPU nodes and pods need addresses)")
    zones = v.availability_zones
    if zones:
        if c.region is None:
            raise ConfigError(f"{path}.availability_zones: needs account and region (zone names belong to a region)")
        if len(zones) < 2 or any(not z.startswith(c.region) for z in zones):
            raise fail(f"{path}.availability_zones", list(zones), f"must be 2 or more zones of {c.region}")
        if v.az_count not in (VpcConfig.az_count, len(zones)):
            raise fail(f"{path}.az_count", v.az_count, f"must equal the number of availability_zones ({len(zones)})")
    elif v.az_count != 2:
        raise fail(
            f"{path}.az_count",
            v.az_count,
            "must be 2 unless availability_zones are listed (with account and region): "
            "an env-agnostic stack resolves only 2 zones without a context lookup",
        )


def _validate_endpoint(e: EndpointConfig, path: str) -> None:
    if e.access not in ("private", "public"):
        raise fail(f"{path}.access", e.access, "must be 'private' or 'public' (public is limited to public_cidrs)")
    if e.access == "private" and e.public_cidrs:
        raise ConfigError(f"{path}.public_cidrs: only allowed with access 'public'")
    if e.access == "public" and not e.public_cidrs:
        raise fail(f"{path}.public_cidrs", [], "access 'public' needs at least one CIDR to allow")
    for i, cidr in enumerate(e.public_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            raise fail(f"{path}.public_cidrs[{i}]", cidr, "must be an IPv4 CIDR such as 198.51.100.0/24") from None
        if network.prefixlen == 0:
            raise fail(f"{path}.public_cidrs[{i}]", cidr, "must not be the whole internet; list your own ranges")
    inputs.validate_public_cidrs(e.public_cidrs, f"{path}.public_cidrs")


def _validate_system_nodes(s: SystemNodesConfig, path: str) -> None:
    if not _INSTANCE_TYPE.match(s.instance_type):
        raise fail(f"{path}.instance_type", s.instance_type, "must be an EC2 instance type such as m7i.xlarge")
    if s.instance_type.split(".")[0][0] in ("g", "p") or s.instance_type.startswith(("inf", "trn")):
        raise fail(
            f"{path}.instance_type",
            s.instance_type,
            "must be a CPU instance type (GPU capacity is Karpenter's)",
        )
    if s.min_size < 2:
        raise fail(
            f"{path}.min_size",
            s.min_size,
            "must be at least 2 (Karpenter's 2 replicas need 2 nodes in 2 AZs)",
        )
    if not s.min_size <= s.desired_size <= s.max_size:
        raise fail(
            f"{path}.desired_size",
            s.desired_size,
            f"must be between min_size ({s.min_size}) and max_size ({s.max_size})",
        )
    if not 20 <= s.disk_gib <= 1000:
        raise fail(f"{path}.disk_gib", s.disk_gib, "must be 20 to 1000")


def _validate_load_balancer(c: EnvironmentConfig, env_path: str) -> None:
    """HTTPS with a named certificate, or HTTP by explicit choice; inbound CIDRs that never include the internet;
    subnets of its own."""
    lb, path, vpc_path = c.workload.load_balancer, f"{env_path}.workload.load_balancer", f"{env_path}.vpc"
    if not c.workload.internal_alb:
        if lb != LoadBalancerConfig():
            raise ConfigError(f"{path}: only allowed with internal_alb: true")
        if c.vpc.load_balancer_cidrs:
            raise ConfigError(f"{vpc_path}.load_balancer_cidrs: only allowed with workload.internal_alb: true")
        return
    _validate_load_balancer_subnets(c.vpc, vpc_path)
    if lb.certificate_arn is not None:
        match = aws_ids.ACM_CERTIFICATE_ARN.match(lb.certificate_arn)
        if not match:
            raise fail(
                f"{path}.certificate_arn",
                lb.certificate_arn,
                "must be an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)",
            )
        if c.region is not None and match.group(1) != c.region:
            raise fail(f"{path}.certificate_arn", lb.certificate_arn, f"must be a certificate in {c.region}, the ALB's")
        if lb.allow_http:
            raise fail(
                f"{path}.allow_http",
                True,
                "with certificate_arn the ALB serves HTTPS only (an HTTP listener, even one that redirects, "
                "receives the first request and its API key in clear)",
            )
    elif not lb.allow_http:
        raise fail(
            f"{path}.certificate_arn",
            None,
            "internal_alb needs an ACM certificate ARN for HTTPS, or allow_http: true to serve plain HTTP",
        )
    if c.vpc.imported and not lb.inbound_cidrs:
        raise fail(
            f"{path}.inbound_cidrs",
            [],
            "an existing VPC's CIDR is not known at synth: list the IPv4 CIDRs that may reach the ALB",
        )
    for i, cidr in enumerate(lb.inbound_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr) if "/" in cidr else None
        except ValueError:
            network = None
        if network is None:
            raise fail(f"{path}.inbound_cidrs[{i}]", cidr, "must be an IPv4 network such as 10.0.0.0/16")
        if network.prefixlen == 0:
            raise fail(f"{path}.inbound_cidrs[{i}]", cidr, "must not be the whole internet; list your own ranges")


def _validate_load_balancer_subnets(v: VpcConfig, path: str) -> None:
    """The internal ALB's own subnets: inside the VPC, one per AZ, big enough for an ALB."""
    field = f"{path}.load_balancer_cidrs"
    if v.imported and not v.load_balancer_cidrs:
        raise fail(
            field,
            [],
            "an existing VPC must list the CIDRs of its internal ALB subnets (tagged kubernetes.io/role/internal-elb, "
            "holding no pods): the serving port admits the ALB by them",
        )
    if v.load_balancer_cidrs and len(v.load_balancer_cidrs) < 2:
        raise fail(field, list(v.load_balancer_cidrs), "an ALB needs subnets in at least 2 availability zones")
    vpc = ipaddress.IPv4Network(v.cidr)
    for i, cidr in enumerate(v.load_balancer_cidrs):
        try:
            network = ipaddress.IPv4Network(cidr)
        except ValueError:
            raise fail(f"{field}[{i}]", cidr, "must be an IPv4 network such as 10.0.255.0/26") from None
        if not network.subnet_of(vpc) or not 16 <= network.prefixlen <= 27:
            raise fail(f"{field}[{i}]", cidr, f"must be a /16 to /27 inside the VPC's {v.cidr} (an ALB needs a /27)")


def _validate_workload(w: WorkloadConfig, path: str) -> None:
    if w.engine not in ENGINES:
        raise fail(f"{path}.engine", w.engine, f"must be one of {', '.join(ENGINES)}")
    inputs.validate_model_spec(w, path)
    if not w.capacity_types or any(t not in CAPACITY_TYPES for t in w.capacity_types):
        raise fail(
            f"{path}.capacity_types",
            list(w.capacity_types),
            f"must be a non-empty subset of {list(CAPACITY_TYPES)}",
        )
    if len(set(w.capacity_types)) != len(w.capacity_types):
        raise fail(f"{path}.capacity_types", list(w.capacity_types), "must not repeat a capacity type")
    r = w.replicas
    if r.min < 0 or (r.min == 0 and w.autoscaling.scale_to_zero is None):
        raise fail(
            f"{path}.replicas.min", r.min, "must be at least 1 (0 only with autoscaling.scale_to_zero working hours)"
        )
    if r.max < max(r.min, 1):
        raise fail(f"{path}.replicas.max", r.max, f"must be at least replicas.min ({r.min}) and at least 1")
    if r.max > 64:
        raise fail(f"{path}.replicas.max", r.max, "must be at most 64")
    if w.accelerator_limit is not None and w.accelerator_limit < 1:
        raise fail(f"{path}.accelerator_limit", w.accelerator_limit, "must be a positive number of accelerators")
    inputs.validate_slo(w.slo, f"{path}.slo")
    a = w.autoscaling
    inputs.validate_scale_to_zero(w, path)
    if a.waiting_per_replica < 1:
        raise fail(f"{path}.autoscaling.waiting_per_replica", a.waiting_per_replica, "must be at least 1")
    if not 0 < a.kv_cache_usage < 1:
        raise fail(f"{path}.autoscaling.kv_cache_usage", a.kv_cache_usage, "must be between 0 and 1 (exclusive)")
    if w.weights not in WEIGHT_SOURCES:
        raise fail(f"{path}.weights", w.weights, f"must be one of {', '.join(WEIGHT_SOURCES)}")
    if w.weights == "s3":
        if w.weights_s3_uri is None:
            raise fail(f"{path}.weights_s3_uri", w.weights_s3_uri, "weights 's3' needs an s3://bucket/prefix URI")
        problem = aws_ids.s3_uri_problem(w.weights_s3_uri)
        if problem is not None:
            raise fail(f"{path}.weights_s3_uri", w.weights_s3_uri, problem)
    elif w.weights_s3_uri is not None:
        raise ConfigError(f"{path}.weights_s3_uri: only allowed with weights 's3'")
    if w.hf_token_secret is not None and (
        not aws_ids.SECRET_NAME.match(w.hf_token_secret) or w.hf_token_secret.startswith(("hf_", "arn:"))
    ):
        raise fail(
            f"{path}.hf_token_secret",
            "hf_…" if w.hf_token_secret.startswith("hf_") else w.hf_token_secret,
            "must be the NAME of a Secrets Manager secret holding the token (never the token, never an ARN)",
        )
    if w.image_snapshot_id is not None and not aws_ids.SNAPSHOT_ID.match(w.image_snapshot_id):
        raise fail(
            f"{path}.image_snapshot_id",
            w.image_snapshot_id,
            "must be an EBS snapshot id such as snap-0123456789abcdef0",
        )
    _validate_api_key(w, path)
    b = w.benchmark
    if b.request_rate <= 0:
        raise fail(f"{path}.benchmark.request_rate", b.request_rate, "must be a positive number of requests/s")
    if not 1 <= b.num_prompts <= 100_000:
        raise fail(f"{path}.benchmark.num_prompts", b.num_prompts, "must be 1 to 100000")
    if b.request_rate > b.num_prompts:
        raise fail(
            f"{path}.benchmark.request_rate",
            b.request_rate,
            f"must be at most num_prompts ({b.num_prompts}) per second; a higher rate sends every prompt in the "
            "first second already",
        )


def _validate_api_key(w: WorkloadConfig, path: str) -> None:
    if w.api_key_secret is None:
        return
    if not w.api_key:
        raise ConfigError(f"{path}.api_key_secret: only allowed with api_key true")
    if w.engine != "vllm":
        raise fail(
            f"{path}.api_key_secret",
            w.api_key_secret,
            "only engine 'vllm' checks an API key (Ray Serve LLM has none; NetworkPolicies guard it)",
        )
    if not aws_ids.SECRET_NAME.match(w.api_key_secret) or w.api_key_secret.startswith("arn:"):
        raise fail(
            f"{path}.api_key_secret",
            w.api_key_secret,
            "must be the NAME of a Secrets Manager secret holding the key (never the key, never an ARN)",
        )
