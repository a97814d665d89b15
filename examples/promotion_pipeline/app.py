#!/usr/bin/env python3
"""Promotion: dev, then staging, then prod (after a person approves), each in its own account, deployed by one
self-mutating CodePipeline that verifies every environment against its plan before the next one starts. Everything
is in cdk.json beside this file: the environments (each with its account and region) and `pipeline`.

    npx cdk synth                 # the pipeline stack and one stage per environment
    npx cdk deploy LlmEks-pipeline  # once, by hand, into the pipeline account; it deploys itself from then on
    npx cdk synth -c env=staging  # one environment's stack, exactly as the pipeline deploys it
"""

from llm_eks.infra.app import main

if __name__ == "__main__":
    main()
