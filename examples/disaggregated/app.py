#!/usr/bin/env python3
"""Retrieval-augmented answers from Llama 3.3 70B on p5.48xlarge with a tight inter-token latency target: prompts of
about 8k tokens, answers of about 256. Everything is in cdk.json beside this file. The planner finds that one pool
misses the 30 ms inter-token target (long prompts' chunks ride along in every decode step) and that separate prefill
and decode pools meet it, so the stack serves the workload disaggregated: a prefill Deployment and a decode
Deployment behind llm-d's routing sidecar, the KV cache moving over EFA with vLLM's NIXL connector, the gateway's
endpoint picker choosing a decode pod and, for a long uncached prompt, a prefill pod. `llm-eks plan --env rag` prints
the decision and its numbers.

A second environment, `wide-ep`, serves DeepSeek-V3 as 16 data-parallel ranks with expert parallelism over two
p5.48xlarge per replica: its pools are a prefill and a decode LeaderWorkerSet (`llm-eks plan --env wide-ep`).
`npx cdk synth` builds both stacks; `-c env=rag` or `-c env=wide-ep` builds one.

With llm-eks installed and Node 24 or 22 on PATH, in a folder holding this app.py and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
