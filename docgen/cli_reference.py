"""The command-line reference, read from the parser `llm-eks` itself uses (llm_eks.cli.parser): every command and
action with its usage line, description and options. argparse keeps its actions on private attributes; those are
the only way to walk a parser, and the stdlib has kept them stable for a decade."""

from __future__ import annotations

import argparse

from docgen.markdown import cell, escape_placeholders
from llm_eks.cli import parser


def _commands(p: argparse.ArgumentParser, prefix: str) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(command line, parser, help) of every subcommand of `p`, depth first."""
    out: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((f"{prefix} {name}", sub, helps.get(name, "")))
                out += _commands(sub, f"{prefix} {name}")
    return out


def _option_rows(p: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in p._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            flag = ", ".join(action.option_strings)
            if action.nargs != 0:
                flag += f" {action.metavar if isinstance(action.metavar, str) else action.dest.upper()}"
        else:
            flag = action.metavar if isinstance(action.metavar, str) else action.dest
        extra = []
        if action.required:
            extra.append("required")
        if isinstance(action, argparse._AppendAction):
            extra.append("repeatable")
        stated = "default" in (action.help or "")
        if action.default not in (None, False, [], argparse.SUPPRESS) and action.nargs != 0 and not stated:
            extra.append(f"default `{action.default}`")
        text = (action.help or "") + (f" ({'; '.join(extra)})" if extra else "")
        rows.append(f"| `{flag}` | {cell(text)} |")
    return rows


def _usage(p: argparse.ArgumentParser) -> str:
    """The usage line wrapped at 88 columns, whatever the terminal: the committed page must not depend on it."""
    formatter = argparse.HelpFormatter(p.prog, width=88)
    formatter.add_usage(p.usage, p._actions, p._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def cli_reference() -> str:
    top = parser()
    out: list[str] = []
    for command, sub, help_text in _commands(top, "llm-eks"):
        out += [f"## `{command}`", ""]
        description = sub.description or help_text
        if description:
            out += [escape_placeholders(" ".join(description.split())), ""]
        out += ["```text", _usage(sub), "```", ""]
        rows = _option_rows(sub)
        if rows:
            out += ["| option | what it does |", "|---|---|", *rows, ""]
    return "\n".join(out)
