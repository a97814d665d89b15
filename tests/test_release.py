"""What a release promises about itself: the version `llm-eks --version` prints is CHANGELOG.md's newest release, the
changelog's entries follow its marker convention, and the wheel's compatible ranges admit the exact pins of
constraints.txt (which pins every dependency)."""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from llm_eks.cli import main
from tests.changelog import CHANGELOG, MARKERS, UNRELEASED, entries, newest_release, releases
from tests.conftest import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
# Calendar-versioned: each release is a newer tz database, with no major that could break.
NO_CEILING = {"tzdata"}


def _constraints() -> dict[str, Version]:
    pins = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


def _requirements(*extras: str) -> list[Requirement]:
    runtime = [Requirement(r) for r in PYPROJECT["dependencies"]]
    return runtime + [Requirement(r) for extra in extras for r in PYPROJECT["optional-dependencies"][extra]]


def test_the_version_is_the_newest_release_in_the_changelog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"llm-eks {newest_release()}\n"
    assert PYPROJECT["version"] == metadata.version("llm-eks") == newest_release()


def test_releases_are_newest_first_with_dates() -> None:
    found = releases()
    dated = [(Version(v), datetime.date.fromisoformat(d)) for v, d in found if d is not None]
    assert [v for v, d in found if d is None] in ([], [UNRELEASED])
    if found[0][1] is None:
        assert found[0][0] == UNRELEASED
    assert dated == sorted(dated, reverse=True)
    assert all(v.major == 0 for v, _ in dated), "1.0 changes the promises in CHANGELOG.md's header: rewrite them"


def test_every_marked_entry_uses_a_known_marker_and_cdk_json_entries_carry_their_migration() -> None:
    found = entries()  # raises on an unknown marker
    assert {e.marker for e in found} <= set(MARKERS)
    for entry in found:
        if entry.marker == "cdk.json":
            assert "Migration: " in entry.text, f"{CHANGELOG.name}: {entry.text[:80]}... needs 'Migration: <one line>'"


def test_every_runtime_dependency_has_an_exact_pin_its_range_admits() -> None:
    pins = _constraints()
    for requirement in _requirements("aws", "dev"):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"constraints.txt has no pin for {requirement.name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"pyproject.toml's {requirement} does not admit constraints.txt's {requirement.name}=={pins[name]}"
        )


@pytest.mark.parametrize("requirement", _requirements("aws"), ids=lambda r: r.name)
def test_each_runtime_range_floors_at_the_tested_pin_below_the_next_major(requirement: Requirement) -> None:
    pin = _constraints()[canonicalize_name(requirement.name)]
    specs = {s.operator: Version(s.version) for s in requirement.specifier}
    assert specs.get(">=") == pin, f"{requirement}: the floor must be the tested version {pin}"
    if requirement.name in NO_CEILING:
        assert set(specs) == {">="}
        return
    # 0.x: the minor is the number that may break; from 1.0 the major.
    ceiling = Version(f"0.{pin.minor + 1}") if pin.major == 0 else Version(f"{pin.major + 1}")
    assert specs.get("<") == ceiling, f"{requirement}: the ceiling must be {ceiling}"
    assert set(specs) == {">=", "<"}


def test_the_dev_tools_are_exact_pins() -> None:
    for requirement in _requirements("dev")[len(PYPROJECT["dependencies"]) :]:
        assert [s.operator for s in requirement.specifier] == ["=="], requirement


def _user_facing_text() -> dict[str, str]:
    paths = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md"), *(REPO_ROOT / "examples").glob("*/app.py")]
    return {str(p.relative_to(REPO_ROOT)): p.read_text() for p in paths}


def test_pages_and_examples_name_this_releases_wheel_and_the_pinned_cdk_cli() -> None:
    cli = json.loads((REPO_ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    wheels = {(name, v) for name, text in _user_facing_text().items() for v in re.findall(r"llm_eks-([^-]+)-py3", text)}
    clis = {(name, v) for name, text in _user_facing_text().items() for v in re.findall(r"aws-cdk@([0-9.]+)", text)}
    assert wheels and clis
    assert {v for _, v in wheels} == {newest_release()}, sorted(wheels)
    assert {v for _, v in clis} == {cli}, sorted(clis)


def test_the_ranges_the_install_page_quotes_are_pyprojects() -> None:
    quoted = re.findall(r"`([A-Za-z0-9_.-]+>=[^`]+)`", (REPO_ROOT / "docs/getting-started/install.md").read_text())
    assert quoted
    assert set(quoted) <= set(PYPROJECT["dependencies"])
