// MCP over Streamable HTTP through the official TypeScript SDK client: Client + StreamableHTTPClientTransport
// with the bearer token memoryd's `connect --http` writes, against a daemon serving `--http`.
//
//   node ts_sdk_http.mjs SPEC.json
//
// SPEC: {"url": "http://127.0.0.1:<port>/mcp?tools=...", "token": "...", "versions": ["2025-11-25", ...]}
// For each version (an older one forced by rewriting the initialize request, as ts_sdk_calls.mjs does) it
// initializes, lists the tools and calls diag_echo, list_tasks and an argument error. Prints one JSON line
//   {"sdk": <version>, "versions": {<asked>: {"negotiated", "session", "tools", "echo", "failures": [...]}}}
// The pinned SDK speaks only the handshake era (its latest is 2025-11-25): the 2026-07-28 era is covered by
// the Python SDK client (tests/http).
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;

/** The SDK's HTTP transport with the initialize request's protocolVersion replaced and the answer seen. */
class VersionedTransport {
  constructor(inner, version) {
    this.inner = inner;
    this.version = version;
    this.negotiated = null;
    inner.onmessage = (message) => {
      if (message?.result?.protocolVersion && this.negotiated === null) this.negotiated = message.result.protocolVersion;
      this.onmessage?.(message);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
  }
  start() { return this.inner.start(); }
  close() { return this.inner.close(); }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
  get sessionId() { return this.inner.sessionId; }
  send(message, options) {
    if (message.method === 'initialize' && this.version) {
      message = { ...message, params: { ...message.params, protocolVersion: this.version } };
    }
    return this.inner.send(message, options);
  }
}

const text = (result) => (result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function run(version) {
  const out = { negotiated: null, session: null, tools: [], echo: null, failures: [] };
  const inner = new StreamableHTTPClientTransport(new URL(spec.url), {
    requestInit: { headers: { Authorization: `Bearer ${spec.token}` } },
  });
  const transport = new VersionedTransport(inner, version);
  const client = new Client({ name: 'memoryd-ts-sdk-http-test', version: '0' });
  try {
    await client.connect(transport);
    out.negotiated = transport.negotiated;
    out.session = inner.sessionId ?? null;
    out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
    const echo = await client.callTool({ name: 'diag_echo', arguments: { value: { version, text: 'naïve ✓' } } });
    out.echo = echo.structuredContent?.value ?? null;
    if (echo.isError) out.failures.push({ tool: 'diag_echo', text: text(echo) });
    const tasks = await client.callTool({ name: 'list_tasks', arguments: {} });
    if (tasks.isError || !text(tasks).includes('tasks')) out.failures.push({ tool: 'list_tasks', text: text(tasks) });
    try {
      const bad = await client.callTool({ name: 'list_tasks', arguments: { limit: 0 } });
      if (!bad.isError || !text(bad).includes('limit')) out.failures.push({ tool: 'list_tasks', problem: 'no argument error' });
    } catch (error) {
      if (!(version < '2025-11-25' && error?.code === -32602)) out.failures.push({ thrown: String(error) });
    }
  } catch (error) {
    out.failures.push({ problem: `session failed: ${error?.stack ?? error}`.slice(0, 2000) });
  } finally {
    await inner.terminateSession?.().catch(() => {});
    await client.close().catch(() => {});
  }
  return out;
}

const versions = {};
for (const version of spec.versions) versions[version] = await run(version);
process.stdout.write(JSON.stringify({ sdk: sdkVersion, versions }) + '\n');
