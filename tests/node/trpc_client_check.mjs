// Drives the API's tRPC endpoint with the real @trpc/client and prints what it saw as JSON.
// Usage: node trpc_client_check.mjs BASE_URL API_KEY
// (tests/e2e/test_api_trpc.py runs it against a live server and asserts on the output)
import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from "@trpc/client";

const [baseUrl, apiKey] = process.argv.slice(2);
if (!baseUrl || !apiKey) {
  console.error("usage: node trpc_client_check.mjs BASE_URL API_KEY");
  process.exit(2);
}

const url = `${baseUrl}/trpc`;
const client = createTRPCClient({ links: [httpLink({ url, headers: { Authorization: `Bearer ${apiKey}` } })] });
const batched = createTRPCClient({ links: [httpBatchLink({ url, headers: { "X-API-Key": apiKey } })] });
const anonymous = createTRPCClient({ links: [httpLink({ url, headers: { Authorization: "Bearer ta_not-a-key" } })] });

async function failure(promise) {
  try {
    await promise;
    return { thrown: false };
  } catch (err) {
    if (!(err instanceof TRPCClientError)) throw err;
    return {
      thrown: true,
      message: err.message,
      code: err.data?.code ?? null,
      httpStatus: err.data?.httpStatus ?? null,
      path: err.data?.path ?? null,
      shapeCode: err.shape?.code ?? null,
    };
  }
}

const out = {};

const listed = await client.tools.listTools.query();
out.listTools = { totalCount: listed.totalCount, names: listed.tools.map((t) => t.name), categories: listed.categories };
const memory = await client.tools.listTools.query({ category: "memory", search: "echo" });
out.listMemory = memory.tools.map((t) => t.name);

const executed = await client.tools.executeTool.mutate({
  name: "probe/echo",
  arguments: { text: "from trpc" },
  timeout: 10000,
  context: { sessionId: "node-session", metadata: { source: "trpc_client_check" } },
});
out.executeTool = {
  success: executed.success,
  executionId: executed.executionId,
  toolName: executed.toolName,
  structured: executed.result.structuredContent,
  executionTime: executed.executionTime,
};

const status = await client.tools.getToolStatus.query({ executionId: executed.executionId });
out.getToolStatus = {
  id: status.execution.id,
  status: status.execution.status,
  sessionId: status.execution.sessionId,
  metadata: status.execution.metadata,
};

const history = await client.tools.getToolHistory.query({ toolName: "probe/echo", limit: 5 });
out.getToolHistory = { totalCount: history.totalCount, limit: history.limit, ids: history.executions.map((e) => e.id), stats: history.stats };

const details = await client.tools.getToolDetails.query({ name: "probe/echo" });
out.getToolDetails = { name: details.tool.name, risk: details.tool.risk, total: details.userStats.totalExecutions };

const metrics = await client.tools.getToolMetrics.query({ toolName: "probe/echo" });
out.getToolMetrics = { registryMetrics: metrics.registryMetrics, activeExecutions: metrics.activeExecutions };

const started = await client.tools.executeTool.mutate({ name: "probe/sleep", arguments: { seconds: 30, tag: "trpc" }, async: true });
const active = await client.tools.getActiveExecutions.query();
const cancelled = await client.tools.cancelToolExecution.mutate({ executionId: started.executionId });
out.cancel = {
  activeIds: active.executions.map((e) => e.id),
  startedId: started.executionId,
  status: cancelled.status,
  message: cancelled.message,
};

out.errors = {
  forbidden: await failure(client.tools.executeTool.mutate({ name: "probe/add", arguments: { a: 1, b: 2 } })),
  badRequest: await failure(client.tools.executeTool.mutate({ name: "probe/echo", arguments: { text: "x" }, timeout: 5 })),
  badLimit: await failure(client.tools.getToolHistory.query({ limit: 101 })),
  notFound: await failure(client.tools.getToolStatus.query({ executionId: "exec_0_missing" })),
  toolFailed: await failure(client.tools.executeTool.mutate({ name: "probe/fail", arguments: {} })),
  unauthorized: await failure(anonymous.tools.listTools.query()),
  noProcedure: await failure(client.tools.noSuchProcedure.query()),
};

// httpBatchLink: these two go out as one GET ?batch=1 request.
const [batchList, batchHistory] = await Promise.all([
  batched.tools.listTools.query({ category: "memory" }),
  batched.tools.getToolHistory.query({ limit: 1 }),
]);
out.batch = { listCount: batchList.totalCount, historyLimit: batchHistory.limit };

console.log(JSON.stringify(out));
