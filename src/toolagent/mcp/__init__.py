"""MCP client layer: server config, transports and the shared session pool."""
