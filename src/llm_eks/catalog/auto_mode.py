"""EKS Auto Mode as the catalog knows it: the accelerated families it launches, which of them pull images with its
built-in parallel pull, its node lifetime and AMI cadence, and its management fee per instance type.

Sources (EKS User Guide, read 2026-12-04):
- "Learn about Amazon EKS Auto Mode managed instances" (docs.aws.amazon.com/eks/latest/userguide/
  automode-learn-instances.html): the instance families Auto Mode launches (its table's row "Accelerated Computing
  (Trn/P/Inf/G)": trn2, trn1, trn1n, p6-b200, p6-b300, p5, p5e, p5en, p4d, p4de, p3, p3dn, inf2, inf1, g7e, g6, gr6,
  g6e, g5, g5g, g4ad, g4dn), "Generally, EKS releases a new AMI each week", IMDSv2 with hop limit 1 enforced, and
  instance-store NVMe formatted as RAID0 ephemeral storage when the NodeClass's ephemeral size is below it.
- "Manage compute for AI/ML workloads with EKS Auto Mode and Karpenter" (awsdocs/amazon-eks-user-guide@80436be5,
  latest/ug/ml/ml-node-pools.adoc), its comparison table: "SOCI parallel pull included in all G, P, and Trn family
  instances", "21-day maximum node lifetime", "Bottlerocket only", spot interruptions handled natively, "EKS Auto
  Mode management fee in addition to underlying EC2 instance cost".
- "Automate cluster infrastructure with EKS Auto Mode" (automode.adoc): nodes "have a maximum lifetime of 21 days
  (which you can reduce)"; "Create a Node Pool for EKS Auto Mode" (create-node-pool.adoc@01385604): drift replaces
  nodes "when a new Auto Mode AMI is released, which occurs roughly once per week".

The fee: aws.amazon.com/eks/pricing states it per instance type and Region. No copy of that table was readable
where this was written, so FEE_USD_PER_HOUR is empty and every plan prints "Auto Mode fee: unknown". It is never a
share of the EC2 price (third-party pages quote a flat ~12 %, which is not how AWS prices it): add a type here only
with the figure, its Region and the date it was read from AWS's page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

# The accelerated families Auto Mode launches (the managed-instances page's table).
ACCELERATED_FAMILIES = frozenset(
    {
        "trn2",
        "trn1",
        "trn1n",
        "p6-b200",
        "p6-b300",
        "p5",
        "p5e",
        "p5en",
        "p4d",
        "p4de",
        "p3",
        "p3dn",
        "inf2",
        "inf1",
        "g7e",
        "g6",
        "gr6",
        "g6e",
        "g5",
        "g5g",
        "g4ad",
        "g4dn",
    }
)
# "Generally, EKS releases a new AMI each week": each release drifts every Auto Mode node.
AMI_RELEASE_DAYS = 7
# The lifetime after which Auto Mode replaces a node whatever the NodePool says.
MAX_NODE_LIFETIME_DAYS = 21
# Instance type -> (USD per instance-hour, Region, date read from aws.amazon.com/eks/pricing). Empty: see above.
FEE_USD_PER_HOUR: Mapping[str, tuple[float, str, str]] = MappingProxyType({})
FEE_UNKNOWN = "Auto Mode fee: unknown"


def family_of(instance_type: str) -> str:
    """The family of an instance type (`p6-b200.48xlarge` -> `p6-b200`)."""
    return instance_type.partition(".")[0]


def launches(family: str) -> bool:
    """Whether Auto Mode launches instances of this family."""
    return family in ACCELERATED_FAMILIES


def unsupported_reason(family: str) -> str | None:
    """Why Auto Mode cannot run a family, or None when it can."""
    if launches(family):
        return None
    return (
        f"{family} is not an EKS Auto Mode instance family (its accelerated families: "
        f"{', '.join(sorted(ACCELERATED_FAMILIES))})"
    )


def parallel_pull(family: str) -> bool:
    """Whether Auto Mode's nodes of this family pull images with its built-in SOCI parallel pull (G, P and Trn)."""
    letters = re.match(r"[a-z]*", family)
    prefix = letters.group(0) if letters else ""
    return prefix == "trn" or prefix.startswith(("g", "p"))


def fee_usd_per_hour(instance_type: str) -> float | None:
    """Auto Mode's management fee per instance-hour where AWS's page stated it (FEE_USD_PER_HOUR), else None."""
    row = FEE_USD_PER_HOUR.get(instance_type)
    return None if row is None else row[0]


def fee_text(instance_type: str) -> str:
    """The fee as a plan prints it beside the instance's $/h."""
    row = FEE_USD_PER_HOUR.get(instance_type)
    if row is None:
        return FEE_UNKNOWN
    usd, region, read = row
    return f"Auto Mode fee: ${usd:g}/h ({region}, EKS pricing page of {read})"
