"""Every shell command on the documentation pages and in the README is run offline, or checked against what it
names in the shipped environments (tests/doc_commands.py says how, command by command)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from docgen import examples
from tests.conftest import Synthesized
from tests.doc_commands import (
    CONTEXT,
    SHELL,
    UNCHECKED,
    App,
    check,
    commands,
    fence_marker,
    mentioned_environments,
)
from tests.upstream import REPO_ROOT

BLOCKS = [block for page in examples.pages() for block in examples.blocks(page)]
SHELL_BLOCKS = [block for block in BLOCKS if block.lang in SHELL]


@pytest.fixture(scope="module")
def repository_app(synthesized: Synthesized) -> App:
    assert synthesized.error is None, synthesized.error
    return App.load(REPO_ROOT, manifests=synthesized.manifests, templates=synthesized.template)


def problems(block: examples.Block, app: App, scratch: Path, env: str | None = None) -> list[str]:
    """What is wrong with the block's commands. The block's environment: the one its marker or its text names."""
    context = dict(
        word.split("=", 1) if "=" in word else ("app", word) for word in (fence_marker(block, CONTEXT) or "").split()
    )
    if "app" in context:
        app = App.load(REPO_ROOT / context["app"])
    named = mentioned_environments(block.text, app)
    block_env = context.get("env") or (named[0] if len(named) == 1 else env)
    return [f"{command}: {p}" for command in commands(block) for p in check(command, app, block_env, scratch).problems]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.where)
def test_every_documented_shell_command_runs_or_checks(
    block: examples.Block, repository_app: App, tmp_path: Path
) -> None:
    reason = fence_marker(block, UNCHECKED)
    if reason is not None:
        assert len(reason.split()) >= 3, f"{block.where}: say why the block cannot be checked"
        return
    assert commands(block), f"{block.where}: a shell block without a command"
    found = problems(block, repository_app, tmp_path)
    assert not found, f"{block.where}:\n" + "\n".join(found)


def test_every_fence_says_what_it_holds() -> None:
    """A block without a language would hide commands from the checks above."""
    assert [b.where for b in BLOCKS if not b.lang] == []


_COMMAND_LINE = re.compile(
    r"^(\$ )?(\.venv/bin/)?(llm-eks (plan|manifests|images|models|verify|canary|rollback)\b(?! [\w-]+:)|"
    r"make [a-z]|npx |cdk (synth|deploy|diff|bootstrap)|kubectl [a-z]|aws [a-z]|curl |pip install|"
    r"git (add|diff|commit))"
)


def test_commands_sit_in_shell_blocks() -> None:
    """`text` blocks show output; a command there would go unchecked (console blocks run llm-eks themselves)."""
    hidden = [
        f"{b.where}: {line}"
        for b in BLOCKS
        if b.lang not in SHELL | {"console", "pycon", "python"}
        for line in b.text.splitlines()
        if _COMMAND_LINE.match(line) and " [-h]" not in line  # a usage synopsis (the CLI reference) runs nothing
    ]
    assert hidden == []


def _block(tmp_path: Path, text: str, above: str = "") -> examples.Block:
    page = tmp_path / "page.md"
    page.write_text(f"# Page\n\n{above}\n```sh\n{text}\n```\n")
    (block,) = examples.blocks(page)
    return block


@pytest.mark.parametrize(
    ("text", "expected", "env"),
    [
        # What docs/how-to/deploy.md said before: staging creates no API key (its gateway checks JWTs).
        (
            "aws secretsmanager get-secret-value --secret-id llm-eks/staging/api-key --query SecretString",
            "llm-eks/staging/api-key: environment staging uses no such secret",
            None,
        ),
        # What docs/how-to/gitops.md said before: every shipped environment stages its weights.
        (
            "llm-eks manifests --env dev --node-role-name Role --security-group-id sg-0123456789abcdef0 --out k8s",
            "exits 2: llm-eks: error: --weights-bucket: None is not allowed",
            None,
        ),
        ("llm-eks plan --env qa", "--env qa: no such environment", None),
        ("llm-eks verify --env prod --windw 6h", "the CLI's parser refuses it", None),
        ("llm-eks canary --env prod --workload chat", "--workload chat: environment prod has", None),
        ("kubectl -n inference port-forward svc/vllm-llama 8000:8000", "has no such object", "dev"),
        ("kubectl -n inference-gateway port-forward svc/inference 8080:443", "has no port 443", "staging"),
        ("kubectl -n default create token default --audience sts.amazonaws.com", "the gateway of staging", "staging"),
        ("kubectl apply -f cdk.out/manifests/dev/09-benchmark.yaml", "synth writes no such file", None),
        ("aws eks update-kubeconfig --name llm-eks-dev --regoin us-east-1", "--regoin: not an option", None),
        ("aws eks update-kubeconfig --name llm-eks-qa", "environment dev's cluster is llm-eks-dev", "dev"),
        ("npx cdk deploy LlmEks-qa", "LlmEks-qa: no such stack", None),
        ("npx cdk deploy -c env=dev --require-aproval never", "--require-aproval: not an option of `cdk deploy`", None),
        ('curl -s http://localhost:8000/v1/chat/completions -d \'{"model": "m"}\'', "serves", "dev"),
        ("curl -s http://localhost:8000/v1/chat/completions -d '{}'", "answers only to a credential", "dev"),
        ("pip install 'llm-eks[gpu]'", "declares no extra", None),
        ("pip install boto3", "pyproject.toml's aws extra requires boto3", None),
        ("pip install requests", "neither the llm-eks distribution nor a package of its extras", None),
        ("pip install -c ../llm-eks/constraint.txt llm-eks", "not the repository's constraints.txt", None),
        ("pip install ../llm-eks/dist/llm_eks-0.0.1-py3-none-any.whl", "`make dist` builds ../llm-eks/dist/", None),
        ("pip install 'llm-eks @ git+https://example.com/llm-eks.git@no-such-branch'", "no branch of the", None),
        ("npm install aws-cdk@2.1000.0", "package.json pins aws-cdk ", None),
        ("npm install cdk8s-cli@2.0.0", "package.json pins no cdk8s-cli", None),
        ("python3 -m venv .venv && source venv/bin/activate", "venv/bin/activate: no virtual environment", None),
        ("python3 -m http.server", "only `python3 -m venv DIR`", None),
        ("git -C ../other remote get-url origin", "-C ../other: not the clone", None),
        ("make tset", "No rule to make target", None),
        ("HF_TOKN=x llm-eks models add Qwen/Qwen3-8B", "HF_TOKN is not a variable llm-eks reads", None),
        ("helm install x y", "`helm` is a command the docs tests do not know", None),
    ],
)
@pytest.mark.synth
def test_a_wrong_command_is_named_with_what_is_wrong(
    text: str, expected: str, env: str | None, repository_app: App, tmp_path: Path
) -> None:
    found = problems(_block(tmp_path, text), repository_app, tmp_path, env)
    assert any(expected in p for p in found), found


def test_markers_name_another_app_or_why_a_block_is_unchecked(tmp_path: Path) -> None:
    block = _block(tmp_path, "helm install x y", "<!-- unchecked: a chart of your own, installed by you -->")
    assert fence_marker(block, UNCHECKED) == "a chart of your own, installed by you"
    block = _block(tmp_path, "npx cdk deploy LlmEks-pipeline", "<!-- shell-context: examples/promotion_pipeline -->")
    assert fence_marker(block, CONTEXT) == "examples/promotion_pipeline"
    assert "LlmEks-pipeline" in App.load(REPO_ROOT / "examples" / "promotion_pipeline").stacks


def test_the_canary_commands_run_against_the_pages_own_example() -> None:
    """docs/how-to/promote.md's canary commands are checked against tests/fixtures/docs/canary, whose workloads are
    the page's JSON example, key for key."""
    page = REPO_ROOT / "docs" / "how-to" / "promote.md"
    (example,) = [b for b in BLOCKS if b.page == page and b.lang == "json" and b.text.startswith('"workloads"')]
    fixture = App.load(REPO_ROOT / "tests" / "fixtures" / "docs" / "canary")
    assert json.loads("{" + example.text + "}")["workloads"] == fixture.context["environments"]["prod"]["workloads"]
    assert any(fence_marker(b, CONTEXT) == "tests/fixtures/docs/canary" for b in SHELL_BLOCKS if b.page == page)
