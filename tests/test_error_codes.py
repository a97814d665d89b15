"""Every error a user sees carries a stable code from llm_eks.error_codes, and every listed code is raised somewhere.

An AST scan of src/: each construction of a coded error (ConfigError and its subclasses, UsageError, HubError,
RegistryError, ... and `fail`) passes a listed code as its first argument, or the code of the error it re-raises
(`err.code`); a subclass with an `__init__` of its own passes a listed code to `super().__init__`."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docgen.error_reference import errors_reference
from llm_eks import error_codes
from llm_eks.error_codes import AREAS, E122, E302, E600, ErrorCode, all_codes
from llm_eks.errors import CodedError, ConfigError, ConstructError, errors_at, fail

SRC = Path(__file__).resolve().parents[1] / "src" / "llm_eks"
DOCS = Path(__file__).resolve().parents[1] / "docs"
CODE_NAME = re.compile(r"E\d{3}")


def _trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text()) for p in sorted(SRC.rglob("*.py"))}


TREES = _trees()


def _coded_classes() -> dict[str, ast.ClassDef]:
    """The classes that derive from CodedError anywhere in src/ (by name, to a fixed point)."""
    classes = {n.name: n for t in TREES.values() for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    coded = {"CodedError": classes["CodedError"]}
    while True:
        more = {
            name: node
            for name, node in classes.items()
            if name not in coded and any(isinstance(b, ast.Name) and b.id in coded for b in node.bases)
        }
        if not more:
            return coded
        coded |= more


CODED = _coded_classes()
# A subclass that builds its message itself (NoFitError) sets its code in its own __init__.
OWN_INIT = {
    name
    for name, node in CODED.items()
    if name != "CodedError" and any(isinstance(f, ast.FunctionDef) and f.name == "__init__" for f in node.body)
}


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _takes_a_code(node: ast.FunctionDef) -> bool:
    """A helper that builds an error from the code its caller passes first (`fail`, `unknown_name`)."""
    first = node.args.args[0] if node.args.args else None
    returns = ast.unparse(node.returns) if node.returns is not None else ""
    return (
        first is not None
        and first.arg == "code"
        and ast.unparse(first.annotation or ast.Name("")) == "ErrorCode"
        and returns.endswith("Error")
    )


# The helpers that pass their caller's code on, and the calls inside them (which pass `code`).
HELPERS = {
    node.name: node
    for tree in TREES.values()
    for node in ast.walk(tree)
    if isinstance(node, ast.FunctionDef) and _takes_a_code(node)
}
PASSED_ON = {id(n) for helper in HELPERS.values() for n in ast.walk(helper) if isinstance(n, ast.Call)}


def _sites() -> list[tuple[str, ast.Call]]:
    checked = (set(CODED) - OWN_INIT) | set(HELPERS)
    return [
        (f"{path.relative_to(SRC.parent)}:{node.lineno}", node)
        for path, tree in TREES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called(node) in checked and path.name != "errors.py"
    ]


def _code_of(call: ast.Call) -> str | None:
    """The code a construction passes: `E123` (or `E123 if ... else E456`), `err.code` (kept from the error it
    re-raises), a helper's own `code` parameter, or None."""
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Name) and CODE_NAME.fullmatch(first.id):
        return first.id
    if isinstance(first, ast.Attribute) and first.attr == "code":
        return "(kept)"
    if isinstance(first, ast.Name) and first.id == "code" and id(call) in PASSED_ON:
        return "(kept)"
    if isinstance(first, ast.IfExp):  # one of two codes: both must be listed
        both = [b.id for b in (first.body, first.orelse) if isinstance(b, ast.Name) and CODE_NAME.fullmatch(b.id)]
        return max(both, key=lambda c: c not in LISTED) if len(both) == 2 else None
    return None


LISTED = {f"E{c.number:03d}" for c in all_codes()}


def test_the_scan_sees_every_kind_of_user_facing_error() -> None:
    assert {"ConfigError", "ConstructError", "NoFitError", "ClusterError", "UsageError", "HubError"} <= set(CODED)
    assert {"HubUnreachable", "RegistryError", "RegistryUnreachable"} <= set(CODED)
    assert {"fail", "unknown_name"} == set(HELPERS)
    assert len(_sites()) > 800


def test_every_raise_site_carries_a_listed_code() -> None:
    missing = [where for where, call in _sites() if _code_of(call) is None]
    unlisted = [f"{where} {code}" for where, call in _sites() if (code := _code_of(call)) not in LISTED | {"(kept)"}]
    assert not missing, f"errors without a code (add one from llm_eks/error_codes.py): {missing}"
    assert not unlisted, f"codes not in llm_eks/error_codes.py: {unlisted}"


def test_a_subclass_with_its_own_init_passes_a_listed_code() -> None:
    assert {"NoFitError", "ChecksFailed"} == OWN_INIT
    expected = {"NoFitError": ["E209"], "ChecksFailed": ["E413"]}
    for name in OWN_INIT:
        calls = [
            n
            for n in ast.walk(CODED[name])
            if isinstance(n, ast.Call) and _called(n) == "__init__" and isinstance(n.func, ast.Attribute)
        ]
        assert [_code_of(c) for c in calls] == expected[name], name


def test_every_listed_code_is_raised_somewhere() -> None:
    used = {
        node.id
        for path, tree in TREES.items()
        if path.name != "error_codes.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and CODE_NAME.fullmatch(node.id)
    }
    assert LISTED - used == set(), "codes raised nowhere: retire them (a retired number is not reused)"


def test_the_codes_are_well_formed() -> None:
    codes = all_codes()
    assert len({c.number for c in codes}) == len(codes)
    for name, value in vars(error_codes).items():
        if isinstance(value, ErrorCode):
            assert name == f"E{value.number:03d}", name
    for code in codes:
        assert code.number // 100 in AREAS, code.id
        assert re.fullmatch(r"LLMEKS-E\d{3}", code.id)
        for text in (code.title, code.meaning, code.fix):
            assert text.strip() and "\n" not in text, code.id
        assert code.meaning.endswith(".") and code.fix.endswith("."), code.id
        assert not code.see or (DOCS / code.see).is_file(), code.see


def test_str_is_the_message_then_the_code() -> None:
    err = fail(E122, "workloads.chat.replicas.min", 0, "must be at least 1")
    assert str(err) == "workloads.chat.replicas.min: 0 is not allowed; must be at least 1 [LLMEKS-E122]"
    assert (err.code, err.message) == (E122, "workloads.chat.replicas.min: 0 is not allowed; must be at least 1")
    assert isinstance(err, ValueError) and isinstance(err, CodedError)


def test_a_construct_path_keeps_the_code_once() -> None:
    with pytest.raises(ConstructError) as caught, errors_at("LlmEks-dev/Karpenter"):
        raise ConfigError(E302, "replicas: 0 is not allowed; must be at least 1")
    assert str(caught.value) == "LlmEks-dev/Karpenter: replicas: 0 is not allowed; must be at least 1 [LLMEKS-E302]"
    assert caught.value.code is E302


def test_the_cli_prints_the_code_on_its_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "llm_eks.cli"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == f"llm-eks: error: a command is required: plan (see llm-eks --help) [{E600.id}]\n"


def test_the_errors_page_lists_every_code_once() -> None:
    page = errors_reference()
    for code in all_codes():
        assert page.count(f"### {code.id}: ") == 1, code.id
    assert "errors.md" in (DOCS.parent / "mkdocs.yml").read_text()
