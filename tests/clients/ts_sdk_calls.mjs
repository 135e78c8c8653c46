// Every memoryd tool through the official TypeScript SDK client, the way Claude Code, Gemini CLI and the
// MCP Inspector reach it: Client + StdioClientTransport spawning exactly the command `memoryd connect` wrote.
//
//   node ts_sdk_calls.mjs SPEC.json
//
// SPEC: {"server": {"command", "args", "env", "cwd"}, "board": {"task_id", "brief_id"},
//        "versions": ["2025-11-25", "2025-06-18", ...]}
// For each protocol version (the SDK asks for its latest; an older one is forced by rewriting the
// initialize request on its way out) it lists the tools, fails on any tool without cases here, then calls
// each tool with valid arguments, invalid ones and ids that do not exist. A call passes when the SDK
// accepts its answer (no thrown error; below 2025-11-25 an argument error is a JSON-RPC -32602 by design)
// and the expected text reaches the caller. Prints one JSON line:
//   {"sdk": <version>, "versions": {<asked>: {"negotiated", "tools", "calls": n, "failures": [...]}}}
// and exits 0 (the pytest side asserts on the line); a crash of the script itself exits non-zero.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;
const NO_HASH = '0'.repeat(64);
const ARGUMENT_RESULTS_FROM = '2025-11-25'; // MCP: input validation errors are tool execution errors

/** The SDK's stdio transport, with the initialize request's protocolVersion replaced and the answer seen. */
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
  send(message, options) {
    if (message.method === 'initialize' && this.version) {
      message = { ...message, params: { ...message.params, protocolVersion: this.version } };
    }
    return this.inner.send(message, options);
  }
  get stderr() { return this.inner.stderr; }
}

const text = (result) => (result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

/**
 * The cases, in call order (later cases use what earlier ones returned: `s` holds hashes and session ids).
 * kind: "valid" (isError false, `check` on the result if given), "empty" (a blank query: isError false,
 * an empty list), "invalid" (argument error naming `expect`), "missing" (isError true, text has `expect`).
 */
function cases(board, era) {
  const tag = `era-${era.replaceAll('-', '')}`;
  const resultsOf = (r) => r.structuredContent?.results ?? r.structuredContent?.result ?? r.structuredContent?.memos;
  const emptyList = (r) => Array.isArray(resultsOf(r)) && resultsOf(r).length === 0;
  const emptyRecall = (r) => r.structuredContent?.result?.memories?.length === 0;
  return [
    // --- briefs
    ['search_briefs', 'valid', () => ({ query: 'charged twice on retry', limit: 3 }),
      (r) => r.structuredContent.results[0]?.brief_id === board.brief_id],
    ['search_briefs', 'empty', () => ({ query: '' }), emptyList],
    ['search_briefs', 'empty', () => ({ query: '   ' }), emptyList],
    ['search_briefs', 'invalid', () => ({ query: 42 }), 'query'],
    ['list_tasks', 'valid', () => ({}), (r) => r.structuredContent.tasks.some((t) => t.task_id === board.task_id)],
    ['list_tasks', 'invalid', () => ({ limit: 0 }), 'limit'],
    ['get_task', 'valid', () => ({ task_id: board.task_id })],
    ['get_task', 'invalid', () => ({ task_id: 'not a task id' }), 'task_id'],
    ['get_task', 'missing', () => ({ task_id: 't-20200101-abcdef' }), 'list_tasks shows every task id'],
    ['get_brief', 'valid', () => ({ brief_id: board.brief_id })],
    ['get_brief', 'invalid', () => ({}), 'brief_id'],
    ['get_brief', 'missing', () => ({ brief_id: 'b-20200101-abcdef' }), "get_task lists a task's briefs"],
    ['save_outcome', 'valid', () => ({ brief_id: board.brief_id, did: [`checked the retry path (${tag})`], open: [] })],
    ['save_outcome', 'invalid', () => ({ brief_id: board.brief_id, open: [] }), 'did'],
    ['save_outcome', 'missing', () => ({ brief_id: 'b-20200101-abcdef', did: ['x'], open: [] }), 'nowhere to save its outcome'],
    ['get_context', 'valid', () => ({}), (r) => typeof r.structuredContent.context === 'string'],
    ['get_context', 'valid', () => ({ project: 'shopfront', tokens: 300 }),
      (r) => r.structuredContent.tokens <= 300 && r.structuredContent.budget === 300],
    ['get_context', 'invalid', () => ({ tokens: -1 }), 'tokens'],
    // --- memories (memdb's envelope: {"ok": true|false, ...})
    ['store_memory', 'valid', (s) => ({ content: `Retries must reuse the idempotency key (${tag})`, tags: ['payments'] }),
      (r, s) => (s.hash1 = r.structuredContent.result.hash)],
    ['store_memory', 'invalid', () => ({ content: 'x', tags: [] }), 'tags'],
    ['store_memories', 'valid', () => ({ items: [{ content: `The gateway times out after 30 s (${tag})`, tags: ['gateway'] }] }),
      (r, s) => (s.hash2 = r.structuredContent.result.results[0].hash)],
    ['store_memories', 'invalid', () => ({ items: [] }), 'items'],
    ['get_memory', 'valid', (s) => ({ hash: s.hash1 }), (r) => r.structuredContent.ok === true],
    ['get_memory', 'invalid', () => ({ hash: 'zz' }), 'hash'],
    ['get_memory', 'missing', () => ({ hash: NO_HASH }), 'Memory not found'],
    ['update_memory', 'valid', (s) => ({ hash: s.hash1, importance: 3 })],
    ['update_memory', 'invalid', (s) => ({ hash: s.hash1, importance: 99 }), 'importance'],
    ['update_memory', 'missing', () => ({ hash: NO_HASH, importance: 1 }), 'Memory not found'],
    ['search_memories', 'valid', () => ({ query: 'idempotency key' }), (r) => r.structuredContent.result.length > 0],
    ['search_memories', 'empty', () => ({ query: '' }), emptyList],
    ['search_memories', 'empty', () => ({ query: ' \t ' }), emptyList],
    ['search_memories', 'invalid', () => ({ query: 'x', limit: 0 }), 'limit'],
    ['recall', 'valid', () => ({ query: 'idempotency key', depth: 1 })],
    ['recall', 'empty', () => ({ query: '' }), emptyRecall],
    ['recall', 'empty', () => ({ query: '  ' }), emptyRecall],
    ['recall', 'invalid', () => ({ query: 'x', depth: 9 }), 'depth'],
    ['create_relationship', 'valid', (s) => ({ from_hash: s.hash1, to_hash: s.hash2, relation_type: 'related_to' })],
    ['create_relationship', 'invalid', (s) => ({ from_hash: s.hash1, to_hash: s.hash2, relation_type: 'has space' }), 'relation_type'],
    ['create_relationship', 'missing', (s) => ({ from_hash: NO_HASH, to_hash: s.hash2, relation_type: 'related_to' }), 'not found'],
    ['get_relationships', 'valid', (s) => ({ hash: s.hash1 }), (r) => r.structuredContent.result.length === 1],
    ['get_relationships', 'invalid', (s) => ({ hash: s.hash1, direction: 'sideways' }), 'direction'],
    ['get_relationships', 'missing', () => ({ hash: NO_HASH }), 'not found'],
    ['delete_relationship', 'valid', (s) => ({ from_hash: s.hash1, to_hash: s.hash2, relation_type: 'related_to' })],
    ['delete_relationship', 'invalid', () => ({ from_hash: 'x', to_hash: NO_HASH, relation_type: 'related_to' }), 'from_hash'],
    ['delete_relationship', 'missing', (s) => ({ from_hash: s.hash1, to_hash: s.hash2, relation_type: 'related_to' }), 'no such relationship'],
    ['memory_stats', 'valid', () => ({}), (r) => r.structuredContent.result.memoryCount >= 2],
    ['memory_stats', 'invalid', () => ({ project: '' }), 'project'],
    ['delete_memories', 'valid', () => ({ hashes: [NO_HASH] }), (r) => r.structuredContent.result.failed === 1],
    ['delete_memories', 'invalid', () => ({ hashes: [] }), 'hashes'],
    ['delete_memory', 'valid', (s) => ({ hash: s.hash2 })],
    ['delete_memory', 'invalid', () => ({ hash: 7 }), 'hash'],
    ['delete_memory', 'missing', (s) => ({ hash: s.hash2 }), 'Memory not found'],
    // --- sessions
    ['add_memory', 'valid', () => ({ prompt: `why charged twice (${tag})`, thought: 'look at retries', response: 'the key is dropped' }),
      (r, s) => (s.session = r.structuredContent.sessionId)],
    ['add_memory', 'invalid', () => ({ prompt: 'p' }), 'thought'],
    ['get_session_memories', 'valid', (s) => ({ sessionId: s.session }), (r) => r.structuredContent.count === 1],
    ['get_session_memories', 'invalid', () => ({ sessionId: 'not a session id!' }), 'sessionId'],
    ['get_session_memories', 'missing', () => ({ sessionId: 'no-such-session' }), 'No session no-such-session'],
    ['query_raw_memories', 'valid', () => ({ query: 'charged twice' })],
    ['query_raw_memories', 'empty', () => ({ query: '' }), emptyList],
    ['query_raw_memories', 'empty', () => ({ query: '   ' }), emptyList],
    ['query_raw_memories', 'invalid', () => ({ query: 'x', nResults: 0 }), 'nResults'],
    ['summarize_sessions', 'valid', (s) => ({ sessionId: s.session })],
    ['summarize_sessions', 'invalid', () => ({ sessionId: 5 }), 'sessionId'],
    ['summarize_sessions', 'missing', () => ({ sessionId: 'no-such-session' }), 'No session no-such-session'],
    ['get_all_summaries', 'valid', () => ({})],
    ['get_all_summaries', 'invalid', () => ({ limit: -1 }), 'limit'],
    ['query_summaries', 'valid', () => ({ query: 'retries' })],
    ['query_summaries', 'empty', () => ({ query: '' }), emptyList],
    ['query_summaries', 'empty', () => ({ query: '  ' }), emptyList],
    ['query_summaries', 'invalid', () => ({ query: 'x', category: 'nope' }), 'category'],
    ['export_database', 'valid', () => ({}), (r, s) => (s.exported = text(r).match(/[\w.-]+\.jsonl/)?.[0])],
    ['export_database', 'invalid', () => ({ include: ['nope'] }), 'include'],
    ['import_database', 'valid', (s) => ({ file: s.exported, mode: 'merge' })],
    ['import_database', 'invalid', () => ({ file: '' }), 'file'],
    ['import_database', 'missing', () => ({ file: 'no-such-export.jsonl' }), 'no-such-export.jsonl'],
    ['healthcheck', 'valid', () => ({})],
    ['healthcheck', 'invalid', () => ({ verbose: true }), 'verbose'],
    ['get_memory_core_tool_metrics', 'valid', () => ({})],
    ['get_memory_core_tool_metrics', 'invalid', () => ({ reset: true }), 'reset'],
    // --- memo
    ['memo_add', 'valid', () => ({ text: `remember the idempotency key (${tag})`, tags: ['payments'] })],
    ['memo_add', 'invalid', () => ({ text: 3 }), 'text'],
    ['memo_search', 'valid', () => ({ query: 'idempotency' }), (r) => r.structuredContent === undefined || true],
    ['memo_search', 'empty', () => ({ query: '' }), (r) => /^no memo contains/.test(text(r))],
    ['memo_search', 'empty', () => ({ query: '   ' }), (r) => /^no memo contains/.test(text(r))],
    ['memo_search', 'invalid', () => ({ query: 'x', limit: 0 }), 'limit'],
  ];
}

async function run(version) {
  const server = spec.server;
  const inner = new StdioClientTransport({
    command: server.command, args: server.args, env: server.env, cwd: server.cwd, stderr: 'pipe',
  });
  let stderr = '';
  const transport = new VersionedTransport(inner, version);
  const client = new Client({ name: 'memoryd-ts-sdk-test', version: '0' });
  const out = { negotiated: null, tools: [], calls: 0, failures: [] };
  const fail = (what) => out.failures.push(what);
  try {
    await client.connect(transport);
    inner.stderr?.on('data', (chunk) => { stderr += chunk; });
    out.negotiated = transport.negotiated;
    const listed = (await client.listTools()).tools; // also caches the output validators callTool uses
    out.tools = listed.map((t) => t.name).sort();
    const all = cases(spec.board, version);
    const covered = new Set(all.map(([name]) => name));
    for (const name of out.tools) if (!covered.has(name)) fail({ tool: name, problem: 'no case in ts_sdk_calls.mjs' });
    for (const name of covered) if (!out.tools.includes(name)) fail({ tool: name, problem: 'not listed by the server' });
    const argumentResults = version >= ARGUMENT_RESULTS_FROM;
    const state = {};
    for (const [tool, kind, args, expect] of all) {
      out.calls += 1;
      const call = { tool, kind, args: args(state) };
      let result;
      try {
        result = await client.callTool({ name: tool, arguments: call.args });
      } catch (error) {
        const protocolArgumentError = kind === 'invalid' && !argumentResults && error?.code === -32602;
        if (!(protocolArgumentError && String(error.message).includes(expect))) {
          fail({ ...call, thrown: `${error?.code ?? ''} ${error?.message ?? error}`.slice(0, 600) });
        }
        continue;
      }
      const said = text(result);
      const problem = (why) => fail({ ...call, problem: why, isError: result.isError, text: said.slice(0, 600) });
      if (kind === 'valid' || kind === 'empty') {
        if (result.isError) problem('an error answer');
        else if (typeof expect === 'function') {
          let checked;
          try { checked = expect(result, state); } catch (error) { checked = false; }
          if (!checked) problem('the answer is not what the case expects');
        }
      } else if (!result.isError) problem('not an error answer');
      else if (!said.includes(expect)) problem(`the error text does not contain ${JSON.stringify(expect)}`);
      else if (kind === 'invalid' && !said.includes(`Invalid arguments for tool ${tool}`) && !said.includes('E_INVALID_ARG')) {
        problem('an argument error that does not say so');
      }
    }
  } catch (error) {
    fail({ problem: `session failed: ${error?.stack ?? error}`.slice(0, 2000), stderr: stderr.slice(-2000) });
  } finally {
    await client.close().catch(() => {});
  }
  return out;
}

const versions = {};
for (const version of spec.versions) versions[version] = await run(version);
process.stdout.write(JSON.stringify({ sdk: sdkVersion, versions }) + '\n');
