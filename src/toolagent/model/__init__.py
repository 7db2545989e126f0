"""The bottom layer: the records every other layer shares, and nothing else of toolagent.

Tool specs and registered entries, execution records, limit statuses, the permission vocabulary
(levels, risks, categories, scopes), the statuses and their translations, redaction, and who runs
something. Each module here imports only the standard library and its siblings (an import-linter
contract in `pyproject.toml` keeps it so), so any layer may use them without pulling in the store,
the MCP client or the engine.
"""
