#!/usr/bin/env python3
"""One model, one environment: the smallest llm-eks app a team would start from. Everything is in cdk.json beside
this file (one environment, one `workload`); llm-eks plans it and builds the stack.

    pip install llm-eks && npm install aws-cdk && npx cdk synth
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
