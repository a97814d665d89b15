#!/usr/bin/env python3
"""Several models behind one endpoint: an environment whose `workloads` share GPU node pools and one internal
gateway that routes each request by its `model` (Envoy Gateway with Envoy AI Gateway: an AIGatewayRoute, an
InferencePool and its endpoint picker per vLLM workload). Without `gateway.tenants`, each workload's own API key is
its caller's credential. Everything is in cdk.json beside this file; llm-eks plans each workload and builds the
stack.

With llm-eks installed (docs/getting-started/install.md: the wheel `make dist` builds, or a git URL) and
Node 24 or 22 on PATH, in a folder holding this app.py and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
