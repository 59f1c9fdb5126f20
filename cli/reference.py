"""The CLI reference (docs/cli.md), generated from the typer app: every command, argument, option and help text.

`make docs` (or `python -m sessionstore.cli.reference > docs/cli.md`) rewrites it; tests/test_cli_reference.py
fails when the file differs from what the code says.
"""

from __future__ import annotations

import sys
from typing import Any, Iterator

import typer.main
from typer._click import Context  # typer ships its own click

from .app import app

HEADER = """# CLI reference

Generated from the code by `make docs` (`python -m sessionstore.cli.reference`); do not edit by hand.
Exit codes: 0 success, 1 a runtime failure (database busy, unreachable, corrupt or foreign), 2 a usage error
or bad input (see the README).
"""


def leaf_commands(command: Any | None = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command that runs something, as (name path, click command), groups walked in name order."""
    command = typer.main.get_command(app) if command is None else command
    subs = getattr(command, "commands", None)
    if subs is None:
        yield path, command
        return
    for name in sorted(subs):
        if not getattr(subs[name], "hidden", False):
            yield from leaf_commands(subs[name], (*path, name))


def reference() -> str:
    """The whole document, a section per command."""
    parts = [HEADER, _command((), typer.main.get_command(app))]
    parts += [_command(path, command) for path, command in leaf_commands()]
    return "\n".join(parts)


def _command(path: tuple[str, ...], command: Any) -> str:
    """One command: usage, help text verbatim, then each argument and option as `--help` describes it."""
    name = " ".join(("sessionstore", *path))
    ctx = Context(command, info_name=name)
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    pieces = ["[OPTIONS]"] if any(p.param_type_name == "option" for p in params) else []
    pieces += [_argument_usage(p) for p in params if p.param_type_name == "argument"]
    if getattr(command, "commands", None) is not None:
        pieces.append("COMMAND [ARGS]...")
    lines = [f"## `{name}`", "", "```text", f"usage: {' '.join([name, *pieces])}", "", _help(command), "```", ""]
    lines += [_param(p, ctx) for p in params]
    if params:
        lines.append("")
    return "\n".join(lines)


def _help(command: Any) -> str:
    """The command's help as `--help` shows it, without trailing blanks."""
    return "\n".join(line.rstrip() for line in (command.help or "").strip().splitlines())


def _argument_usage(param: Any) -> str:
    """How an argument shows in the usage line: `SESSION`, `[SOURCE]`, `PATHS...`."""
    shown = str(param.name).upper() + ("..." if param.nargs == -1 else "")
    return shown if param.required else f"[{shown}]"


def _param(param: Any, ctx: Any) -> str:
    """One bullet: the argument or the option's flags and value, then its help with default and variable."""
    if param.param_type_name == "argument":
        notes = "required" if param.required else ("" if param.default in (None, ()) else f"default: {param.default}")
        help_text = " ".join((param.help or "").split())
        return f"- `{_argument_usage(param)}`: {help_text}" + (f"  [{notes}]" if notes else "")
    record = param.get_help_record(ctx)
    flags, help_text = record if record else (" / ".join(param.opts), "")
    return f"- `{flags}`: {' '.join(help_text.split())}"


if __name__ == "__main__":
    sys.stdout.write(reference())
