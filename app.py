#!/usr/bin/env python3
"""CDK entry point (cdk.json "app"): one LlmEks-<env> stack per environment in cdk.json, or `-c env=NAME`."""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
