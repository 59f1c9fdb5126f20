"""docs/cli.md is the CLI as the code defines it, and every command explains itself with an example.

The reference is generated (`make docs`); this test fails when a command, argument, option or help text
changed without regenerating it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore.cli.reference import leaf_commands, reference

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
COMMANDS = {" ".join(path): command for path, command in leaf_commands()}


def test_docs_cli_md_matches_the_code() -> None:
    assert DOC.read_text(encoding="utf-8") == reference(), "docs/cli.md is stale: run `make docs` and commit it"


def test_the_reference_names_every_command_and_option() -> None:
    text = reference()
    assert len(COMMANDS) > 20
    for name, command in COMMANDS.items():
        assert f"## `sessionstore {name}`" in text
        for param in command.params:
            for flag in getattr(param, "opts", []) if param.param_type_name == "option" else []:
                assert f"`{flag}" in text or f" {flag}" in text, (name, flag)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(name: str) -> None:
    command = COMMANDS[name]
    help_text = command.help or ""
    assert help_text.strip(), f"`{name}` has no help text"
    assert any(line.strip().startswith("Example") for line in help_text.splitlines()), f"`{name}`: no Example"
    assert f"sessionstore {name}" in help_text, f"`{name}`: the example does not run `sessionstore {name}`"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_argument_and_option_has_help(name: str) -> None:
    missing = [param.name for param in COMMANDS[name].params if not (getattr(param, "help", None) or "").strip()]
    assert missing == [], f"`{name}`: no help for {missing}"
