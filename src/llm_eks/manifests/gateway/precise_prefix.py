"""The endpoint picker's precise prefix-cache scoring: the plugins and data-layer wiring that replace the approximate
producer behind `prefix-cache-scorer` where a workload's pods publish their KV-cache events (when, and vLLM's side:
llm_eks/planner/kv_events.py).

llm-d router v0.10.0 (llm-d/llm-d-router, commit 71f4f0999f95b96c49a9d0c4afbd18dfdb943c26):
- `precise-prefix-cache-scorer` is deprecated in favour of `precise-prefix-cache-producer` with the generic
  `prefix-cache-scorer` naming it in `prefixMatchInfoProducerName` (pkg/epp/framework/plugins/scheduling/scorer/
  preciseprefixcache/README.md; the producer, requestcontrol/dataproducer/preciseprefixcache/producer.go:48-66,
  registered at cmd/epp/runner/runner.go:633; the scorer's field, scheduling/scorer/prefix/plugin.go:34-42).
- The producer's parameters (producer.go:54-66): tokenProcessorConfig, indexerConfig, kvEventsConfig,
  speculativeIndexing, speculativeTTL; kvEventsConfig (pkg/kvevents/pool.go:84-119): zmqEndpoint, topicFilter,
  concurrency, engineType, discoverPods, podDiscoveryConfig {podLabelSelector, podNamespace, socketPort,
  replaySocketPort}; defaults topic "kv@", 4 workers, discovery on, socket 5557, no replay (pool.go:121-147). The
  picker dials each endpoint of the pool when the `endpoint-notification-source` (registered at runner.go:701, no
  parameters: datalayer/source/notifications/factory.go:72) hands it to the producer as an extractor
  (preciseprefixcache/extractor.go:31-63).
- The producer needs real token ids from a `token-producer` (producer.go:296-302); its `vllm` backend calls
  `/v1/completions/render` and `/v1/chat/completions/render` over plain HTTP with no credential, parameters
  modelName and vllm {url, timeout 5s, mmTimeout 30s} (requestcontrol/dataproducer/tokenizer/tokenizer.go:51,
  88-102; vllm_http.go:41-72, 84-95). Without it the framework adds the `estimate` token producer, whose ids are not
  the engine's and silently degrade precise matching (tokenizer/README.md). A failed render is logged and the request is
  scheduled without a prefix score (tokenizer/README.md, "Failure mode").
- The index keeps 1e8 keys in memory, 10 pods per key by default (pkg/kvcache/kvblock/in_memory.go:35-36).
- Config loading keeps adding the default metrics source unless the data layer names one
  (pkg/epp/config/loader/defaults.go:298-331): the data layer below names both sources.
"""

from __future__ import annotations

from typing import Any

from llm_eks.manifests.gateway.props import PrecisePrefix
from llm_eks.planner.kv_events import EVENTS_PORT, REPLAY_PORT, TOPIC_PREFIX

SCORER = "prefix-cache-scorer"
TOKEN_PRODUCER = "token-producer"
PRODUCER = "precise-prefix-cache-producer"
NOTIFICATIONS = "endpoint-notification-source"
METRICS_SOURCE = "metrics-data-source"
METRICS_EXTRACTOR = "core-metrics-extractor"


def scorer(precise: PrecisePrefix | None) -> dict[str, Any]:
    """The `prefix-cache-scorer` plugin: on the approximate producer (its default), or on the precise one."""
    if precise is None:
        return {"type": SCORER}
    return {"type": SCORER, "parameters": {"prefixMatchInfoProducerName": PRODUCER}}


def plugins(precise: PrecisePrefix) -> list[dict[str, Any]]:
    """The token producer (the pool's own vLLM renders the prompt), the precise producer (it dials every pod's event
    and replay sockets) and the endpoint notifications that tell it which pods there are."""
    return [
        {"type": TOKEN_PRODUCER, "parameters": {"modelName": precise.model_name, "vllm": {"url": precise.render_url}}},
        {
            "type": PRODUCER,
            "parameters": {
                "kvEventsConfig": {
                    "topicFilter": TOPIC_PREFIX,
                    "discoverPods": True,
                    # A picker that starts, takes the lease or misses a sequence asks the pod for its buffered
                    # batches instead of scoring from an empty index.
                    "podDiscoveryConfig": {"socketPort": EVENTS_PORT, "replaySocketPort": REPLAY_PORT},
                },
            },
        },
        {"type": NOTIFICATIONS},
    ]


def data_layer() -> dict[str, Any]:
    """The picker's data sources: the pods' metrics (as the default would add), and the endpoint notifications
    feeding the precise producer's subscriptions."""
    return {
        "sources": [
            {"pluginRef": METRICS_SOURCE, "extractors": [{"pluginRef": METRICS_EXTRACTOR}]},
            {"pluginRef": NOTIFICATIONS, "extractors": [{"pluginRef": PRODUCER}]},
        ]
    }
