"""How much of the review YAML is escaped one-line strings: scalars written quoted ('...' or "...") although their
value holds line breaks, so a script or a dashboard reads as `\\n`-joined text (or, single-quoted, with a blank line
between every line). Block literals (`|`) are the readable form.

    python -m tests.review_yaml [FOLDER]     # FOLDER: tests/golden (default) or a synth's cdk.out/manifests/..

For each environment: the review YAML's characters, the characters those quoted scalars take in the file (their
source span), and the characters of their values (the measure the issue that asked for block literals used).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

GOLDEN = Path(__file__).parent / "golden"


@dataclass(frozen=True)
class QuotedScalar:
    """One quoted scalar whose value holds a line break."""

    line: int  # 1-based, where it starts
    span: int  # characters it takes in the file
    value: int  # characters of its value


def quoted_multiline_scalars(text: str) -> list[QuotedScalar]:
    """The quoted scalars of a YAML stream whose values hold a line break."""
    found = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.ScalarEvent) and event.style in ('"', "'") and "\n" in event.value:
            start, end = event.start_mark, event.end_mark
            found.append(QuotedScalar(start.line + 1, end.index - start.index, len(event.value)))
    return found


@dataclass(frozen=True)
class Share:
    """One environment's review YAML: total characters, and those of quoted multi-line scalars."""

    total: int
    span: int
    value: int

    def percent(self, part: int) -> float:
        return 100.0 * part / self.total if self.total else 0.0


def share(files: list[Path]) -> Share:
    total = span = value = 0
    for path in files:
        text = path.read_text()
        total += len(text)
        for scalar in quoted_multiline_scalars(text):
            span += scalar.span
            value += scalar.value
    return Share(total, span, value)


def environments(folder: Path) -> dict[str, list[Path]]:
    """Review YAML files by environment: `<env>/manifests/*.yaml` (the golden layout) or `<env>/*.yaml` (a synth's
    cdk.out/manifests)."""
    found = {}
    for env in sorted(p for p in folder.iterdir() if p.is_dir()):
        files = sorted((env / "manifests").glob("*.yaml")) or sorted(env.glob("*.yaml"))
        if files:
            found[env.name] = files
    return found


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else GOLDEN
    print(f"{'env':10}{'characters':>12}{'quoted, in file':>18}{'quoted, values':>18}")
    for env, files in environments(folder).items():
        s = share(files)
        print(
            f"{env:10}{s.total:12d}{s.span:10d} ({s.percent(s.span):4.1f} %){s.value:10d} ({s.percent(s.value):4.1f} %)"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
