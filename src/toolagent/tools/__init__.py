"""Tool records shared by the MCP layer, the engine and the runner."""
