#!/usr/bin/env python3
"""One model on EKS Auto Mode: the single-model app with `"compute": "auto-mode"` in cdk.json beside this file. AWS
runs Karpenter, the node AMIs, the GPU drivers and device plugins, load balancing and block storage; llm-eks plans
the model the same way and brings its own NodeClasses and NodePools (eks.amazonaws.com), with no Karpenter release,
interruption queue or device plugin of its own. The plan prints Auto Mode's fee beside each $/h and what its weekly
node replacement costs the replicas (docs: Self-managed Karpenter or Auto Mode).

With llm-eks installed (docs/getting-started/install.md) and Node 24 or 22 on PATH, in a folder holding this app.py
and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
