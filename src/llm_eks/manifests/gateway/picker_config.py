"""The endpoint picker's configuration (llm-d router v0.10.0 `EndpointPickerConfig`, llm-d.ai/v1alpha1): its scorers,
and flow control on, which holds a request while the pool has no ready replica or is saturated, orders requests by
the tenant's priority band, and takes turns between tenants (flows) within a band.

Read at llm-d/llm-d-router v0.10.0 (71f4f09): apix/config/v1alpha1/endpointpickerconfig_types.go (every field name
below), pkg/epp/config/loader/configloader.go (decoded strictly: an unknown key is an error), cmd/epp/runner/runner.go
(the `flowControl` feature gate, default off; flow-control settings are ignored while it is off),
pkg/epp/flowcontrol/registry/config.go (per band: maxRequests 5000 and maxBytes 1G by default),
pkg/epp/framework/plugins/flowcontrol/saturationdetector/concurrency/config.go (`maxConcurrency`, `headroom`),
pkg/epp/framework/plugins/flowcontrol/fairness/roundrobin/roundrobin.go (`round-robin-fairness-policy`: flows take
turns; the default global-strict policy ignores flow boundaries), pkg/epp/requestcontrol/admission.go (outcomes: a
full band is 429 `rejected-saturated`; a hold that ends with no ready endpoint is 503 `rejected-no-endpoints`).

Prefill/decode (a disaggregated workload): the `disagg-profile-handler` (profilehandler/disagg/
disagg_profile_handler.go:72-89, registered in cmd/epp/runner/runner.go:620; `pd-profile-handler` is its deprecated
former name, runner.go:618-619) runs the `decode` profile first (its default stage order), then the `prefill`
profile when `prefix-based-pd-decider` (prefix_based_pd_decider.go:19-31, runner.go:622) finds more than
`nonCachedTokens` prompt tokens outside the chosen decode pod's prefix cache; `decode-filter` and `prefill-filter`
(filter/bylabel/roles.go:9-60, runner.go:577-578) keep the pods by their `llm-d.ai/role` label; each profile picks
with `max-score-picker` (runner.go:612). Plugin names default to their type (pkg/epp/config/loader/defaults.go:110).
Only one profile handler may exist in a config, so the default `single-profile-handler` is not injected.

Prefix-cache scoring: approximate by default (the picker records what it routed); precise for a pool whose pods
publish their KV-cache events (precise_prefix.py; when: llm_eks/planner/kv_events.py), the same `prefix-cache-scorer`
and weight fed by the precise producer instead.

There is no published schema: tests/fixtures/epp/endpoint_picker_config_v0.10.0.yaml lists the field names and
plugin parameters read from the pinned source, and the tests hold every rendered config to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from llm_eks.manifests.gateway import precise_prefix
from llm_eks.manifests.gateway.props import FlowControl, PrecisePrefix

API_VERSION = "llm-d.ai/v1alpha1"
FAIRNESS = "round-robin-fairness-policy"
DETECTOR = "concurrency-detector"
# Below 0 a band is sheddable (the picker's defaultNegativePriorityBand); tenants there queue little.
SHEDDABLE_SHARE = 4


SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3))
PD_DECIDER = "prefix-based-pd-decider"
PD_HANDLER = "disagg-profile-handler"


def _profile(name: str, *head: str) -> dict[str, Any]:
    """A scheduling profile: `head` plugins (a filter), the chart's scorers, and for a P/D profile its picker."""
    refs = [{"pluginRef": ref} for ref in head] + [{"pluginRef": ref, "weight": w} for ref, w in SCORERS]
    if head:
        refs.append({"pluginRef": "max-score-picker"})
    return {"name": name, "plugins": refs}


def _pd_plugins(non_cached_tokens: int) -> list[dict[str, Any]]:
    return [
        {"type": "prefill-filter"},
        {"type": "decode-filter"},
        {"type": "max-score-picker"},
        {"type": PD_DECIDER, "parameters": {"nonCachedTokens": non_cached_tokens, "promptTokens": 0}},
        {
            "type": PD_HANDLER,
            "parameters": {"profiles": {"prefill": "prefill", "decode": "decode"}, "deciders": {"prefill": PD_DECIDER}},
        },
    ]


def picker_config(
    flow: FlowControl,
    priorities: Sequence[int],
    pd_non_cached_tokens: int | None = None,
    precise: PrecisePrefix | None = None,
) -> dict[str, Any]:
    """The EndpointPickerConfig of one pool: the chart's scorers (queue length, KV-cache use, prefix match, weights as
    llm-d-router v0.10.0's default-plugins.yaml), and flow control with one band per tenant priority on the pool;
    with `pd_non_cached_tokens`, the prefill and decode profiles of a disaggregated workload; with `precise`, the
    prefix match from the pods' KV-cache events (module docstring)."""
    bands = sorted(set(priorities) | {0}, reverse=True)
    band_capacity = str(flow.band_capacity)
    config: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "EndpointPickerConfig",
        "featureGates": ["flowControl"],
        "plugins": [
            {"type": "queue-scorer"},
            {"type": "kv-cache-utilization-scorer"},
            *(precise_prefix.plugins(precise) if precise is not None else []),
            precise_prefix.scorer(precise),
            {"type": "metrics-data-source", "parameters": {"scheme": "http", "path": "/metrics"}},
            {"type": "core-metrics-extractor"},
            # Saturation from what the picker itself dispatched (no scrape staleness): requests in flight over
            # replicas x the plan's concurrency. An empty pool reads as saturated, so requests are held.
            {"type": DETECTOR, "parameters": {"maxConcurrency": flow.max_concurrency, "headroom": 0.25}},
            {"type": FAIRNESS},
            *(_pd_plugins(pd_non_cached_tokens) if pd_non_cached_tokens is not None else []),
        ],
        "schedulingProfiles": (
            [_profile("default")]
            if pd_non_cached_tokens is None
            else [_profile("decode", "decode-filter"), _profile("prefill", "prefill-filter")]
        ),
        "flowControl": {
            # Held requests keep their bodies: bounded under the picker's memory limit.
            "maxBytes": flow.max_bytes,
            "defaultRequestTTL": f"{flow.hold_seconds}s",
            "saturationDetector": {"pluginRef": DETECTOR},
            "priorityBands": [
                {"priority": p, "maxRequests": band_capacity, "fairnessPolicyRef": FAIRNESS} for p in bands if p >= 0
            ],
            "defaultPriorityBand": {"priority": 0, "maxRequests": band_capacity, "fairnessPolicyRef": FAIRNESS},
            "defaultNegativePriorityBand": {
                "priority": -1,
                "maxRequests": str(max(1, flow.band_capacity // SHEDDABLE_SHARE)),
                "fairnessPolicyRef": FAIRNESS,
            },
        },
    }
    if precise is not None:
        config["dataLayer"] = precise_prefix.data_layer()
    return config


def picker_config_text(
    flow: FlowControl,
    priorities: Sequence[int],
    pd_non_cached_tokens: int | None = None,
    precise: PrecisePrefix | None = None,
) -> str:
    """The config as the picker reads it (`--config-file`)."""
    return yaml.safe_dump(picker_config(flow, priorities, pd_non_cached_tokens, precise), sort_keys=False)
