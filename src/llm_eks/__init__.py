"""llm-eks: serve open LLMs on Amazon EKS, as AWS CDK constructs and cdk8s charts."""

__version__ = "0.1.0"
