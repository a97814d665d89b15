"""Quality gates on the default app: cfn-lint, cdk-nag AwsSolutions, Kubernetes schemas, the review output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import constructs
import pytest

from tests.conftest import ENVIRONMENTS, REPO_ROOT, Synthesized
from tests.kube_schema import assert_valid


def test_cdk_nag_has_no_unacknowledged_findings(synthesized: Synthesized) -> None:
    """Synth carries the AwsSolutions plugin; any unacknowledged finding fails it with a report."""
    assert synthesized.error is None, synthesized.error
    report = synthesized.outdir / "validation-report.json"
    assert not report.exists() or "failure" not in report.read_text().lower()


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_acknowledgement_is_scoped_with_a_one_line_reason(synthesized: Synthesized, env: str) -> None:
    """Each AwsSolutions acknowledgement sits on one resource's construct, never on the stack, with a reason."""
    metadata = json.loads((synthesized.outdir / f"LlmEks-{env}.metadata.json").read_text())
    acknowledged = {
        (path, rule): reason
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
        if rule.startswith("AwsSolutions::")
    }
    assert acknowledged, "expected the kubectl provider and node role acknowledgements"
    for (path, rule), reason in acknowledged.items():
        assert path.count("/") >= 3, f"{rule} acknowledged too broadly at {path}"
        assert reason and "\n" not in reason and len(reason) <= 160, (path, rule, reason)


def test_cfn_lint_passes_every_template(synthesized: Synthesized) -> None:
    assert synthesized.error is None, synthesized.error
    paths = [str(synthesized.outdir / f"LlmEks-{env}.template.json") for env in ENVIRONMENTS]
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    # W3005 only: cfn-lint flags the redundant DependsOn that CDK itself generates.
    result = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", *paths], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_kubernetes_object_is_valid(synthesized: Synthesized, env: str) -> None:
    assert synthesized.error is None, synthesized.error
    assert_valid(synthesized.objects(env))


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_review_output_lists_helm_releases(synthesized: Synthesized, env: str) -> None:
    """cdk.out/manifests/<env>/ holds the objects and the Helm releases a reviewer reads."""
    assert synthesized.error is None, synthesized.error
    files = synthesized.manifests(env)
    for release in files.get("helm-releases.yaml", []):
        assert release["version"], f"{release['chart']} is not pinned"


def test_import_constructs_is_the_library() -> None:
    """The src layout keeps a project folder from shadowing the `constructs` library aws-cdk-lib needs."""
    assert Path(constructs.__file__).parent.parent.name == "site-packages"
    assert hasattr(constructs, "Construct")
    assert not (REPO_ROOT / "constructs").exists()


def test_synth_report_points_at_each_template_and_yaml_folder(synthesized: Synthesized) -> None:
    from llm_eks.infra.report import describe

    assert synthesized.error is None, synthesized.error
    lines = describe(synthesized.outdir)
    assert len(lines) == 2 * len(ENVIRONMENTS)
    dev = lines[0]
    assert dev.startswith(f"dev: {synthesized.outdir / 'LlmEks-dev.template.json'} (")
    assert dev.endswith(" resources)")
    assert lines[1].strip() == f"{synthesized.outdir / 'manifests' / 'dev'}/ (8 YAML files)"


def test_a_failed_check_ends_in_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A finding stops synth with the report and one closing line (exit 1), never a jsii traceback."""
    import aws_cdk as cdk
    from aws_cdk import aws_sqs as sqs

    from llm_eks.infra.app import add_checks, synth_or_exit

    app = cdk.App(outdir=str(tmp_path))
    sqs.Queue(cdk.Stack(app, "Plain"), "Unencrypted", encryption=sqs.QueueEncryption.UNENCRYPTED)
    add_checks(app)
    with pytest.raises(SystemExit) as exit_info:
        synth_or_exit(app)
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"llm-eks: error: validation failed; the findings are listed above and in {tmp_path}/validation-report.json"
    )
