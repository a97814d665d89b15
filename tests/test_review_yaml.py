"""The review YAML a person reads: scripts, dashboards, config files and user data as block literals, and the objects
it shows are the objects the template applies."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from llm_eks.infra.review import applied_objects, dump_all, object_key
from llm_eks.manifests.source import SOURCE_ANNOTATION, metadata_reaches_pods
from tests.conftest import ENVIRONMENTS, Synthesized
from tests.review_yaml import quoted_multiline_scalars


def _reviewed(synthesized: Synthesized, env: str) -> dict[str, list[dict[str, Any]]]:
    return {name: objs for name, objs in synthesized.manifests(env).items() if name != "helm-releases.yaml"}


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_review_yaml_is_the_applied_objects_as_data(synthesized: Synthesized, env: str) -> None:
    """Parse both: every object the template's manifests apply (aws_eks_v2's KubernetesResource, the JSON the
    kubectl provider applies) equals the object of the same apiVersion, kind, namespace and name in the review
    YAML, field for field; the review holds nothing else but the Jobs applied by hand (the benchmark)."""
    applied = {object_key(obj): obj for _, obj in applied_objects(synthesized.template(env))}
    reviewed: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    by_hand = set()
    for name, objects in _reviewed(synthesized, env).items():
        for obj in objects:
            assert object_key(obj) not in reviewed, f"{name}: {object_key(obj)} shown twice"
            reviewed[object_key(obj)] = obj
            if name.endswith("benchmark.yaml"):
                by_hand.add(object_key(obj))
    assert by_hand and by_hand.isdisjoint(applied)
    assert sorted(set(reviewed) - by_hand) == sorted(applied)
    different = [key for key in applied if applied[key] != reviewed[key]]
    assert different == []


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_object_names_the_module_that_built_it(synthesized: Synthesized, env: str) -> None:
    """On the object's own metadata (a reviewer opens that module), never on a pod template (a change there would
    restart the pods)."""
    for name, objects in _reviewed(synthesized, env).items():
        for obj in objects:
            if metadata_reaches_pods(obj):
                assert SOURCE_ANNOTATION not in obj["metadata"].get("annotations", {})
                continue
            source = obj["metadata"].get("annotations", {}).get(SOURCE_ANNOTATION, "")
            assert source.startswith("llm_eks."), (name, object_key(obj))
            __import__(source)  # a module that exists
            assert SOURCE_ANNOTATION not in yaml.safe_dump({k: v for k, v in obj.items() if k != "metadata"})


def test_no_string_with_a_line_break_is_written_quoted(synthesized: Synthesized) -> None:
    assert synthesized.error is None, synthesized.error
    quoted = [
        f"{env}/{path.name}:{scalar.line}"
        for env in ENVIRONMENTS
        for path in sorted((synthesized.outdir / "manifests" / env).glob("*.yaml"))
        for scalar in quoted_multiline_scalars(path.read_text())
    ]
    assert quoted == []


def test_user_data_and_scripts_read_line_for_line(synthesized: Synthesized) -> None:
    pools = (synthesized.outdir / "manifests" / "dev" / "01-node-pools.yaml").read_text()
    assert "  userData: |\n    # Parallel image pull and unpack (SOCI snapshotter)" in pools
    assert '    [settings.container-runtime]\n    snapshotter = "soci"\n' in pools
    vllm = (synthesized.outdir / "manifests" / "dev" / "02-vllm.yaml").read_text()
    assert "\n          def log(mode: str, message: str) -> None:\n" in vllm  # the compile-cache program


def test_block_literals_hold_the_same_strings() -> None:
    """What PyYAML writes as a block literal loads back as the very same string (so the same object)."""
    values = [
        "#!/bin/sh\necho one\n",  # a final line break: `|`
        "no final line break\nsecond",  # `|-`
        "two final line breaks\n\n",  # `|+`
        "  indented first line\nsecond\n",  # an indentation indicator
        '{\n  "panels": []\n}',
        "a quote ' and \" and a colon: here\n# and a comment\n",
    ]
    text = dump_all([{"data": {str(i): v for i, v in enumerate(values)}}])
    assert yaml.safe_load(text) == {"data": {str(i): v for i, v in enumerate(values)}}
    assert quoted_multiline_scalars(text) == []
    assert "&id" not in dump_all([{"a": values, "b": values}])  # no anchors for a shared list


def test_a_string_a_block_literal_cannot_hold_stays_exact() -> None:
    """A line ending in a space, or a tab, cannot be written as a block literal by PyYAML: it quotes the string
    instead, so the value never changes (and the measurement counts it)."""
    values = ["trailing space \nnext\n", "tab\tinside\nnext\n"]
    text = dump_all([{"v": values}])
    assert yaml.safe_load(text) == {"v": values}
    assert len(quoted_multiline_scalars(text)) == 2


def test_the_gateway_names_its_source_because_its_annotations_never_reach_its_pods(synthesized: Synthesized) -> None:
    """Envoy Gateway copies only `spec.infrastructure.annotations` onto the Envoy pods (v1.9.0
    internal/gatewayapi/translator.go infrastructureAnnotations), and staging's Gateway sets none: its own metadata,
    source annotation included, stays on the Gateway, so changing it restarts nothing."""
    (gateway,) = [o for o in synthesized.objects("staging") if o["kind"] == "Gateway"]
    assert set(gateway["spec"]["infrastructure"]) == {"parametersRef"}
    assert not metadata_reaches_pods(gateway)
    assert gateway["metadata"]["annotations"][SOURCE_ANNOTATION] == "llm_eks.manifests.gateway.proxy"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_libyaml_writes_the_same_bytes_as_pure_python(synthesized: Synthesized, env: str) -> None:
    """The review is written with libyaml's emitter for speed; every file it writes reads byte for byte as PyYAML's
    own emitter writes it, so switching emitters never changes what a reviewer diffs."""
    from llm_eks.infra import review

    assert review._ReadableDumper.__mro__[1] is yaml.CSafeDumper

    class PurePython(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    PurePython.add_representer(str, review._string)
    for name, objs in synthesized.manifests(env).items():
        written = (synthesized.outdir / "manifests" / env / name).read_text()
        options = {"sort_keys": False, "default_flow_style": False, "width": 120, "allow_unicode": True}
        assert yaml.dump_all(objs, Dumper=PurePython, **options) == written, name
