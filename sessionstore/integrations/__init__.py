"""Adapters that let other programs use a store through their own interfaces (above the storage core).

Each adapter lives in its own module and imports its program's package there, so importing
sessionstore (or running any command) never imports them: `sessionstore.integrations.agent_sdk`
needs `pip install 'sessionstore[agent-sdk]'`.
"""
