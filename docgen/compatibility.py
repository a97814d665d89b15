"""The compatibility table: every pinned upstream version (llm_eks/versions.py and the Python packages that move
with them: constraints.txt's pin and pyproject.toml's range), with the reason and source written above each, grouped
by what must move together."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from docgen.comments import assignment_comments
from docgen.markdown import cell
from llm_eks import versions

ROOT = Path(__file__).resolve().parents[1]

# What moves together, and the constants of versions.py each group holds (every constant is in one group; a test
# fails on a new constant that is not placed).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Kubernetes minor (EKS, kubectl layer, node AMIs)",
     ("KUBERNETES_MINOR", "KUBERNETES_VERSION", "BOTTLEROCKET_AMI_VERSION", "AL2023_AMI_VERSION", "PAUSE_IMAGE")),
    ("Karpenter (controller and CRD charts at one version)", ("KARPENTER_VERSION",)),
    ("Serving engines", ("VLLM_IMAGE", "RAY_VERSION", "RAY_LLM_IMAGE")),
    ("Neuron engines (one per chip family, each on its own vLLM release)", ("NEURON_NXDI_IMAGE", "NEURON_VLLM_IMAGE")),
    ("GPU device software", ("NVIDIA_DEVICE_PLUGIN_CHART_VERSION", "DCGM_EXPORTER_CHART_VERSION",
                             "NEURON_HELM_CHART_VERSION", "NEURON_MONITOR_IMAGE", "EFA_DEVICE_PLUGIN_CHART_VERSION")),
    ("Cluster add-on charts", ("KEDA_CHART_VERSION", "KUBE_PROMETHEUS_STACK_CHART_VERSION",
                               "PROMETHEUS_OPERATOR_CRDS_CHART_VERSION", "THANOS_IMAGE",
                               "KUBERAY_OPERATOR_CHART_VERSION", "LWS_CHART_VERSION",
                               "SECRETS_STORE_CSI_DRIVER_CHART_VERSION", "SECRETS_STORE_CSI_PROVIDER_AWS_CHART_VERSION",
                               "AWS_LOAD_BALANCER_CONTROLLER_CHART_VERSION")),
    ("Gateway (Envoy Gateway and its data plane, rate-limit service and counters; Envoy AI Gateway; Gateway API, "
     "Inference Extension, the endpoint picker)",
     ("ENVOY_GATEWAY_VERSION", "ENVOY_PROXY_IMAGE", "RATELIMIT_IMAGE", "VALKEY_IMAGE", "AI_GATEWAY_VERSION",
      "GATEWAY_API_VERSION", "GAIE_VERSION", "LLMD_VERSION", "EPP_IMAGE", "DISAGG_SIDECAR_IMAGE")),
    ("Secrets sync", ("EXTERNAL_SECRETS_CHART_VERSION",)),
)  # fmt: skip
# The Python packages whose pins follow the Kubernetes minor or define the CDK (pyproject.toml).
PACKAGES = ("aws-cdk-lib", "cdk8s", "aws-cdk.lambda-layer-kubectl-v", "cdk-nag")


def package_pins() -> dict[str, tuple[str, str]]:
    """name -> (exact version in constraints.txt, compatible range in pyproject.toml) of the packages in PACKAGES."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    exact = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    pins = {}
    for spec in project["dependencies"]:
        requirement = Requirement(spec)
        if requirement.name.startswith(PACKAGES):
            pins[requirement.name] = (exact[requirement.name], str(requirement.specifier))
    return pins


def ungrouped() -> list[str]:
    """Constants of versions.py that no group names."""
    placed = {name for _, names in GROUPS for name in names}
    return [name for name, _ in assignment_comments(Path(versions.__file__)) if name not in placed]


def compatibility_table() -> str:
    reasons = dict(assignment_comments(Path(versions.__file__)))
    out: list[str] = []
    for title, names in GROUPS:
        out += [f"### {title}", "", "| pin | version | why this one, and where it was read |", "|---|---|---|"]
        for name in names:
            value = getattr(versions, name)
            why = reasons.get(name) or "derived from the row above"
            out.append(f"| `{name}` | `{value}` | {cell(why)} |")
        out.append("")
    out += ["### Python packages that move with them (constraints.txt, pyproject.toml)", ""]
    out += ["| package | version | the wheel accepts |", "|---|---|---|"]
    out += [f"| `{name}` | `{version}` | `{accepts}` |" for name, (version, accepts) in package_pins().items()]
    minor = versions.KUBERNETES_MINOR
    suffixed = [n for n in package_pins() if re.search(r"-v\d+$", n)]
    wrong = [n for n in suffixed if not n.endswith(f"-v{minor}")]
    if wrong:  # the build fails rather than publish a table that contradicts itself
        raise ValueError(f"pyproject.toml pins {', '.join(wrong)}, but KUBERNETES_MINOR is {minor}")
    out += ["", f"The packages named for a Kubernetes minor ({', '.join(f'`{n}`' for n in suffixed)}) carry "
            f"`{minor}`, the minor of `KUBERNETES_MINOR`.", ""]  # fmt: skip
    return "\n".join(out)
