"""`llm-eks images lock`: tag -> digest through the OCI Distribution API, replayed from recorded responses.

The recorded exchanges in tests/fixtures/registry/ are hand-written from the OCI distribution spec (a 401 with
`WWW-Authenticate: Bearer ...`, the token JSON, the manifest index with its `Docker-Content-Digest`). No test makes
a network call: the transport is replaced, or urllib's opener fails as it does on this machine.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import urllib.error
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from llm_eks.cli import main
from llm_eks.images.lock import load_lock
from llm_eks.images.reference import parse_ref
from llm_eks.images.registry import HttpResponse, RegistryError, RegistryUnreachable, resolve
from tests.conftest import REPO_ROOT

FIXTURES = Path(__file__).parent / "fixtures" / "registry"
VLLM = "vllm/vllm-openai:v0.33.0"
VLLM_DIGEST = "sha256:027a4b13ac8a54bd9b7dd45b6c51c078e478283c7bf1810af4e4bacfced7d70f"
PROBE = "registry.k8s.io/sig-storage/livenessprobe:v2.18.0"
PROBE_DIGEST = "sha256:1ffd754a1a7fd79cbee6746fd278e75af46be2659ebbd9f16287c306a2f8bd6e"


class Replay:
    """A transport answering from recorded exchanges; hosts without a recording are unreachable."""

    def __init__(self, *names: str) -> None:
        self.exchanges = [e for name in names for e in json.loads((FIXTURES / name).read_text())["exchanges"]]
        self.hosts = {urllib.parse.urlsplit(e["request"]["url"]).hostname for e in self.exchanges}
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    def __call__(self, method: str, url: str, headers: Mapping[str, str]) -> HttpResponse:
        self.calls.append((method, url, dict(headers)))
        host = urllib.parse.urlsplit(url).hostname
        if host not in self.hosts:
            raise RegistryUnreachable(f"{host} unreachable ([Errno -2] Name or service not known)")
        for e in self.exchanges:
            req = e["request"]
            if (req["method"], req["url"], req.get("authorization")) == (method, url, headers.get("Authorization")):
                r = e["response"]
                return HttpResponse(r["status"], {k.lower(): v for k, v in r["headers"].items()}, r["body"].encode())
        body = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}'
        return HttpResponse(404, {"content-type": "application/json"}, body)


def test_fixture_digests_are_the_sha256_of_their_bodies() -> None:
    for path in FIXTURES.glob("*.json"):
        for e in json.loads(path.read_text())["exchanges"]:
            claimed = e["response"]["headers"].get("Docker-Content-Digest")
            if claimed:
                assert claimed == "sha256:" + hashlib.sha256(e["response"]["body"].encode()).hexdigest(), path.name


def test_docker_hub_anonymous_token_flow() -> None:
    replay = Replay("docker-hub-vllm.json")
    found = resolve(VLLM, replay)
    assert found.digest == VLLM_DIGEST
    assert found.media_type == "application/vnd.oci.image.index.v1+json"
    assert found.source == "https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/v0.33.0"
    (_, u1, h1), (_, u2, _), (m3, u3, h3) = replay.calls
    # An index is asked for first, so a multi-arch image resolves to its index digest, not one platform's.
    assert h1["Accept"].split(", ")[:2] == [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
    assert "Authorization" not in h1
    assert u2 == "https://auth.docker.io/token?service=registry.docker.io&scope=repository%3Avllm%2Fvllm-openai%3Apull"
    assert (m3, u3, h3["Authorization"]) == ("GET", u1, "Bearer fixture-token")


def test_registry_without_token_and_docker_manifest_list() -> None:
    found = resolve(PROBE, Replay("registry-k8s-livenessprobe.json"))
    assert (found.digest, found.media_type) == (
        PROBE_DIGEST,
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )


def test_docker_hub_names() -> None:
    assert (
        parse_ref("busybox:1.38.0").manifest_url() == "https://registry-1.docker.io/v2/library/busybox/manifests/1.38.0"
    )
    assert parse_ref("docker.io/grafana/grafana:13.1.3").api_host == "registry-1.docker.io"
    assert parse_ref("localhost:5000/team/app:v1").manifest_url() == "https://localhost:5000/v2/team/app/manifests/v1"


def _tampered(**changes: object) -> Replay:
    replay = Replay("registry-k8s-livenessprobe.json")
    response = replay.exchanges[0]["response"]
    for key, value in changes.items():
        if key == "body":
            response["body"] = value
        else:
            response["headers"][key] = value
    return replay


@pytest.mark.parametrize(
    ("replay", "message"),
    [
        (_tampered(**{"Docker-Content-Digest": "sha256:" + "0" * 64}), f"Docker-Content-Digest sha256:{'0' * 64} does "
         f"not match the body's {PROBE_DIGEST}"),
        (_tampered(**{"Content-Type": "application/vnd.docker.distribution.manifest.v1+prettyjws"}), "served "
         "application/vnd.docker.distribution.manifest.v1+prettyjws, not an OCI/Docker v2 manifest"),
        (_tampered(body='{"schemaVersion": 1}', **{"Docker-Content-Digest": None}), "without schemaVersion 2"),
    ],
)  # fmt: skip
def test_a_manifest_that_cannot_be_verified_is_refused(replay: Replay, message: str) -> None:
    headers = replay.exchanges[0]["response"]["headers"]
    for key in [k for k, v in headers.items() if v is None]:
        del headers[key]
    with pytest.raises(RegistryError) as info:
        resolve(PROBE, replay)
    assert message in str(info.value)


def test_not_found_and_credentials_challenges() -> None:
    with pytest.raises(RegistryError, match=r"not found at https://registry.k8s.io/v2/x/y/manifests/v1 \(HTTP 404\)"):
        resolve("registry.k8s.io/x/y:v1", Replay("registry-k8s-livenessprobe.json"))

    def basic_only(method: str, url: str, headers: Mapping[str, str]) -> HttpResponse:
        return HttpResponse(401, {"www-authenticate": 'Basic realm="private"'}, b"")

    with pytest.raises(RegistryError, match="only anonymous bearer tokens from an https realm are supported"):
        resolve("ghcr.io/acme/private:v1", basic_only)


def test_urllib_failure_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError(OSError(-2, "Name or service not known"))

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    with pytest.raises(RegistryUnreachable, match=r"^quay.io unreachable \("):
        resolve("quay.io/kuberay/operator:v1.7.0")


def _context(tmp_path: Path) -> Path:
    context = tmp_path / "cdk.json"
    dev = {"workload": {"hf_token_secret": "llm-eks/dev/hf-token"}}  # with the Secrets Store CSI charts
    context.write_text(json.dumps({"context": {"environments": {"dev": dev}}}))
    return context


def test_lock_command_writes_what_resolved_and_one_line_per_unreachable_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llm_eks.cli import parser
    from llm_eks.cli.images import lock_command

    context = _context(tmp_path)
    args = parser().parse_args(["images", "lock", "--context-file", str(context)])
    replay = Replay("docker-hub-vllm.json", "registry-k8s-livenessprobe.json")
    code = lock_command(args, transport=replay, now=lambda: datetime(2026, 11, 30, 14, 0, 7, tzinfo=UTC))
    out, err = capsys.readouterr()
    assert code == 1
    lock = load_lock(tmp_path / "images.lock.json")
    entry = lock.entries[VLLM]
    assert (entry.digest, entry.resolved_at, entry.source) == (
        VLLM_DIGEST,
        "2026-11-30T14:00:07Z",
        "https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/v0.33.0",
    )
    assert lock.digests() == {VLLM: VLLM_DIGEST, PROBE: PROBE_DIGEST}
    assert f"{VLLM}@{VLLM_DIGEST}" in out.splitlines()
    lines = err.splitlines()
    # Unreachable registries: one line each, naming what stays unlocked.
    for host in ("public.ecr.aws", "quay.io", "ghcr.io", "nvcr.io"):
        assert sum(line.startswith(f"llm-eks: error: {host} unreachable (") for line in lines) == 1, host
    assert (
        "llm-eks: error: public.ecr.aws unreachable ([Errno -2] Name or service not known): 2 image(s) not locked "
        "(public.ecr.aws/karpenter/controller:1.14.1, "
        "public.ecr.aws/aws-secrets-manager/secrets-store-csi-driver-provider-aws:3.1.1)"
    ) in lines
    # A reachable registry that refuses one image: one line for that image.
    assert (
        "llm-eks: error: registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.19.1: not found at "
        "https://registry.k8s.io/v2/kube-state-metrics/kube-state-metrics/manifests/v2.19.1 (HTTP 404)"
    ) in lines


def test_unreachable_network_writes_nothing_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError(OSError(-2, "Name or service not known"))

    monkeypatch.setattr("urllib.request.urlopen", no_network)
    context = _context(tmp_path)
    code = main(["images", "lock", "--context-file", str(context)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert not (tmp_path / "images.lock.json").exists()
    hosts = [line.split()[2] for line in err.splitlines()]
    assert hosts == ["registry-1.docker.io", "public.ecr.aws", "quay.io", "ghcr.io", "registry.k8s.io", "nvcr.io"]
    assert all(" unreachable (" in line for line in err.splitlines())


def test_malformed_lock_stops_before_any_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / "images.lock.json"
    lock.write_text(json.dumps({"version": 1, "images": {VLLM: {"digest": "sha256:abc"}}}))
    code = main(["images", "lock", "--context-file", str(_context(tmp_path))])
    _, err = capsys.readouterr()
    assert code == 2
    assert err == (
        f"llm-eks: error: {lock}: images['{VLLM}'].digest: 'sha256:abc' is not allowed; must be 'sha256:' followed "
        "by 64 lowercase hex digits\n"
    )


def test_images_lock_imports_no_cdk() -> None:
    probe = (
        "import sys, urllib.request\n"
        "def no_network(*a, **k): raise OSError('offline')\n"
        "urllib.request.urlopen = no_network\n"
        "from llm_eks.cli import main\n"
        "main(['images', 'lock', '--env', 'prod', '--file', sys.argv[1]])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'aws_cdk', 'cdk8s', 'constructs', 'jsii'})\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, "/nonexistent-dir/images.lock.json"],
        capture_output=True, text=True, cwd=REPO_ROOT, check=True,
    )  # fmt: skip
    assert result.stdout == "[]\n"
    assert "llm-eks: error: registry-1.docker.io unreachable (offline): 2 image(s) not locked" in result.stderr


def test_rerun_keeps_unchanged_entries_and_shows_a_moved_tag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llm_eks.cli import parser
    from llm_eks.cli.images import lock_command

    lock = tmp_path / "images.lock.json"
    old = "sha256:" + "e" * 64
    lock.write_text(json.dumps({"version": 1, "images": {
        VLLM: {"digest": old, "resolved_at": "2026-10-01T00:00:00Z", "source": "https://registry-1.docker.io/v2/x"},
        PROBE: {"digest": PROBE_DIGEST, "resolved_at": "2026-10-01T00:00:00Z", "source": "https://registry.k8s.io/v2/y"},
    }}))  # fmt: skip
    args = parser().parse_args(["images", "lock", "--context-file", str(_context(tmp_path))])
    replay = Replay("docker-hub-vllm.json", "registry-k8s-livenessprobe.json")
    lock_command(args, transport=replay, now=lambda: datetime(2026, 11, 30, 14, 0, 7, tzinfo=UTC))
    out, _ = capsys.readouterr()
    assert f"{VLLM}@{VLLM_DIGEST} (was {old})" in out.splitlines()
    entries = load_lock(lock).entries
    assert (entries[VLLM].digest, entries[VLLM].resolved_at) == (VLLM_DIGEST, "2026-11-30T14:00:07Z")
    assert entries[PROBE].resolved_at == "2026-10-01T00:00:00Z"  # same digest: the entry is left as reviewed
