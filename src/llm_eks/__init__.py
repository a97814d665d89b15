"""llm-eks: serve open LLMs on Amazon EKS, as AWS CDK constructs and cdk8s charts."""

from importlib import metadata

try:
    # The installed distribution's version (pyproject.toml's, as the wheel or `pip install -e .` recorded it).
    __version__ = metadata.version("llm-eks")
except metadata.PackageNotFoundError:  # the source tree on sys.path without an install
    __version__ = "0+unknown"
