"""The shell commands of the documentation (```sh, ```bash and ```shell blocks on every page and in the README), and
what each one is checked against. Blocks are parsed with bashlex, a port of bash's own parser: pipelines, `&&`
lists, `VAR=$(...)` substitutions and quoting are read as bash reads them.

Every command is run where it can run offline, or else checked against what it names:

- `llm-eks ...`: parsed by the CLI's own parser; `--env` and `--workload` must exist in the app's cdk.json, and a
  command that needs something of its environment must find it there (`canary` a workload with a next version
  behind a gateway); `plan` and `manifests` are then run (offline), and must exit 0.
- `make TARGET`: `make -n TARGET` (the target exists and its recipe expands).
- `cdk` / `npx cdk`: every option is one of `cdk <command> --help` (the pinned CDK CLI); `-c env=NAME` and stack
  names are the app's; any other `-c` key is one the app reads; `aws://ACCOUNT/REGION` and `--trust` name the app's
  accounts.
- `aws SERVICE OPERATION`: the operation and its options exist in botocore's model of the service (what the AWS CLI
  is generated from; `eks update-kubeconfig` is one of the CLI's own commands); a secret it reads or creates is one
  the environment uses, a cluster name is the environment's.
- `kubectl`: every object it names (`svc/NAME`, `job/NAME`, `-f cdk.out/manifests/...`) exists in the synthesized
  manifests of the environment, in that namespace, with that port; `create token --audience` names the audience the
  environment's gateway accepts.
- `curl`: the path is an OpenAI route vLLM serves, the body is JSON whose `model` the environment serves, and a
  request to an endpoint that wants a credential sends one.
- `pip install`: this distribution, with extras it declares, as the name, the wheel `make dist` builds (file name and
  folder) or a git URL at a branch or release tag the repository has; or a package of one of its extras, with that
  extra's range; `-c` the repository's constraints.txt. Paths under `../llm-eks/` are the clone's (the install page
  puts it beside the reader's project).
- `npm install`: the packages package.json pins, at those versions.
- `python3 -m venv DIR` and `source DIR/bin/activate` of a venv the block creates or the one `make setup` creates.
- `git`: files of the app or ones llm-eks writes; `-C` the clone.
- Output filters (`jq`, `head`, `tail`, `grep`) and `openssl rand` are allowed and not checked.

Any other program fails the test. A block that cannot be checked says so on the line above its fence:
`<!-- unchecked: the reason -->`. A block about another app than the repository's own names its folder there,
`<!-- shell-context: examples/promotion_pipeline -->` (its cdk.json, environments and accounts are used instead), and
a block whose commands name no environment names it there: `<!-- shell-context: env=staging -->`. Otherwise the
environment a command means is the one it names (`--env dev`, `-c env=dev`, `llm-eks/dev/...`, `manifests/dev/`,
`LlmEks-dev`, `llm-eks-dev`), else the one its block names.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import shlex
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import bashlex

from docgen.examples import Block
from llm_eks.config import EnvironmentConfig, load_environments
from llm_eks.hub.records import MODELS_DIR
from tests.upstream import REPO_ROOT

SHELL = {"sh", "bash", "shell"}
UNCHECKED = re.compile(r"^<!-- unchecked: (.+) -->$")
CONTEXT = re.compile(r"^<!-- shell-context: (\S+) -->$")
FILTERS = {"jq", "head", "tail", "grep", "sort", "wc"}


@dataclass(frozen=True)
class Command:
    """One simple command of a block: its words (quotes removed, synopsis brackets `[...]` dropped) and the
    `VAR=value` assignments before it."""

    block: Block
    words: tuple[str, ...]
    assignments: tuple[str, ...] = ()

    @property
    def program(self) -> str:
        word = self.words[0] if self.words else ""
        return "llm-eks" if word.endswith("/llm-eks") else word

    @property
    def args(self) -> tuple[str, ...]:
        # `npx cdk ...` runs the project's pinned CDK CLI.
        return self.words[2:] if self.words[:2] == ("npx", "cdk") else self.words[1:]

    def __str__(self) -> str:
        return " ".join([*self.assignments, *(shlex.quote(w) for w in self.words)])


def fence_marker(block: Block, pattern: re.Pattern[str]) -> str | None:
    """The marker on the line right above the block's fence, if it is one of `pattern`."""
    lines = block.page.read_text().splitlines()
    above = lines[block.line - 2].strip() if block.line >= 2 else ""
    match = pattern.match(above)
    return match.group(1) if match else None


def commands(block: Block) -> list[Command]:
    """Every simple command of a block, those inside `$(...)` too, in the order bash runs them."""
    found: list[Command] = []

    def walk(node: Any) -> None:
        if node.kind == "command":
            words, assignments = [], []
            for part in node.parts:
                for inner in _substitutions(part):
                    walk(inner)
                if part.kind == "assignment" and not words:
                    assignments.append(part.word)
                elif part.kind == "word":
                    words.append(part.word)
            words = [_unbracket(w) for w in words]
            found.append(Command(block, tuple(w for w in words if w), tuple(assignments)))
            return
        for child in getattr(node, "parts", []) or getattr(node, "list", []):
            walk(child)

    for tree in bashlex.parse(block.text):
        walk(tree)
    return [c for c in found if c.words or c.assignments]


def _unbracket(word: str) -> str:
    """A word without the brackets of a synopsis' optional part (`[--flag value]`), keeping `name[extra]`'s."""
    word = word.removeprefix("[")
    return word[:-1] if word.endswith("]") and word.count("]") > word.count("[") else word


def _substitutions(node: Any) -> Iterator[Any]:
    for part in getattr(node, "parts", []) or []:
        if part.kind == "commandsubstitution":
            yield part.command
        else:
            yield from _substitutions(part)


# -- the app a block is about ------------------------------------------------------------------------------------


@dataclass
class App:
    """A CDK app folder as the docs' commands see it: its environments, stacks and accounts, and (for the
    repository's own app) the synthesized review YAML."""

    folder: Path
    context: dict[str, Any]
    environments: dict[str, EnvironmentConfig]
    manifests: Callable[[str], dict[str, list[dict[str, Any]]]] | None = None
    templates: Callable[[str], dict[str, Any]] | None = None

    @classmethod
    def load(cls, folder: Path, **synthesized: Any) -> App:
        context = json.loads((folder / "cdk.json").read_text())["context"]
        configs = load_environments(context, folder / MODELS_DIR)
        return cls(folder, context, dict(configs), **synthesized)

    @property
    def stacks(self) -> set[str]:
        from llm_eks.infra.pipeline import PIPELINE_STACK_NAME

        names = {c.stack_name for c in self.environments.values()}
        return names | {PIPELINE_STACK_NAME} if "pipeline" in self.context else names

    @property
    def accounts(self) -> set[str]:
        found = {c.account for c in self.environments.values() if c.account}
        return found | ({self.context["pipeline"]["account"]} if "pipeline" in self.context else set())


_ENV_MENTIONS = (
    r"--env[= ](\S+)",
    r"\benv=([\w-]+)",
    r"\bllm-eks/([\w-]+)/",
    r"\bmanifests/([\w-]+)/",
    r"\bLlmEks-([\w-]+)",
    r"\bllm-eks-([\w-]+)\b",
)


def mentioned_environments(text: str, app: App) -> list[str]:
    found = [m for pattern in _ENV_MENTIONS for m in re.findall(pattern, text)]
    return list(dict.fromkeys(name for name in found if name in app.environments))


@dataclass
class Verdict:
    """How a command was checked, and what is wrong with it (nothing, when it passes)."""

    how: str
    problems: list[str] = field(default_factory=list)


def check(command: Command, app: App, block_env: str | None, scratch: Path) -> Verdict:
    env = next(iter(mentioned_environments(str(command), app)), block_env)
    checker = CHECKERS.get(command.program)
    if checker is None and not command.words:  # VAR=$(...): its command is checked on its own
        return Verdict("a shell variable for the commands after it")
    if checker is None:
        return Verdict(
            "unknown", [f"`{command.program}` is a command the docs tests do not know: add a checker to "
                        "tests/doc_commands.py, or mark the block <!-- unchecked: reason -->"]
        )  # fmt: skip
    unknown = [a.split("=", 1)[0] for a in command.assignments if not _known_var(a)]
    problems = [f"{name} is not a variable llm-eks reads" for name in unknown]
    verdict = checker(command, app, env, scratch)
    verdict.problems[:0] = problems
    return verdict


@cache
def _source_text() -> str:
    return "\n".join(p.read_text() for p in sorted((REPO_ROOT / "src" / "llm_eks").rglob("*.py")))


def _known_var(assignment: str) -> bool:
    """`VAR=value cmd`: VAR is one llm-eks (or the CDK it runs) reads, as its source says."""
    return re.search(rf"\b{re.escape(assignment.split('=', 1)[0])}\b", _source_text()) is not None


# -- llm-eks ------------------------------------------------------------------------------------------------------

# Commands that need nothing but the app's folder: the test runs them.
_OFFLINE = {"plan", "manifests"}


def _llm_eks(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    from llm_eks.cli import main, parser
    from llm_eks.cli.parsing import UsageError

    argv = list(command.args)
    if argv in (["--version"], ["--help"], ["-h"]):
        return _llm_eks_about(argv)
    try:
        args = parser().parse_args(argv)
    except UsageError as err:
        return Verdict("parsed by the CLI's parser", [f"the CLI's parser refuses it: {err}"])
    problems = []
    name = getattr(args, "env", None)
    config = app.environments.get(name) if name else None
    if name is not None and config is None:
        problems.append(f"--env {name}: no such environment in {app.folder.name}/cdk.json")
    workload = getattr(args, "workload", None)
    if config is not None and workload is not None:
        served = {s.key: s for s in config.served}
        if workload not in served:
            problems.append(f"--workload {workload}: environment {name} has {sorted(k for k in served if k)}")
        elif args.command in ("canary", "rollback"):
            w = served[workload].config
            if w.canary is None or config.gateway is None:
                problems.append(f"{args.command} needs a workload with a canary behind a gateway; {workload} has not")
    files = [getattr(args, a) for a in ("model_config",) if getattr(args, a, None)]
    missing = [f for f in files if not (app.folder / f).exists()]
    if problems or args.command not in _OFFLINE or missing:
        how = "parsed by the CLI's parser; names checked against cdk.json"
        if missing:
            how += f" (not run: {', '.join(missing)} is the reader's own file)"
        return Verdict(how, problems)
    if args.command == "manifests":  # written where the test can throw it away (argparse takes the last --out)
        argv += ["--out", str(scratch / args.out)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(app.folder):
        code = main(argv)
    return Verdict("run offline (exit 0)", [] if code == 0 else [f"exits {code}: {err.getvalue().strip()}"])


def _llm_eks_about(argv: list[str]) -> Verdict:
    """`llm-eks --version` (or its help): run; the version is pyproject.toml's (test_release.py holds that equal to
    CHANGELOG.md's newest release)."""
    from llm_eks.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    problems = [] if code == 0 else [f"exits {code}"]
    if argv == ["--version"] and out.getvalue() != f"llm-eks {_project()['version']}\n":
        problems.append(f"prints {out.getvalue()!r}, not pyproject.toml's version {_project()['version']}")
    return Verdict("run offline (exit 0)", problems)


# -- make, cdk ----------------------------------------------------------------------------------------------------


def _make(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    run = subprocess.run(
        ["make", "-n", *command.args], cwd=app.folder, capture_output=True, text=True, timeout=60, check=False
    )
    return Verdict("make -n (the target exists)", [] if run.returncode == 0 else [run.stderr.strip()])


@cache
def cdk_options(subcommand: str) -> frozenset[str]:
    """The options `cdk <subcommand> --help` lists (the pinned CDK CLI in node_modules), global ones included."""
    run = subprocess.run(
        [str(REPO_ROOT / "node_modules" / ".bin" / "cdk"), subcommand, "--help"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    options = set()
    for match in re.finditer(r"^  (--[\w-]+)(?:, (-\w))?", run.stdout, re.M):
        options.update(o for o in match.groups() if o)
    return frozenset(options)


_CDK_COMMANDS = {"synth", "deploy", "diff", "bootstrap", "destroy", "list", "ls"}


def _cdk(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    args = list(command.args)
    if not args or args[0] not in _CDK_COMMANDS:
        return Verdict("cdk", [f"not a cdk command llm-eks documents: {args[:1]}"])
    sub, problems = args[0], []
    options = cdk_options(sub)
    i = 1
    while i < len(args):
        word = args[i]
        if word.startswith("-"):
            flag, _, inline = word.partition("=")
            if flag not in options and flag.removeprefix("--no-") not in {o.removeprefix("--") for o in options}:
                problems.append(f"{flag}: not an option of `cdk {sub}`")
            value = inline or (args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else "")
            if flag in ("-c", "--context"):
                problems += _cdk_context(value, app)
            if flag == "--trust" and value not in app.accounts:
                problems.append(f"--trust {value}: not the pipeline's account in {app.folder.name}/cdk.json")
            i += 1 if inline or not value else 2
            continue
        if sub == "bootstrap":
            problems += _bootstrap_target(word, app)
        elif word not in app.stacks:
            problems.append(f"{word}: no such stack in {app.folder.name} (it has {sorted(app.stacks)})")
        i += 1
    return Verdict(f"options of `cdk {sub} --help`; stacks, environments and accounts of cdk.json", problems)


def _cdk_context(value: str, app: App) -> list[str]:
    key, _, given = value.partition("=")
    if key == "env":
        return [] if given in app.environments else [f"-c env={given}: no such environment"]
    return [] if f'"{key}"' in _source_text() else [f"-c {key}: not a context key llm-eks reads"]


def _bootstrap_target(word: str, app: App) -> list[str]:
    match = re.fullmatch(r"aws://(\d{12}|[A-Z_]+)/([a-z0-9-]+|[A-Z_]+)", word)
    if match is None:
        return [f"{word}: not aws://ACCOUNT/REGION"]
    account = match.group(1)
    if account.isdigit() and account not in app.accounts:
        return [f"{word}: account {account} is none of {sorted(app.accounts)} in {app.folder.name}/cdk.json"]
    return []


# -- aws ----------------------------------------------------------------------------------------------------------

# The AWS CLI v2's global options (aws/aws-cli, branch v2 at 73fb33bb171ace3e9eaa03308f76e5de50c21393,
# awscli/data/cli.json) and its own commands that botocore's models do not hold (awscli/customizations/eks/
# update_kubeconfig.py ARG_TABLE).
AWS_GLOBAL = {
    "--debug", "--endpoint-url", "--no-verify-ssl", "--no-paginate", "--output", "--query", "--profile", "--region",
    "--version", "--color", "--no-sign-request", "--ca-bundle", "--cli-read-timeout", "--cli-connect-timeout",
    "--cli-binary-format", "--no-cli-pager", "--cli-auto-prompt", "--no-cli-auto-prompt", "--cli-error-format",
}  # fmt: skip
AWS_CLI_COMMANDS = {
    ("eks", "update-kubeconfig"): {
        "--name", "--kubeconfig", "--role-arn", "--proxy-url", "--dry-run", "--verbose", "--alias", "--user-alias",
        "--assume-role-arn",
    },
}  # fmt: skip


def aws_options(service: str, operation: str) -> set[str] | None:
    """The options of `aws SERVICE OPERATION` (its input shape's members, as the CLI names them), or None."""
    import botocore.session
    from botocore import xform_name

    if (service, operation) in AWS_CLI_COMMANDS:
        return AWS_CLI_COMMANDS[(service, operation)]
    model = botocore.session.get_session().get_service_model(service)
    names = {xform_name(name, "-"): name for name in model.operation_names}
    if operation not in names:
        return None
    shape = model.operation_model(names[operation]).input_shape
    return {f"--{xform_name(member, '-')}" for member in (shape.members if shape else {})}


def _aws(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    service, operation, *rest = command.args
    options = aws_options(service, operation)
    if options is None:
        return Verdict("aws", [f"aws {service} {operation}: no such operation"])
    problems = [f"{w}: not an option of aws {service} {operation}" for w in rest if w.startswith("--")
                and w not in options | AWS_GLOBAL]  # fmt: skip
    values = dict(itertools.pairwise(rest))
    config = app.environments.get(env) if env else None
    if service in ("secretsmanager", "eks") and config is None:
        problems.append("the command names no environment")
    elif service == "secretsmanager":
        secret = values.get("--secret-id") or values.get("--name")
        if secret not in _secrets(app, env):
            problems.append(f"{secret}: environment {env} uses no such secret (it uses {sorted(_secrets(app, env))})")
    elif service == "eks" and values.get("--name") != config.cluster_name:
        problems.append(f"--name {values.get('--name')}: environment {env}'s cluster is {config.cluster_name}")
    if "--stack-name" in values and values["--stack-name"] not in app.stacks:
        problems.append(f"--stack-name {values['--stack-name']}: no such stack (the app has {sorted(app.stacks)})")
    return Verdict("operation and options in botocore's model; names against the environment", problems)


def _secrets(app: App, env: str) -> set[str]:
    """The Secrets Manager secrets an environment uses: those its stack creates (the generated API keys) and those
    its workloads name for you to create (Hub tokens, your own API keys)."""
    config = app.environments[env]
    named = {s for w in config.served for s in (w.config.hf_token_secret, w.config.api_key_secret) if s}
    if app.templates is None:  # another app than the repository's: what its config names, and the default key name
        return named | {f"llm-eks/{env}/api-key"}
    resources = app.templates(env)["Resources"].values()
    return named | {r["Properties"]["Name"] for r in resources if r["Type"] == "AWS::SecretsManager::Secret"}


# -- kubectl, curl ------------------------------------------------------------------------------------------------

_KINDS = {"svc": "Service", "service": "Service", "job": "Job", "deploy": "Deployment", "deployment": "Deployment",
          "ingress": "Ingress", "sa": "ServiceAccount", "serviceaccount": "ServiceAccount"}  # fmt: skip
# kubectl's flags that take a value (kubectl reference: global -n/--namespace, --context, --kubeconfig; apply -f;
# get -o/-l; wait --for/--timeout; logs --tail/-c; create token --audience/--duration).
_KUBECTL_VALUED = {
    "-n", "--namespace", "--context", "--kubeconfig", "-f", "--filename", "-o", "--output", "-l", "--selector",
    "--for", "--timeout", "--tail", "-c", "--container", "--audience", "--duration",
}  # fmt: skip


def _objects(app: App, env: str) -> list[dict[str, Any]]:
    """The environment's objects as the cluster holds them: the review YAML, and the Service Envoy Gateway creates
    for each Gateway of class llm-eks (GatewayNamespace mode: named after the Gateway, in its namespace, with the
    listeners' ports: envoyproxy/gateway v1.9.0 internal/gatewayapi/translator.go, where the proxy's infra name is
    the Gateway's, and internal/infrastructure/kubernetes/proxy/resource_provider.go Name)."""
    assert app.manifests is not None
    objects = [o for name, objs in app.manifests(env).items() if name != "helm-releases.yaml" for o in objs]
    for gateway in [o for o in objects if o["kind"] == "Gateway" and o["spec"]["gatewayClassName"] == "llm-eks"]:
        ports = [{"port": listener["port"]} for listener in gateway["spec"]["listeners"]]
        metadata = {"name": gateway["metadata"]["name"], "namespace": gateway["metadata"]["namespace"]}
        objects.append({"kind": "Service", "metadata": metadata, "spec": {"ports": ports}})
    return objects


def _kubectl(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    if app.manifests is None or env is None:
        return Verdict("kubectl", ["kubectl needs an environment of the repository's app to check against"])
    values: dict[str, str] = {}
    positional: list[str] = []
    args = list(command.args)
    while args:
        word = args.pop(0)
        flag, eq, inline = word.partition("=")
        if flag in _KUBECTL_VALUED:
            values[flag] = inline if eq else args.pop(0)
        elif not word.startswith("-"):
            positional.append(word)
    namespace = values.get("-n", values.get("--namespace", "default"))
    verb, *refs = positional
    problems = []
    objects = _objects(app, env)
    if verb == "apply":
        path = values.get("-f", values.get("--filename", ""))
        match = re.fullmatch(r"cdk\.out/manifests/([\w-]+)/([\w.-]+)", path)
        if match is None or match.group(2) not in app.manifests(match.group(1)):
            problems.append(f"-f {path}: synth writes no such file")
        return Verdict("files and objects of the synthesized review YAML", problems)
    if verb == "create" and refs[:1] == ["token"]:
        audiences = {
            a
            for o in objects
            if o["kind"] == "SecurityPolicy" and "jwt" in o["spec"]
            for provider in o["spec"]["jwt"]["providers"]
            for a in provider.get("audiences", [])
        }
        if values.get("--audience") not in audiences:
            problems.append(f"--audience {values.get('--audience')}: the gateway of {env} accepts {sorted(audiences)}")
        return Verdict("the token's audience against the gateway's JWT SecurityPolicy", problems)
    if verb == "get" and len(refs) == 2:
        refs = [f"{refs[0]}/{refs[1]}"]
    if verb == "get" and len(refs) == 1 and "/" not in refs[0]:
        kinds = {o["kind"].lower() for o in objects}
        if refs[0] not in {k + plural for k in kinds for plural in ("", "s", "es")} | set(_KINDS):
            problems.append(f"get {refs[0]}: environment {env} has no object of that kind")
    for ref in (r for r in refs if "/" in r):
        kind, name = ref.split("/", 1)
        found = [
            o
            for o in objects
            if o["kind"] == _KINDS.get(kind)
            and (o["metadata"]["name"], o["metadata"].get("namespace", "default")) == (name, namespace)
        ]
        if not found:
            problems.append(f"{ref} in namespace {namespace}: environment {env} has no such object")
        elif verb == "port-forward":
            remote = int(refs[-1].split(":")[-1])
            if remote not in [p["port"] for p in found[0]["spec"]["ports"]]:
                problems.append(f"{ref} has no port {remote}")
    return Verdict("objects of the synthesized review YAML (kind, name, namespace, port)", problems)


# The paths of vLLM's OpenAI-compatible server that the docs call (vllm/entrypoints/openai).
_OPENAI_PATHS = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/embeddings"}


def _curl(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    config = app.environments.get(env) if env else None
    if config is None:
        return Verdict("curl", ["the request names no environment"])
    args = list(command.args)
    url = next(a for a in args if "://" in a)
    headers = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-H", "--header")]
    data = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-d", "--data")), None)
    problems = []
    if urlsplit(url).path not in _OPENAI_PATHS:
        problems.append(f"{url}: not a route of vLLM's OpenAI server")
    if data is not None:
        body = json.loads(data)
        served = {p.served_model_name for p in _plans(app, env)}
        if body.get("model") not in served:
            problems.append(f"model {body.get('model')!r}: environment {env} serves {sorted(served)}")
    wants_credential = config.gateway is not None or any(s.config.api_key for s in config.served)
    if wants_credential and not any(h.lower().startswith("authorization: bearer $") for h in headers):
        problems.append(f"environment {env} answers only to a credential: send Authorization: Bearer")
    return Verdict("route, body and credential against the environment's plan", problems)


@cache
def _plans_of(folder: Path, env: str) -> tuple[Any, ...]:
    from llm_eks.config.plans import plan_workloads

    return plan_workloads(App.load(folder).environments[env])


def _plans(app: App, env: str) -> tuple[Any, ...]:
    return _plans_of(app.folder, env)


# -- pip, npm, python, source, git, filters -----------------------------------------------------------------------

# Where the install page puts the clone of this repository: beside the reader's own project.
CLONE = "../llm-eks"


def _project() -> dict[str, Any]:
    return dict(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"])


def _in_repository(path: str) -> Path:
    """A path as a documented command names it: under `../llm-eks/` the clone's, otherwise the repository's."""
    if path == CLONE or path.startswith(f"{CLONE}/"):
        return REPO_ROOT / path.removeprefix(CLONE).lstrip("/")
    return REPO_ROOT / path


@cache
def dist_folder() -> str:
    """The folder `make dist` writes the wheel into (its recipe's `--outdir`, as `make -n dist` expands it)."""
    run = subprocess.run(["make", "-n", "dist"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=True)
    match = re.search(r"-m build .*--outdir (\S+)", run.stdout)
    assert match is not None, run.stdout
    return match.group(1)


def wheel_file_name() -> str:
    """The wheel `make dist` builds: pure Python, so one py3-none-any wheel of pyproject.toml's name and version
    (the binary distribution format's escaping; test_package.py holds a real build to this name)."""
    project = _project()
    return f"{re.sub(r'[-_.]+', '_', project['name']).lower()}-{project['version']}-py3-none-any.whl"


def _extras(spec: str) -> tuple[str, set[str]]:
    """`name[a,b]` as (name, {a, b})."""
    match = re.fullmatch(r"(.+?)(?:\[([\w,-]+)\])?", spec)
    assert match is not None
    return match.group(1), set(match.group(2).split(",")) if match.group(2) else set()


def _undeclared(extras: set[str], spec: str) -> list[str]:
    unknown = extras - set(_project().get("optional-dependencies", {}))
    return [f"{spec}: pyproject.toml declares no extra {sorted(unknown)}"] if unknown else []


def _git_ref_known(ref: str) -> bool:
    """A release tag (`vX.Y.Z` of a CHANGELOG.md release) or a branch the repository has."""
    from tests.changelog import releases

    if ref in {f"v{version}" for version, date in releases() if date is not None}:
        return True
    run = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname)", f"refs/heads/{ref}", f"refs/remotes/*/{ref}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return run.returncode == 0 and bool(run.stdout.strip())


def _pip_requirement(spec: str) -> list[str]:
    """What is wrong with one requirement of `pip install`."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    project = _project()
    direct = re.fullmatch(r"(?P<name>[\w.-]+(?:\[[\w,-]+\])?) @ git\+(?P<url>.+)@(?P<ref>[\w./-]+)", spec)
    if direct is not None:
        name, extras = _extras(direct["name"])
        if canonicalize_name(name) != canonicalize_name(project["name"]):
            return [f"{spec}: not the {project['name']} distribution"]
        problems = _undeclared(extras, spec)
        if not _git_ref_known(direct["ref"]):
            problems.append(f"{spec}: @{direct['ref']} is no branch of the repository nor a release tag (vX.Y.Z)")
        return problems
    path, extras = _extras(spec)
    if path.endswith(".whl"):
        wheel = _in_repository(path)
        expected = REPO_ROOT / dist_folder() / wheel_file_name()
        problems = _undeclared(extras, spec)
        if wheel != expected:
            problems.append(f"{path}: `make dist` builds {CLONE}/{expected.relative_to(REPO_ROOT)}")
        return problems
    try:
        requirement = Requirement(spec)
    except InvalidRequirement as err:
        return [f"{spec}: not a requirement pip reads ({err})"]
    if canonicalize_name(requirement.name) == canonicalize_name(project["name"]):
        return _undeclared(requirement.extras, spec)
    for extra, requirements in project.get("optional-dependencies", {}).items():
        if extra == "dev":  # the project's own tools, not something a reader installs
            continue
        for declared in map(Requirement, requirements):
            if canonicalize_name(declared.name) == canonicalize_name(requirement.name):
                if requirement.specifier != declared.specifier or requirement.extras != declared.extras:
                    return [f"{spec}: pyproject.toml's {extra} extra requires {declared}: install that range"]
                return []
    return [f"{spec}: neither the {project['name']} distribution nor a package of its extras"]


def _pip(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    if command.args[:1] != ("install",):
        return Verdict("pip", [f"pip {' '.join(command.args[:1])}: only `pip install` is documented"])
    problems: list[str] = []
    args = list(command.args[1:])
    while args:
        word = args.pop(0)
        flag, eq, inline = word.partition("=")
        if flag in ("-c", "--constraint"):
            path = inline if eq else args.pop(0)
            if _in_repository(path) != REPO_ROOT / "constraints.txt":
                problems.append(f"-c {path}: not the repository's constraints.txt ({CLONE}/constraints.txt)")
        elif not word.startswith("-"):
            problems += _pip_requirement(word)
    return Verdict("the distribution, its wheel, extras and constraints against pyproject.toml and make dist", problems)


def _npm(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    manifest = json.loads((REPO_ROOT / "package.json").read_text())
    pins = {**manifest.get("dependencies", {}), **manifest.get("devDependencies", {})}
    if command.args[:1] not in (("install",), ("i",)):
        return Verdict("npm", [f"npm {' '.join(command.args[:1])}: only `npm install` is documented"])
    problems = []
    for spec in (a for a in command.args[1:] if not a.startswith("-")):
        name, _, version = spec.rpartition("@") if "@" in spec.lstrip("@") else (spec, "", "")
        if name not in pins:
            problems.append(f"{spec}: package.json pins no {name}")
        elif version != pins[name]:
            problems.append(f"{spec}: package.json pins {name} {pins[name]}")
    return Verdict("packages and versions against package.json", problems)


_PYTHONS = {"python", "python3"}


@cache
def _setup_venv() -> str:
    """The virtual environment `make setup` creates (the Makefile's VENV)."""
    match = re.search(r"^VENV := (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert match is not None
    return match.group(1)


def _venvs_created(block: Block) -> list[str]:
    return [c.args[2] for c in commands(block) if c.program in _PYTHONS and c.args[:2] == ("-m", "venv")]


def _python(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    if command.args[:2] != ("-m", "venv") or len(command.args) != 3:
        return Verdict("python", ["only `python3 -m venv DIR` is documented"])
    return Verdict("creates a virtual environment")


def _source(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    known = [*_venvs_created(command.block), _setup_venv()]
    path = " ".join(command.args)
    if path not in {f"{venv}/bin/activate" for venv in known}:
        return Verdict("source", [f"{path}: no virtual environment the block or `make setup` creates ({known})"])
    return Verdict("activates a virtual environment the block or `make setup` creates")


def _git(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    from llm_eks.images.lock import LOCK_FILE

    args, problems = list(command.args), []
    if args[:1] == ["-C"]:
        where = args[1]
        args = args[2:]
        if where != CLONE:
            problems.append(f"-C {where}: not the clone ({CLONE})")
    sub, *rest = args
    files = [w for w in rest if not w.startswith("-") and sub in ("diff", "add")]
    missing = [f for f in files if not (app.folder / f).exists() and f != LOCK_FILE]
    problems += [f"{f}: no such file" for f in missing]
    return Verdict("files of the app, or the lock file llm-eks writes; -C the clone", problems)


def _filter(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    return Verdict("an output filter")


def _openssl(command: Command, app: App, env: str | None, scratch: Path) -> Verdict:
    return Verdict("openssl rand", [] if command.args[:1] == ("rand",) else ["only `openssl rand` is documented"])


CHECKERS: dict[str, Callable[[Command, App, str | None, Path], Verdict]] = {
    "llm-eks": _llm_eks,
    "make": _make,
    "npx": _cdk,
    "cdk": _cdk,
    "aws": _aws,
    "kubectl": _kubectl,
    "curl": _curl,
    "pip": _pip,
    "npm": _npm,
    "python": _python,
    "python3": _python,
    "source": _source,
    "git": _git,
    "openssl": _openssl,
    **{name: _filter for name in FILTERS},
}
