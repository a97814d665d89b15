#!/usr/bin/env python3
"""One model, one environment: the smallest llm-eks app a team would start from. Everything is in cdk.json beside
this file (one environment, one `workload`); llm-eks plans it and builds the stack.

With llm-eks installed (docs/getting-started/install.md: the wheel `make dist` builds, or a git URL) and
Node 24 or 22 on PATH, in a folder holding this app.py and cdk.json:

    npm install aws-cdk@2.1148.1 && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
