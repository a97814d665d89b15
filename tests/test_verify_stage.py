"""The pipeline's verify step (llm_eks/infra/verify_stage.sh) against a fake `aws` CLI that answers in the real
output shapes (`--query ... --output text|json`) and records every call: how it assumes the launcher role (with the
ExternalId), what it uploads (the checkout with the wheelhouse), what it starts, how it waits, the journal it keeps as
the step's artifact, and that its exit status is the verify build's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from llm_eks.infra.pipeline import verify_stage_script

FAKE_AWS = r'''#!PYTHON
"""A fake aws CLI: one JSON line per call in $FAKE_AWS_LOG; build statuses from $FAKE_STATUSES, one per poll."""
import json, os, shutil, sys
args = sys.argv[1:]
with open(os.environ["FAKE_AWS_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
def option(name):
    return args[args.index(name) + 1]
command = args[:2]
if command == ["sts", "assume-role"]:
    print("ASIAFAKE\tsecret\ttoken")
elif command == ["s3api", "put-object"]:
    shutil.copy(option("--body"), os.environ["FAKE_UPLOAD"])
    print("version-7")
elif command == ["codebuild", "start-build"]:
    print("llm-eks-verify:build-1")
elif command == ["codebuild", "batch-get-builds"]:
    if option("--query") == "builds[0].logs.streamName":
        print("build-1-stream")
    else:
        state = os.environ["FAKE_STATE"]
        polls = int(open(state).read()) if os.path.exists(state) else 0
        open(state, "w").write(str(polls + 1))
        statuses = os.environ["FAKE_STATUSES"].split(",")
        print(statuses[min(polls, len(statuses) - 1)])
elif command == ["logs", "get-log-events"]:
    print(json.dumps(["llm-eks verify staging: 18 checks\n", "ok 17, unknown 1\n"]))
elif command == ["s3", "cp"]:
    source, target = [a for a in args[2:] if not a.startswith("--")]
    journals = os.environ.get("FAKE_JOURNALS")
    if not journals or not source.endswith(".jsonl"):
        sys.exit("fatal error: An error occurred (404) when calling the HeadObject operation: Not Found")
    open(target, "w").write(open(journals).read())
elif command == ["codebuild", "stop-build"]:
    print("{}")
else:
    sys.exit(f"fake aws: unexpected {args}")
'''

OUTPUTS = {
    "VERIFY_PROJECT": "llm-eks-verify",
    "VERIFY_SOURCE_BUCKET": "verify-source",
    "VERIFY_LAUNCHER_ROLE_ARN": "arn:aws:iam::222222222222:role/llm-eks-staging-verify-launcher",
    "VERIFY_LOG_GROUP": "verify-logs",
    "LLM_EKS_ENV": "staging",
    "VERIFY_EXTERNAL_ID": "llm-eks-verify-staging-444444444444",
}


def _run(tmp_path: Path, statuses: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    aws = bin_dir / "aws"
    aws.write_text(FAKE_AWS.replace("#!PYTHON", f"#!{sys.executable}"))
    aws.chmod(0o755)
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True, exist_ok=True)
    (checkout / "cdk.json").write_text("{}")
    (checkout / "src" / "app.py").write_text("print()")
    # CDK Pipelines links an additional input into the checkout: `ln -s $CODEBUILD_SRC_DIR_<artifact> wheelhouse`.
    wheelhouse = tmp_path / "synth-wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    if not (checkout / "wheelhouse").exists():
        (checkout / "wheelhouse").symlink_to(wheelhouse, target_is_directory=True)
    if "FAKE_NO_WHEELHOUSE" not in env:
        (wheelhouse / "requirements.txt").write_text("llm-eks==0.1.0 --hash=sha256:" + "0" * 64 + "\n")
    journal = tmp_path / "journal.jsonl"
    journal.write_text('{"command": "verify", "event": "exit", "exit_status": 0}\n')
    for skipped in (".git", "cdk.out", "node_modules", ".venv"):
        (checkout / skipped).mkdir(exist_ok=True)
        (checkout / skipped / "big").write_text("x")
    log = tmp_path / "aws.log"
    variables: dict[str, Any] = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_AWS_LOG": str(log),
        "FAKE_STATE": str(tmp_path / "polls"),
        "FAKE_UPLOAD": str(tmp_path / "uploaded.zip"),
        "FAKE_STATUSES": statuses,
        "FAKE_JOURNALS": str(journal),
        "VERIFY_POLL_SECONDS": "0",
        **OUTPUTS,
        **env,
    }
    # The command the pipeline's step runs: `bash -c <script>` in the checkout.
    result = subprocess.run(
        ["bash", "-c", verify_stage_script()],
        cwd=checkout,
        env=variables,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def test_a_passing_verify_passes_the_step_and_prints_its_log(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, "IN_PROGRESS,IN_PROGRESS,SUCCEEDED")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "llm-eks: verifying staging in CodeBuild build llm-eks-verify:build-1",
        "llm-eks verify staging: 18 checks",
        "ok 17, unknown 1",
        "llm-eks: staging matches its plan (build llm-eks-verify:build-1)",
    ]
    assert [c[:2] for c in calls] == [
        ["sts", "assume-role"],
        ["s3api", "put-object"],
        ["codebuild", "start-build"],
        ["codebuild", "batch-get-builds"],
        ["codebuild", "batch-get-builds"],
        ["codebuild", "batch-get-builds"],
        ["codebuild", "batch-get-builds"],
        ["logs", "get-log-events"],
        ["s3", "cp"],
        ["s3", "cp"],
    ]
    assume, put, start = calls[0], calls[1], calls[2]
    assert assume[assume.index("--role-arn") + 1] == OUTPUTS["VERIFY_LAUNCHER_ROLE_ARN"]
    assert assume[assume.index("--external-id") + 1] == OUTPUTS["VERIFY_EXTERNAL_ID"]
    # The build's journal and outcome are the step's output artifact.
    (journal,) = [c for c in calls if c[:2] == ["s3", "cp"] and c[-1].endswith(".jsonl")]
    assert journal[-2] == "s3://verify-source/journals/llm-eks-verify:build-1/verify-journal.jsonl"
    output = tmp_path / "checkout" / "verify-output"
    assert json.loads((output / "build.json").read_text()) == {
        "environment": "staging", "build": "llm-eks-verify:build-1", "status": "SUCCEEDED"
    }  # fmt: skip
    assert json.loads((output / "verify-journal.jsonl").read_text())["exit_status"] == 0
    assert "llm-eks: no verify-record.json from build llm-eks-verify:build-1" in result.stderr
    assert put[put.index("--bucket") + 1 : put.index("--bucket") + 4] == ["verify-source", "--key", "source.zip"]
    # The build runs exactly the object version this step uploaded.
    assert start[start.index("--source-version") + 1] == "version-7"
    assert start[start.index("--project-name") + 1] == "llm-eks-verify"
    with zipfile.ZipFile(tmp_path / "uploaded.zip") as archive:
        assert sorted(archive.namelist()) == ["cdk.json", "src/app.py", "wheelhouse/requirements.txt"]


def test_a_failed_verify_fails_the_step(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, "IN_PROGRESS,FAILED")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "llm-eks: error: verify of staging ended FAILED (build llm-eks-verify:build-1): the environment breaches "
        "or drifts from its plan, or verify could not run; see the log above"
    )
    assert "ok 17, unknown 1" in result.stdout


def test_a_verify_that_outlasts_the_wait_is_stopped_and_fails(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, "IN_PROGRESS", VERIFY_MAX_POLLS="3")
    assert result.returncode == 1
    assert "still running after 0 s" in result.stderr
    assert calls[-1][:2] == ["codebuild", "stop-build"]
    assert sum(c[:2] == ["codebuild", "batch-get-builds"] for c in calls) == 4  # 3 polls and the log stream
    assert json.loads((tmp_path / "checkout" / "verify-output" / "build.json").read_text())["status"] == "IN_PROGRESS"


@pytest.mark.parametrize("missing", sorted(OUTPUTS))
def test_a_missing_output_is_named(tmp_path: Path, missing: str) -> None:
    result, calls = _run(tmp_path, "SUCCEEDED", **{missing: ""})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"llm-eks: error: {missing} is not set (the verify step sets it from the stage's stack outputs and its own "
        "environment)"
    )
    assert calls == []


def test_without_the_wheelhouse_nothing_is_started(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, "SUCCEEDED", FAKE_NO_WHEELHOUSE="1")
    assert result.returncode == 2 and calls == []
    assert result.stderr.strip() == (
        "llm-eks: error: no wheelhouse/requirements.txt in the checkout (the synth step's wheelhouse output)"
    )
