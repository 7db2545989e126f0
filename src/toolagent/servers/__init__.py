"""MCP servers shipped with toolagent, each runnable as `python -m toolagent.servers.<name>`.

* `supabase`: read-only analytics over PostgreSQL or an embedded demo database
  (get-schema, generate-sql, execute-sql, analyze-results).
"""
