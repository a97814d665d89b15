"""Every pinned upstream version in one place, so an upgrade is a one-line diff a reviewer can see.

No aws_cdk import here: the cdk8s charts read these too.
"""

from __future__ import annotations

# One Kubernetes minor drives the EKS control plane, the kubectl Lambda layer (aws-cdk.lambda-layer-kubectl-vNN),
# the cdk8s-plus-NN package and the schema version Kubernetes objects are validated against. Bump all four
# together: pyproject.toml pins the two packages whose names carry this number.
KUBERNETES_MINOR = 35
KUBERNETES_VERSION = f"1.{KUBERNETES_MINOR}"
