#!/usr/bin/env python3
"""A plain cdk8s app (no AWS CDK) that takes llm-eks's vLLM chart and extends it with cdk8s-plus's own API: a
log-shipping sidecar and the volume it shares with nothing else, then runs llm-eks's synth-time checks and writes
the YAML, as a GitOps pipeline would.

With llm-eks installed (docs/getting-started/install.md) and Node 24 or 22 on PATH:

    python3 app.py [OUTDIR]   # OUTDIR/*.k8s.yaml (default dist/), one file per chart

The chart's objects are cdk8s-plus objects (VllmChart.PUBLIC_ATTRIBUTES): `chart.deployment` is a
`cdk8s_plus_35.Deployment`, so `add_container`, `add_volume` and `mount` work as on any cdk8s-plus workload. What the
chart built stays as it was (selector, vLLM container, probes); what you add is checked like the rest: a container
that does not fit the GPU node, say, or one the namespace's restricted Pod Security level forbids (privileged, root,
keeping capabilities), fails here with the one-line finding `cdk synth` would report.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cdk8s
import cdk8s_plus_35 as kplus

from llm_eks.config import load_environments
from llm_eks.config.plans import plan_workloads
from llm_eks.infra.charts import build_charts
from llm_eks.infra.workloads import build_workloads
from llm_eks.manifests.app_checks import ChecksFailed, check_app
from llm_eks.manifests.vllm import VllmChart

HERE = Path(__file__).resolve().parent
# What only a deploy knows (as for `llm-eks manifests`): the Karpenter node role and the cluster security group.
NODE_ROLE_NAME = "KarpenterNodeRole-team-a"
SECURITY_GROUP_ID = "sg-0123456789abcdef0"


def platform(app: cdk8s.App) -> VllmChart:
    """The environment's charts (node pools, the vLLM workload, its autoscaling and monitoring), as `llm-eks
    manifests` builds them; returns the vLLM chart."""
    context = json.loads((HERE / "environment.json").read_text())
    (config,) = load_environments(context).values()
    workloads = build_workloads(config, plan_workloads(config), region=config.region)
    charts = build_charts(
        app, config, workloads, node_role_name=NODE_ROLE_NAME, security_group_ids=(SECURITY_GROUP_ID,)
    )
    (chart,) = (c.chart for c in charts if isinstance(c.chart, VllmChart))
    return chart


def add_log_shipper(chart: VllmChart, *, memory_mib: int = 128) -> kplus.Container:
    """A sidecar beside vLLM that ships what lands in its spool volume; `memory_mib`: its memory request and limit."""
    deployment = chart.deployment
    assert deployment is not None  # a single-node replica: a Deployment serves (a LeaderWorkerSet otherwise)
    spool = kplus.Volume.from_empty_dir(chart, "log-spool", "log-spool", size_limit=cdk8s.Size.gibibytes(1))
    deployment.add_volume(spool)
    shipper = deployment.add_container(
        name="log-shipper",
        image="public.ecr.aws/aws-observability/aws-for-fluent-bit:3.2.1",
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        resources=kplus.ContainerResources(
            cpu=kplus.CpuResources(request=kplus.Cpu.millis(100)),
            memory=kplus.MemoryResources(
                request=cdk8s.Size.mebibytes(memory_mib), limit=cdk8s.Size.mebibytes(memory_mib)
            ),
        ),
        # Restricted, as the namespace enforces: non-root, no escalation, every capability dropped.
        security_context=kplus.ContainerSecurityContextProps(
            ensure_non_root=True,
            user=1000,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=kplus.ContainerSecutiryContextCapabilities(drop=[kplus.Capability.ALL]),
        ),
        liveness=kplus.Probe.from_command(["/bin/true"], period_seconds=cdk8s.Duration.seconds(30)),
    )
    shipper.mount("/spool", spool)
    return shipper


def main() -> int:
    app = cdk8s.App(outdir=sys.argv[1] if len(sys.argv) > 1 else str(HERE / "dist"))
    add_log_shipper(platform(app))
    try:
        check_app(app)
    except ChecksFailed as err:
        print(err, file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
