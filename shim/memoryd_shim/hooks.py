"""Agents' hook commands: ``python -m memoryd_shim.hooks AGENT EVENT [--tokens N] [--socket PATH]``.

Standard library only, like the relay. Each run reads the agent's hook JSON on stdin, turns it into one
neutral capture request, sends it to the daemon on the control line (``{"memoryd":"capture","v":1,
"request":{...}}``, answered by :mod:`memoryd.core.capture`), prints on stdout only what the agent reads
(nothing else, ever), and exits 0 whatever happens: a hook never fails or blocks the agent.

Events, by agent (the agent's own event names, as its config names them):

============  ==============================  =========================  ===========================
request       Claude Code (settings.json)     Codex (hooks.json)         Gemini CLI (settings.json)
============  ==============================  =========================  ===========================
``prompt``    UserPromptSubmit                UserPromptSubmit           BeforeAgent
``stop``      Stop                            Stop                       AfterAgent
``start``     SessionStart                    SessionStart               SessionStart
``end``       SessionEnd, PreCompact          PreCompact                 SessionEnd, PreCompress
============  ==============================  =========================  ===========================

What is printed: for ``prompt`` and ``start``, ``{"hookSpecificOutput": {"hookEventName": <event>,
"additionalContext": <text>}}`` (the brief id the prompt was filed as; the digest); for ``stop``, when the
daemon asks for a missing outcome, ``{"decision": "block", "reason": ...}`` (Gemini: ``"deny"``, which
makes it retry with the reason as the next prompt). Gemini CLI always gets a JSON object (``{}`` when
there is nothing to say).

What is sent: stdin is read as UTF-8 (a byte that is not becomes U+FFFD), and every string of the request
goes through :func:`memoryd_shim.textrules.scrub` first: ``<private>`` spans are cut and lone surrogates
replaced before anything leaves this process, on the wire or in the spool.
A Gemini CLI prompt loses the ``<hook_context>`` blocks Gemini puts in front of it (:data:`_GEMINI_CONTEXT`).

Budget: the whole run ends within :data:`BUDGET_S` of the event (connect, send, wait). Every request
carries a unique ``rid`` (32 hex digits). A ``prompt``/``stop``/``end`` request that got no answer line
(no daemon, a refused connect, no answer in time, the connection closed) is appended to the capture spool
(:func:`memoryd_shim.rendezvous.capture_spool_path_str`), which the daemon takes in at its next start:
the daemon may have taken it all the same (it was only slow, or died after filing it), so it skips a
spooled request whose ``rid`` it already filed (:mod:`memoryd.core.spool`).
"""

from __future__ import annotations

import _socket
import json
import os
import re
import sys
import time

from memoryd_shim import rendezvous
from memoryd_shim.textrules import scrub

#: Seconds from start to exit, per request kind: well inside every agent's hook timeout.
BUDGET_S = {"prompt": 2.0, "stop": 2.0, "start": 2.5, "end": 2.0}
EVENTS = {
    "claude-code": {
        "UserPromptSubmit": "prompt",
        "Stop": "stop",
        "SessionStart": "start",
        "SessionEnd": "end",
        "PreCompact": "end",
    },
    "codex": {"UserPromptSubmit": "prompt", "Stop": "stop", "SessionStart": "start", "PreCompact": "end"},
    "gemini": {
        "BeforeAgent": "prompt",
        "AfterAgent": "stop",
        "SessionStart": "start",
        "SessionEnd": "end",
        "PreCompress": "end",
    },
}
#: A text field is cut to this many characters before it is sent (the daemon takes 1 MiB a line).
TEXT_CHARS = 60_000
MAX_STDIN_BYTES = 8 << 20
#: Gemini CLI run with a prompt (``gemini -p``, a pipe) puts what SessionStart hooks returned (memoryd's
#: digest among them) before the first prompt and hands BeforeAgent the whole text; it escapes ``<`` and
#: ``>`` inside, so the first close tag ends a block. The developer's words are what follows.
_GEMINI_CONTEXT = re.compile(r"\A\s*(?:<hook_context>.*?</hook_context>\s*)+", re.DOTALL)
_TAIL_BYTES = 1 << 18
USAGE = "usage: python -m memoryd_shim.hooks AGENT EVENT [--tokens N] [--socket PATH]"


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _last_answer(transcript: str) -> str:
    """The text of the last assistant message in a Claude Code transcript (JSONL), read from its tail.

    For Claude Code versions before ``last_assistant_message`` was part of the Stop input."""
    try:
        with open(transcript, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            lines = handle.read().split(b"\n")
    except OSError:
        return ""
    for raw in reversed(lines):
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or line.get("type") != "assistant" or line.get("isSidechain"):
            continue
        content = (line.get("message") or {}).get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text"]
        if any(texts):
            return "\n".join(t for t in texts if t)
    return ""


def build_request(agent: str, event: str, payload: dict, tokens: int | None) -> dict:
    """The neutral capture request for one agent hook input (shapes in :mod:`memoryd.core.capture`), every
    string scrubbed (:func:`memoryd_shim.textrules.scrub`) before it is cut to :data:`TEXT_CHARS`."""
    kind = EVENTS[agent][event]
    payload = scrub(payload)
    req: dict = {
        "event": kind,
        "rid": os.urandom(16).hex(),
        "agent": agent,
        "session": _str(payload.get("session_id"))[:200],
        "cwd": _str(payload.get("cwd")) or os.getcwd(),
        "hook": event,
    }
    if kind == "prompt":
        prompt = _str(payload.get("prompt"))
        if agent == "gemini":
            prompt = _GEMINI_CONTEXT.sub("", prompt, count=1)
        req["prompt"] = prompt[:TEXT_CHARS]
    elif kind == "stop":
        answer = _str(payload.get("last_assistant_message")) or _str(payload.get("prompt_response"))
        if not answer and agent == "claude-code" and _str(payload.get("transcript_path")):
            answer = scrub(_last_answer(os.path.expanduser(payload["transcript_path"])))
        req["response"] = answer[:TEXT_CHARS]
        req["stop_active"] = payload.get("stop_hook_active") is True
    elif kind == "start":
        req["source"] = _str(payload.get("source"))
        if tokens is not None:
            req["tokens"] = tokens
    else:
        req["reason"] = _str(payload.get("reason")) or _str(payload.get("trigger")) or event
    return req


def render(agent: str, event: str, answer: dict) -> dict | None:
    """What the agent reads on stdout for the daemon's ``answer`` (``None``: print nothing)."""
    kind = EVENTS[agent][event]
    if kind in ("prompt", "start") and _str(answer.get("context")):
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": answer["context"]}}
    if kind == "stop" and _str(answer.get("block")):
        return {"decision": "deny" if agent == "gemini" else "block", "reason": answer["block"]}
    return None


def spool(request: dict, path: str | None = None) -> bool:
    """Append ``request`` to the capture spool (one line, one write); False when it could not. Its strings
    are scrubbed again: private text never reaches a file. Secrets are redacted by the daemon when it files
    the spool (the redactor is not standard library)."""
    path = path or rendezvous.capture_spool_path_str()
    line = (json.dumps(scrub(request), ensure_ascii=False) + "\n").encode("utf-8")
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_size + len(line) > rendezvous.CAPTURE_SPOOL_MAX_BYTES:
                return False
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def ask(socket_path: str, request: dict, deadline: float) -> tuple[bool, dict | None]:
    """Send ``request``; ``(True, answer)`` when a daemon answered with a line (``answer``: its capture
    object, None for an error line), ``(False, None)`` when none did by ``deadline`` (the caller spools)."""
    line = (
        json.dumps({"memoryd": "capture", "v": rendezvous.WIRE_VERSION, "request": request}) + "\n"
    ).encode()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
        data = b""
        try:
            sock.connect(socket_path)
            sock.sendall(line)
            while b"\n" not in data:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False, None
                sock.settimeout(left)
                chunk = sock.recv(1 << 16)
                if not chunk:  # closed without a whole line: a daemon that died or shut down
                    return False, None
                data += chunk
        except OSError:
            return False, None
    finally:
        sock.close()
    try:
        msg = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return True, None
    capture = msg.get("capture") if isinstance(msg, dict) else None
    return True, capture if isinstance(capture, dict) else None


def _parse(argv: list[str]) -> tuple[str, str, int | None, str | None]:
    args = list(argv)
    tokens: int | None = None
    socket_path: str | None = None
    rest = []
    while args:
        arg = args.pop(0)
        if arg in ("--tokens", "--socket") and args:
            value = args.pop(0)
            if arg == "--tokens":
                tokens = int(value)
            else:
                socket_path = os.path.abspath(os.path.expanduser(value))
        else:
            rest.append(arg)
    if len(rest) != 2 or rest[0] not in EVENTS or rest[1] not in EVENTS[rest[0]]:
        raise ValueError(USAGE)
    return rest[0], rest[1], tokens, socket_path


def main(argv: list[str] | None = None, stdin=None, stdout=None) -> int:
    """Run one hook; always returns 0 (problems go to stderr, one line)."""
    started = time.monotonic()
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout
    agent = ""
    try:
        agent, event, tokens, socket_path = _parse(sys.argv[1:] if argv is None else argv)
        kind = EVENTS[agent][event]
        payload = json.loads(stdin.read(MAX_STDIN_BYTES).decode("utf-8-sig", "replace") or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook input is not a JSON object")
        request = build_request(agent, event, payload, tokens)
        if kind == "start" and tokens == 0:
            out = None  # the digest is switched off
        else:
            answered, answer = ask(
                socket_path or os.path.abspath(rendezvous.socket_path_str()),
                request,
                started + BUDGET_S[kind],
            )
            if not answered and kind != "start" and not spool(request):
                print("memoryd hook: no answer, and the spool is full or unwritable", file=sys.stderr)
            out = render(agent, event, answer) if answer else None
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent
        print(f"memoryd hook: {type(exc).__name__}: {exc}", file=sys.stderr)
        out = None
    if out is not None or agent == "gemini":
        stdout.write(json.dumps(out or {}, ensure_ascii=False) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
