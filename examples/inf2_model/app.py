#!/usr/bin/env python3
"""One model on Inferentia2: Llama 3.1 8B on inf2.8xlarge (one chip, two NeuronCores), served by NxD Inference
through vllm-neuron on vLLM 0.16 in AWS's Neuron container. Everything is in cdk.json beside this file; llm-eks plans
it on Neuron because the accelerator names an inf2 size (docs/how-to/serve-on-neuron.md). Weights are staged: the
compile cache's writer Job compiles the model ahead of time and serving pods restore it. The Hub token's secret
(`hf-token`) must exist in the account for the staging Job (Llama is gated).

With llm-eks installed (docs/getting-started/install.md) and Node 24 or 22 on PATH, in a folder holding this app.py
and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
