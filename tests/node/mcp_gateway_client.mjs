// A second, independent MCP client for the gateway's tests: the TypeScript SDK over streamable HTTP
// with a bearer key. Lists the tools, calls one, prints {"tools": [...], "result": {...}} as JSON.
// usage: node mcp_gateway_client.mjs URL KEY TOOL ARGUMENTS_JSON
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, tool, args] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "toolagent-ts-check", version: "1.0.0" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  process.stdout.write(JSON.stringify({ tools: tools.map((t) => t.name), result }));
  await client.close();
} catch (error) {
  process.stderr.write(`${error?.code ?? ""} ${error?.message ?? error}\n`);
  process.exit(1);
}
