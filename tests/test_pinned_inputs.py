"""Everything fetched at start is pinned (issue 23 items 5 and 6), one test per threat: a branch that moves under a
running production environment, an adapter fetched from the Hub at every start, remote code staged though nothing
runs it, images run by tag in production; and the accepted risks a reviewer sees in `cdk synth`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cdk8s
import pytest

from llm_eks.config import parse_environment
from llm_eks.config.plans import plan_workloads
from llm_eks.errors import ConfigError
from llm_eks.images.lock import ImageLock
from llm_eks.infra.charts import build_charts
from llm_eks.infra.images import environment_images
from llm_eks.infra.workloads import VllmWorkload, build_workloads
from tests.conftest import CDK_JSON, Synthesized
from tests.test_image_lock import lock_of
from tests.test_models_add import QWEN_SHA, FakeHub, add, hub  # noqa: F401 (hub is a fixture)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
PROD = CDK_JSON["context"]["environments"]["prod"]
ADAPTER = "acme/llama-3.1-8b-sql-lora"


def _built(body: dict[str, Any], *, models: Path | None = None, lock: ImageLock | None = None) -> VllmWorkload:
    config = parse_environment("qa", body, models)
    (workload,) = build_workloads(config, plan_workloads(config), images=lock)
    assert isinstance(workload, VllmWorkload)
    return workload


def _error(body: dict[str, Any], lock: ImageLock | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        _built(body, lock=lock)
    return str(info.value)


def _without_risk(risk: str) -> dict[str, Any]:
    return {**PROD, "accepted_risks": {k: v for k, v in PROD["accepted_risks"].items() if k != risk}}


def test_production_refuses_a_branch_that_can_move_under_running_replicas() -> None:
    assert _error(_without_risk("revisions-by-name")) == (
        "environments.qa.workload.revision: 'main' is not allowed; production needs a commit, and a branch or tag "
        "name can move under running replicas: run `llm-eks models add meta-llama/Llama-3.3-70B-Instruct` (it "
        "records the commit), or set revision to the 40-hex commit; or accept the risk: accepted_risks "
        '{"revisions-by-name": "<why>"} [LLMEKS-E118]'
    )
    # A commit passes, and the staging Job stages exactly it, under a prefix of its own.
    workload = _built({**_without_risk("revisions-by-name"), "workload": {**PROD["workload"], "revision": COMMIT}})
    assert workload.staging is not None
    assert (workload.staging.revision, workload.staging.prefix) == (
        COMMIT,
        f"models/meta-llama/Llama-3.3-70B-Instruct/{COMMIT}/",
    )


def test_the_commit_models_add_recorded_pins_the_workload(hub: FakeHub, tmp_path: Path) -> None:  # noqa: F811
    assert add(tmp_path, "Qwen/Qwen3-8B") == 0
    body = {
        "production": True,
        "accepted_risks": {"images-by-tag": "test"},
        "weights_bucket": {},
        "workload": {"model": "Qwen/Qwen3-8B", "weights": "staged"},
    }
    workload = _built(body, models=tmp_path)
    assert workload.staging is not None and workload.staging.revision == QWEN_SHA
    assert f"--revision {QWEN_SHA}" in " ".join(_stage_args(workload))
    # The Hub path passes the commit to vLLM, which downloads exactly it (and its tokenizer).
    hub_body = {**body, "workload": {"model": "Qwen/Qwen3-8B"}}
    assert _built(hub_body, models=tmp_path).vllm.engine.revision == QWEN_SHA


def _stage_args(workload: VllmWorkload) -> list[str]:
    from llm_eks.manifests.weights_staging import staging_objects

    assert workload.staging is not None
    (job,) = [o for o in staging_objects(workload.staging) if o["kind"] == "Job"]
    args: list[str] = job["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_production_refuses_an_adapter_without_a_commit() -> None:
    body = {
        **_without_risk("revisions-by-name"),
        "workload": {**PROD["workload"], "revision": COMMIT, "lora_adapters": {"sql": ADAPTER}},
    }
    assert _error(body) == (
        "environments.qa.workload.lora_adapters.sql: 'acme/llama-3.1-8b-sql-lora@main' is not allowed; production "
        "needs a commit: write acme/llama-3.1-8b-sql-lora@<40-hex commit>; or accept the risk: accepted_risks "
        '{"revisions-by-name": "<why>"} [LLMEKS-E118]'
    )


def test_an_adapter_is_staged_at_its_commit_by_a_job_of_its_own() -> None:
    body = {
        "weights_bucket": {},
        "workload": {"weights": "staged", "lora_adapters": {"sql": f"{ADAPTER}@{COMMIT}"}},
    }
    workload = _built(body)
    ((name, adapter),) = workload.adapter_stagings
    assert name == "sql"
    assert (adapter.repo_id, adapter.revision, adapter.prefix) == (ADAPTER, COMMIT, f"adapters/{ADAPTER}/{COMMIT}/")
    assert adapter.name == "lora-llama-3-1-8b-instruct-sql" and workload.staging is not None
    assert adapter.name != workload.staging.name  # its own ServiceAccount: it may write only its prefix
    assert "*.py" not in adapter.allow_patterns
    # The pods fetch it, verified against the staging record, before vLLM starts.
    ((_, prefix, key),) = workload.vllm.staged_adapters
    assert prefix == adapter.prefix and len(key) == 10
    assert workload.vllm.hf_token_secret is None


def test_an_adapter_from_the_hub_at_every_start_is_refused() -> None:
    assert _error({"workload": {"lora_adapters": {"sql": ADAPTER}}}) == (
        "environments.qa.workload.lora_adapters: {'sql': 'acme/llama-3.1-8b-sql-lora'} is not allowed; needs weights "
        '"staged": adapters are staged into the weights bucket at a pinned revision and restored at start (vLLM would '
        "fetch each from the Hub at every start, at no fixed revision) [LLMEKS-E127]"
    )


def test_remote_code_is_staged_and_run_only_when_the_workload_trusts_it() -> None:
    body: dict[str, Any] = {"weights_bucket": {}, "workload": {"weights": "staged"}}
    plain = _built(body)
    assert plain.staging is not None and "*.py" not in plain.staging.allow_patterns
    assert "--trust-remote-code" not in _serve_args(body)
    trusted = {"weights_bucket": {}, "workload": {"weights": "staged", "trust_remote_code": True}}
    staged = _built(trusted).staging
    assert staged is not None and "*.py" in staged.allow_patterns
    assert "--trust-remote-code" in _serve_args(trusted)


def _serve_args(body: dict[str, Any]) -> list[str]:
    config = parse_environment("qa", body)
    workloads = build_workloads(config, plan_workloads(config))
    charts = build_charts(
        cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=("sg-0123456789abcdef0",)
    )
    (deployment,) = [o for c in charts for o in c.chart.to_json() if o["kind"] == "Deployment"]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_production_refuses_images_by_tag_until_they_are_locked() -> None:
    body = {**_without_risk("images-by-tag"), "workload": {**PROD["workload"], "revision": COMMIT}}
    message = _error(body)
    assert message.startswith(
        "environments.qa.production: true refuses images by tag, and vllm/vllm-openai:v0.33.0 and 20 more "
    )
    assert message.endswith(
        "have no digest in images.lock.json; run `llm-eks images lock --env qa` where the registries are reachable, "
        'review and commit the file, or accept the risk: accepted_risks {"images-by-tag": "<why>"} [LLMEKS-E704]'
    )
    config = parse_environment("qa", body)
    full = lock_of(*environment_images(config, plan_workloads(config)))
    assert "@sha256:" in _built(body, lock=full).vllm.image


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"accepted_risks": {"images-by-tag": "later"}},
            "environments.qa.accepted_risks: only allowed with production true (nothing else refuses these risks)"
            " [LLMEKS-E117]",
        ),
        (
            {"production": True, "accepted_risks": {"images-by-tags": "later"}},
            "environments.qa.accepted_risks: 'images-by-tags' is not allowed; did you mean 'images-by-tag'? must be "
            "a risk id: images-by-tag, revisions-by-name [LLMEKS-E117]",
        ),
        (
            {"production": True, "accepted_risks": {"images-by-tag": " "}},
            "environments.qa.accepted_risks.images-by-tag: ' ' is not allowed; must say why in one line of 1-160 "
            "characters [LLMEKS-E117]",
        ),
        (
            {"alpha_features": {"node_repair": "heals GPUs"}},
            "environments.qa.alpha_features: 'node_repair' is not allowed; did you mean 'node-repair'? must be an "
            "Alpha feature id: node-repair [LLMEKS-E117]",
        ),
        (
            {"alpha_features": {"node-repair": ""}},
            "environments.qa.alpha_features.node-repair: '' is not allowed; must say why in one line of 1-160 "
            "characters [LLMEKS-E117]",
        ),
        (
            {"workload": {"revision": "main branch"}},
            "environments.qa.workload.revision: 'main branch' is not allowed; must be a Hub commit (40 hex), or a "
            "branch or tag: up to 255 letters, digits and ._-/+ without '..' [LLMEKS-E125]",
        ),
    ],
)
def test_bad_pinning_config_is_one_line(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment("qa", body)
    assert str(info.value) == message


def test_the_risks_prod_accepts_are_warnings_of_every_synth(synthesized: Synthesized) -> None:
    """Warnings, not info lines: `cdk synth` prints them each time and `cdk synth --strict` refuses them."""
    metadata = json.loads((synthesized.outdir / "LlmEks-prod.metadata.json").read_text())
    warnings = [entry["data"] for entry in metadata["/LlmEks-prod"] if entry["type"] == "aws:cdk:warning"]
    accepted = sorted(w.split(" (")[0] for w in warnings if w.startswith("accepted risk"))
    assert accepted == ["accepted risk images-by-tag", "accepted risk revisions-by-name"]
    infos = [entry["data"] for entry in metadata["/LlmEks-prod"] if entry["type"] == "aws:cdk:info"]
    assert not [i for i in infos if i.startswith("accepted risk")]


def test_the_compile_cache_writer_runs_the_server_with_its_adapters_fetched() -> None:
    """The writer compiles what replicas run: the same --lora-modules, so it fetches the same verified adapters."""
    body = {"weights_bucket": {}, "workload": {"weights": "staged", "lora_adapters": {"sql": f"{ADAPTER}@{COMMIT}"}}}
    config = parse_environment("qa", body)
    workloads = build_workloads(config, plan_workloads(config))
    charts = build_charts(
        cdk8s.App(), config, workloads, node_role_name="r", security_group_ids=("sg-0123456789abcdef0",)
    )
    objects = [o for c in charts for o in c.chart.to_json()]
    (job,) = [o for o in objects if o["kind"] == "Job" and "-cc-" in o["metadata"]["name"]]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["wait-for-weights", "lora-0"]
    served = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    # The same arguments, but listening on the pod's loopback only (it serves nobody).
    assert pod["containers"][0]["args"] == [("127.0.0.1" if a == "0.0.0.0" else a) for a in served]


def test_verify_lists_each_accepted_risk_on_every_report() -> None:
    """A row per accepted risk: nothing to measure (unknown: never ok, never failing), on every report until the
    risk is removed."""
    from llm_eks.verify.checks import accepted_risk_rows
    from llm_eks.verify.derive import environment_plan

    config = parse_environment("prod", CDK_JSON["context"]["environments"]["prod"])
    rows = accepted_risk_rows(environment_plan(config, plan_workloads(config)))
    assert [(r.check, r.workload, r.observed, r.verdict) for r in rows] == [
        ("risk", "prod", "accepted: images-by-tag", "unknown"),
        ("risk", "prod", "accepted: revisions-by-name", "unknown"),
    ]
    assert all(r.detail.startswith("accepted_risks: ") for r in rows)
