"""What would fit instead: when nothing fits a request, the changes a user can make, each planned by the planner's own
search, and listed cheapest first in the one-line error.

The candidates, in the order of how much they change the request (the tie-break after cost):
    context      the longest round max_model_len (a power of two, or 1.5 times one) that plans, found by bisection
    KV cache     kv_cache_dtype fp8
    weights      weight_format fp8 (vLLM quantizes a 16-bit checkpoint at load), with an fp8 KV cache, or awq-int4
    instance     a larger size of the same family on one node, or the instance type `auto` picks
    nodes        a larger max_nodes_per_replica, a size of the family with EFA spanning nodes, or TCP between nodes
Each is kept only when its plan exists: an fp8 weight format where the GPU has no kernel for it fails like any other
request, and an fp8 KV cache runs on every catalog GPU (SM80 and up; below SM89 vLLM 0.33 selects FlashInfer for it,
v1/attention/backends/flashinfer.py, as its FlashAttention 2 and Triton backends refuse it). A change that adds to one
already kept is dropped, and so is a larger size of the family when the type auto picks costs no more.

Listed: one-node changes first, then replicas spanning nodes, accepting TCP last; within each, by the on-demand $/h of
the replicas that hold target_concurrency sequences of the typical size, then by the order above. The planner names
a change by its PlanRequest field (`max_model_len 32768`); the CLI renders the same error with its options and the
config with cdk.json paths (NoFitError.render).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_eks.catalog.accelerators import CATALOG as INSTANCE_CATALOG
from llm_eks.catalog.accelerators import InstanceType
from llm_eks.error_codes import E209
from llm_eks.errors import ConfigError
from llm_eks.planner.plan_warnings import WARN_NO_EFA
from llm_eks.planner.request import MAX_NODES_PER_REPLICA, PlanRequest
from llm_eks.planner.result import TIMES, Plan

# How a caller names "set field to value" (a CLI flag, a cdk.json path); None: the caller has no such setting.
Setting = Callable[[str, Any], "str | None"]

# Round context lengths: powers of two and 1.5 times them, from 256 tokens to 24M.
ROUND_LENGTHS = tuple(sorted({2**k for k in range(8, 25)} | {3 * 2**k for k in range(7, 23)}))

# At most this many changes in one error: the cheapest ones.
MAX_FIXES = 5

# The order of how much a change asks of the user (the tie-break after cost).
CONTEXT, KV_CACHE, WEIGHTS, WEIGHTS_AND_KV, AWQ, LARGER, AUTO, NODES, EFA, TCP = range(10)


def bare_setting(field: str, value: Any) -> str:
    """The planner's own naming, as its other messages use: `max_model_len 32768`."""
    if field == "allow_without_efa":
        return f"acknowledged_warnings {WARN_NO_EFA} (allow_without_efa)"
    return f"{field} {value}"


@dataclass(frozen=True)
class Fix:
    """A change to the request and the plan it gives."""

    changes: tuple[tuple[str, Any], ...]
    plan: Plan
    kind: int

    @property
    def replicas(self) -> int:
        """Replicas that together run target_concurrency sequences: each what its KV cache holds at the typical size,
        capped by max_num_seqs when the request gives it (per data-parallel rank), as cost.replicas_for_target."""
        p, r = self.plan, self.plan.request
        cap = r.max_num_seqs * p.data_parallel_size if r.max_num_seqs is not None else r.target_concurrency
        return math.ceil(r.target_concurrency / max(1, min(p.max_concurrency_typical, cap)))

    @property
    def usd_per_hour(self) -> float | None:
        """On-demand $/h of those replicas; None without a price."""
        per_replica = self.plan.cost_per_replica_hour
        return None if per_replica is None else self.replicas * per_replica

    def cheaper_than(self, other: Fix) -> bool:
        """At most `other`'s $/h (unpriced counts as dearest)."""
        return (self.usd_per_hour or math.inf) <= (other.usd_per_hour or math.inf)

    def sort_key(self) -> tuple[bool, bool, float, int]:
        """Accepting TCP last, then replicas spanning nodes, then the cost, then how much the request changes."""
        cost = self.usd_per_hour
        return (self.kind == TCP, self.plan.nodes_per_replica > 1, math.inf if cost is None else cost, self.kind)

    def text(self, setting: Setting) -> str | None:
        """`<changes>: <where it runs>, <sequences a replica holds>, <$/h>`; None when a change has no setting."""
        named = [setting(field, value) for field, value in self.changes]
        if any(n is None for n in named):
            return None
        p = self.plan
        parts = []
        if p.nodes_per_replica > 1:
            parts.append(f"{p.nodes_per_replica}{TIMES} {p.instance_type} over {'EFA' if p.instance.efa else 'TCP'}")
        elif "accelerator" not in dict(self.changes):
            parts.append(p.instance_type)
        seqs = p.max_concurrency_typical
        parts.append(f"{seqs} sequence{'s' if seqs != 1 else ''} a replica")
        cost = self.usd_per_hour
        price = "no on-demand price" if cost is None else f"${cost:.2f}/h"
        parts.append(f"{self.replicas} replicas, {price}" if self.replicas > 1 else price)
        # Options follow one another as typed (--weight-format fp8 --kv-cache-dtype fp8); settings join with "and".
        changes = [n for n in named if n is not None]
        if self.kind == CONTEXT:
            changes[-1] += " (the longest round length that fits)"
        joined = " ".join(changes) if all(n.startswith("--") for n in changes) else " and ".join(changes)
        return f"{joined}: {', '.join(parts)}"


class NoFitError(ConfigError):
    """Nothing fits the request: why, and the changes that would (cheapest first). `str()` names them by PlanRequest
    field; `render(setting)` by the caller's own names."""

    def __init__(self, path: str, value: Any, reason: str, fixes: tuple[Fix, ...], tried: str) -> None:
        self.path, self.value, self.reason, self.fixes, self.tried = path, value, reason, fixes, tried
        super().__init__(E209, self.render(bare_setting))

    def render(self, setting: Setting) -> str:
        texts = [t for t in (fix.text(setting) for fix in self.fixes) if t is not None][:MAX_FIXES]
        if texts:
            listed = "; ".join(f"{i}) {t}" for i, t in enumerate(texts, 1))
            r = self.fixes[0].plan.request
            advice = (
                f"what fits instead, cheapest first ($/h to hold target_concurrency {r.target_concurrency} sequences "
                f"of {r.typical_tokens} tokens): {listed}"
            )
        else:
            advice = f"nothing the planner tried fits either ({self.tried})"
        return f"{self.path}: {self.value!r} is not allowed; {self.reason}; {advice}"


def find_fixes(
    request: PlanRequest,
    fmt: str,
    inst: InstanceType | None,
    planner: Callable[[PlanRequest], Plan],
    blocked_by_efa: bool = False,
) -> tuple[tuple[Fix, ...], str]:
    """The changes that make `request` plan (on `inst`, or with accelerator auto when None), cheapest first, and
    what was tried. `planner` plans without looking for fixes of its own; `fmt` is the resolved weight format;
    `blocked_by_efa`: a replica would span nodes of `inst`, which has no EFA."""
    search = _Search(request, planner)
    _model_fixes(search, fmt)
    _placement_fixes(search, inst, blocked_by_efa)
    return tuple(sorted(_least_changes(search.found), key=Fix.sort_key)), ", ".join(search.tried)


def _model_fixes(search: _Search, fmt: str) -> None:
    """What would fit without moving the replica: a shorter context, an fp8 KV cache, smaller weights."""
    r, spec = search.request, search.request.spec
    max_len = r.resolved_max_model_len
    lengths = [n for n in ROUND_LENGTHS if r.typical_tokens <= n < max_len]
    if lengths:
        search.tried.append("a shorter max_model_len")
        search.longest_context(lengths)
    fp8_kv = r.kv_cache_dtype == "auto"
    if fp8_kv:
        search.tried.append("kv_cache_dtype fp8")
        search.attempt(KV_CACHE, kv_cache_dtype="fp8")
    # A 16-bit checkpoint (or a float32 one served at 16 bits): vLLM makes fp8 of it at load.
    if spec.quantization is None and fmt == "bf16":
        search.tried.append("weight_format fp8")
        if search.attempt(WEIGHTS, weight_format="fp8") is None and fp8_kv:
            search.attempt(WEIGHTS_AND_KV, weight_format="fp8", kv_cache_dtype="fp8")
    if spec.quantization is None and spec.awq_checkpoint is not None and fmt != "awq-int4":
        search.tried.append("weight_format awq-int4")
        search.attempt(AWQ, weight_format="awq-int4")


def _placement_fixes(search: _Search, inst: InstanceType | None, blocked_by_efa: bool) -> None:
    """What would fit elsewhere: another instance type, more nodes per replica, nodes with EFA (or TCP accepted)."""
    r = search.request
    if inst is not None and not r.fixed_shape:
        search.tried.append("other instance types")
        larger = search.first_size(LARGER, _family(inst), one_node=True)
        auto = search.plan(accelerator="auto")
        # The type auto picks, planned as named (what setting it gives); it replaces a larger size no cheaper.
        auto_fix = None
        if auto is not None and auto.instance_type != inst.instance_type:
            auto_fix = search.attempt(AUTO, accelerator=auto.instance_type)
        if larger is not None and auto_fix is not None and auto_fix.cheaper_than(larger):
            search.found.remove(larger)
    nodes = [n for n in (2, 4, 8, MAX_NODES_PER_REPLICA) if n > r.max_nodes_per_replica]
    if nodes and not r.fixed_shape:
        search.tried.append("more nodes per replica")
        for n in nodes:
            if search.attempt(NODES, max_nodes_per_replica=n) is not None:
                break
    if inst is not None and blocked_by_efa:
        search.first_size(EFA, [row for row in _family(inst) if row.efa], one_node=False)
        if not r.allow_without_efa:
            search.attempt(TCP, allow_without_efa=True)


class _Search:
    """The request, the planner, and the fixes found so far."""

    def __init__(self, request: PlanRequest, planner: Callable[[PlanRequest], Plan]) -> None:
        self.request, self.planner = request, planner
        self.found: list[Fix] = []
        self.tried: list[str] = []

    def plan(self, **changes: Any) -> Plan | None:
        """The plan of the request with `changes`; None when it is refused or nothing fits."""
        try:
            return self.planner(dataclasses.replace(self.request, **changes))
        except ConfigError:
            return None

    def keep(self, kind: int, result: Plan, **changes: Any) -> Fix:
        fix = Fix(tuple(changes.items()), result, kind)
        self.found.append(fix)
        return fix

    def attempt(self, kind: int, **changes: Any) -> Fix | None:
        """Plan with `changes` and keep it as a fix when it plans."""
        result = self.plan(**changes)
        return None if result is None else self.keep(kind, result, **changes)

    def longest_context(self, lengths: list[int]) -> None:
        """The longest of `lengths` that plans (bisection: a shorter context never needs more memory)."""
        low, high, best = 0, len(lengths) - 1, None
        while low <= high:
            mid = (low + high) // 2
            result = self.plan(max_model_len=lengths[mid])
            if result is None:
                high = mid - 1
            else:
                best, low = (lengths[mid], result), mid + 1
        if best is not None:
            self.keep(CONTEXT, best[1], max_model_len=best[0])

    def first_size(self, kind: int, rows: list[InstanceType], one_node: bool) -> Fix | None:
        """The first of `rows` on which a replica plans on one node (`one_node`) or spans nodes (else), kept."""
        for row in rows:
            result = self.plan(accelerator=row.instance_type)
            if result is not None and (result.nodes_per_replica == 1) == one_node:
                return self.keep(kind, result, accelerator=row.instance_type)
        return None


def _family(inst: InstanceType) -> list[InstanceType]:
    """Priced sizes of `inst`'s family dearer than it, cheapest first."""
    price = inst.on_demand_usd_per_hour or 0.0
    rows = [
        row
        for row in INSTANCE_CATALOG
        if row.family == inst.family
        and row.instance_type != inst.instance_type
        and row.on_demand_usd_per_hour is not None
        and row.on_demand_usd_per_hour > price
    ]
    return sorted(rows, key=lambda row: row.on_demand_usd_per_hour or 0.0)


def _least_changes(fixes: list[Fix]) -> list[Fix]:
    """Drop a fix whose changes include all of another's (fp8 weights and KV cache where fp8 KV alone fits)."""
    return [f for f in fixes if not any(g is not f and set(g.changes) < set(f.changes) for g in fixes)]
