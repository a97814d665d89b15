#!/usr/bin/env python3
"""One model on Trainium2: Llama 3.3 70B on trn2.48xlarge (16 chips, 64 logical NeuronCores), served by vllm-neuron
on vLLM 0.29 in AWS's Neuron container. EC2 sells trn2.48xlarge through Capacity Blocks for ML, and the pinned price
list has no on-demand price for it: the environment names its block (`capacity_reservations.trn2`; the id and
`usd_per_hour` are placeholders for your block's id and what it cost per instance-hour) and acknowledges the plan's
no-price warning. Two instances: one serves, the other runs the compile cache's writer, which compiles the model
ahead of time (docs/how-to/serve-on-neuron.md).

With llm-eks installed (docs/getting-started/install.md) and Node 24 or 22 on PATH, in a folder holding this app.py
and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
