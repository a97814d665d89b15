#!/usr/bin/env python3
"""A multi-turn chat assistant with a CPU tier for its KV cache: each turn's prompt carries the conversation so
far, so the prefix the GPU cache evicted between turns is loaded back from host memory instead of recomputed.
Everything is in cdk.json beside this file: `kv_offload: "auto"` gives vLLM the host memory its pod holds beyond
vLLM's own needs, and `conversation_turns` lets `llm-eks plan --env chat` estimate how much of each prompt the GPU
cache and the CPU tier hold. The gateway (reached from inside the cluster only) routes each turn with its endpoint
picker's precise prefix-cache scorer, which indexes what every pod holds, the CPU tier included, from vLLM's
KV-cache events: `prefix_cache_scorer: "precise"`, with `api_key: false` because the picker tokenizes prompts on the
workload's own vLLM and sends no key (the gateway still authenticates every caller).

With llm-eks installed and Node 24 or 22 on PATH, in a folder holding this app.py and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
