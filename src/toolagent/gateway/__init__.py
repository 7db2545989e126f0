"""The MCP gateway: the governed tools served to any MCP client as one MCP server, over streamable HTTP (`/mcp`) and stdio"""
