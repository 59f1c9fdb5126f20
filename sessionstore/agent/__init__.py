"""The agent layer: a small, real agent loop on the Anthropic SDK that keeps everything in a session."""

from sessionstore.agent.loop import (
    DEFAULT_MODEL,
    SYSTEM_PROMPT,
    Agent,
    ToolError,
    confined_path,
    read_file,
    run_command,
)

__all__ = ["DEFAULT_MODEL", "SYSTEM_PROMPT", "Agent", "ToolError", "confined_path", "read_file", "run_command"]
