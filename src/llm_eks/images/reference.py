"""Image references as Docker and containerd read them: `[registry/]repository[:tag][@sha256:<hex>]`.

A first path component is a registry host when it contains `.` or `:` or is `localhost`; otherwise the image is on
Docker Hub (`docker.io`), whose single-component names live under `library/` (`busybox` is
`docker.io/library/busybox`) and whose Distribution API host is `registry-1.docker.io`. Lock keys are references
with a tag and no digest, written exactly as llm-eks names the image (so a reviewer can grep for them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeGuard

DOCKER_HUB = "docker.io"
# docker.io is an alias; the Distribution API answers on this host (index.docker.io redirects to it).
DOCKER_HUB_API = "registry-1.docker.io"
# The only digest algorithm registries and kubelet agree on for manifests.
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DIGEST_RULE = "must be 'sha256:' followed by 64 lowercase hex digits"
# distribution/reference grammar: path components and tags.
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^\w[\w.-]{0,127}$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?$")


@dataclass(frozen=True)
class ImageRef:
    """One tagged image: where it lives and which tag."""

    # Registry as written (docker.io when implied).
    registry: str
    # Repository path in that registry (`library/busybox` for Docker Hub's official images).
    repository: str
    tag: str

    @property
    def api_host(self) -> str:
        """Host that serves the Distribution API for this registry."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    def manifest_url(self) -> str:
        return f"https://{self.api_host}/v2/{self.repository}/manifests/{self.tag}"


def parse_ref(text: str) -> ImageRef:
    """A tagged reference without digest; ValueError with the reason otherwise."""
    if not isinstance(text, str) or not text or text != text.strip():
        raise ValueError("must be an image reference such as vllm/vllm-openai:v0.33.0")
    if "@" in text:
        raise ValueError("must be a tagged reference without '@digest' (the digest is the entry's value)")
    name, sep, tag = text.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError("must carry a tag (repository:tag); an untagged reference means ':latest', which moves")
    if not _TAG.match(tag):
        raise ValueError(f"tag {tag!r} must be 1-128 of letters, digits, '_', '.' and '-'")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _HOST.match(first):
            raise ValueError(f"registry {first!r} is not a host name")
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, name
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or not all(_COMPONENT.match(part) for part in path.split("/")):
        raise ValueError(f"repository {path!r} must be lowercase path components (letters, digits, '.', '_', '-')")
    return ImageRef(registry=registry, repository=path, tag=tag)


def is_digest(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(DIGEST.match(value))
