"""Reserved capacity of a GPU pool: the capacity reservations its EC2NodeClass selects (Karpenter 1.14.1).

Karpenter models On-Demand Capacity Reservations and Capacity Blocks for ML as capacity type `reserved`, uses only
reservations a node class selects ("Karpenter does not support open matching for ODCRs",
website/content/en/docs/tasks/odcrs.md@bde0065), prefers them over Spot and on-demand, and needs the
`ReservedCapacity` feature gate (Beta, on by default since 1.6; llm-eks sets it explicitly). A Capacity Block's
nodes are deleted, and so drained, 40 minutes before the block ends, 10 before EC2 begins terminating them
(pkg/controllers/capacityreservation/expiration/controller.go; `capacityReservationExpirationPeriod = time.Minute
* 40` in pkg/apis/v1/ec2nodeclass_status.go; the controller checks every minute). So a Capacity Block pool's
terminationGracePeriod is at most CAPACITY_BLOCK_DRAIN: its drain ends before EC2 takes the instances, whatever a
PodDisruptionBudget says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from llm_eks.aws_ids import (
    ACCOUNT,
    CAPACITY_BLOCK,
    CAPACITY_RESERVATION_ID,
    MAX_RESERVATION_TAGS,
    MAX_RESERVATION_TERMS,
    RESERVATION_TYPES,
)
from llm_eks.error_codes import E123
from llm_eks.errors import fail

RESERVED = "reserved"
# Karpenter starts at 40 minutes before the end (up to a minute late: it checks once a minute); EC2 at 30. Eight
# minutes of drain leaves a minute of margin for the instance to terminate.
CAPACITY_BLOCK_DRAIN = "8m"
CAPACITY_BLOCK_DRAIN_SECONDS = 8 * 60
_DURATION_PART = re.compile(r"([0-9]+)(h|m|s)")


def duration_seconds(text: str) -> int:
    """Seconds of a Karpenter duration such as 10m or 1h30m (validated by Disruption already)."""
    return sum(int(n) * {"h": 3600, "m": 60, "s": 1}[unit] for n, unit in _DURATION_PART.findall(text))


@dataclass(frozen=True)
class ReservedCapacity:
    """The capacity reservations one GPU pool launches into first."""

    # Reservations by id (cr-...), Capacity Blocks included; each id is one selector term.
    ids: tuple[str, ...] = ()
    # Or by tags (one more term; "*" matches any value), only those owned by owner_id (required with tags: Karpenter
    # filters by owner only when the term has ownerID, and reservations other accounts share would match too).
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    owner_id: str | None = None
    # default (ODCR) or capacity-block: a Capacity Block pool drains within CAPACITY_BLOCK_DRAIN.
    reservation_type: str = "default"

    @property
    def capacity_block(self) -> bool:
        return self.reservation_type == CAPACITY_BLOCK

    def selector_terms(self) -> list[dict[str, Any]]:
        """EC2NodeClass `capacityReservationSelectorTerms`: one term per id, one for the tags (ORed)."""
        terms: list[dict[str, Any]] = [{"id": reservation_id} for reservation_id in self.ids]
        if self.tags:
            term: dict[str, Any] = {"tags": dict(self.tags)}
            if self.owner_id is not None:
                term["ownerID"] = self.owner_id
            terms.append(term)
        return terms

    def validate(self, path: str) -> None:
        if not self.ids and not self.tags:
            raise fail(E123, f"{path}.ids", [], "list the reservations (cr-...) or select them by tags")
        for i, reservation_id in enumerate(self.ids):
            if not CAPACITY_RESERVATION_ID.match(reservation_id):
                raise fail(
                    E123,
                    f"{path}.ids[{i}]",
                    reservation_id,
                    "must be a capacity reservation id like cr-0123456789abcdef0",
                )
        if len(self.selector_terms()) > MAX_RESERVATION_TERMS:
            raise fail(
                E123, f"{path}.ids", len(self.ids), f"Karpenter takes at most {MAX_RESERVATION_TERMS} selector terms"
            )
        if len(self.tags) > MAX_RESERVATION_TAGS or any(not k or not v for k, v in self.tags.items()):
            raise fail(
                E123,
                f"{path}.tags",
                dict(self.tags),
                f"must be 1-{MAX_RESERVATION_TAGS} tags with non-empty keys and values",
            )
        if self.owner_id is not None and (not self.tags or not ACCOUNT.match(self.owner_id)):
            raise fail(E123, f"{path}.owner_id", self.owner_id, "must be a 12-digit account id, and only with tags")
        if self.tags and self.owner_id is None:
            raise fail(
                E123,
                f"{path}.owner_id",
                None,
                "required with tags: without it they also match reservations other accounts share",
            )
        if self.reservation_type not in RESERVATION_TYPES:
            raise fail(
                E123,
                f"{path}.reservation_type",
                self.reservation_type,
                f"must be one of {', '.join(RESERVATION_TYPES)}",
            )
