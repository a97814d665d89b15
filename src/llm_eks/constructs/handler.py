"""The Lambdas behind llm-eks's own custom resources (the Karpenter teardown, the pinned CRDs, the compute-mode
guard): Python from a folder of this package, no bundling, logs in the stack's encrypted log group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from llm_eks.constructs.log_encryption import encrypted_log_group


def python_handler(
    scope: Construct,
    *,
    description: str,
    source: Path,
    timeout: cdk.Duration,
    memory_size: int,
    log_retention: logs.RetentionDays,
    **options: Any,
) -> lambda_.Function:
    """Function `Handler` (entry point `index.on_event`) under `scope`, with its log group `HandlerLogs`."""
    return lambda_.Function(
        scope,
        "Handler",
        description=description,
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.on_event",
        # Plain source, no bundling: boto3 ships with the Lambda runtime. Bytecode left by local test runs must not
        # change the asset hash.
        code=lambda_.Code.from_asset(str(source), exclude=["__pycache__", "*.pyc"]),
        timeout=timeout,
        memory_size=memory_size,
        log_group=encrypted_log_group(scope, "HandlerLogs", log_retention),
        **options,
    )
