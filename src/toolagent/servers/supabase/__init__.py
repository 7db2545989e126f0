"""The Supabase MCP server: read-only schema, NL-to-SQL, guarded execution and result analysis.

Run it with `python -m toolagent.servers.supabase` (stdio) or
`python -m toolagent.servers.supabase --transport http --port 8765` (streamable HTTP at /mcp);
configure it with the `SUPABASE_*` environment variables described in `settings.py`.
In process: `build_server(SupabaseSettings(...))`. To put the demo data into PostgreSQL:
`load_demo_data(url)` or `python -m toolagent.servers.supabase load-demo --db-url URL`. For a
project over HTTPS (`SUPABASE_BACKEND=supabase`), `toolagent supabase install-functions` installs
the two SQL functions the server calls (`functions.py`; docs/supabase-over-https.md).
"""

from __future__ import annotations

from .demo_data import load_demo_data
from .server import build_server
from .settings import SupabaseSettings

__all__ = ["SupabaseSettings", "build_server", "load_demo_data"]
