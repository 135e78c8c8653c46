"""Sub-commands ``connect``, ``disconnect``, ``hook`` and ``doctor`` (registered through
:data:`memoryd.cli.main.COMMAND_MODULES`; the work is imported inside each ``func``)."""

from __future__ import annotations

import sys

from memoryd.cli.connect import httptarget
from memoryd.cli.options import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, command

#: The tool groups ``connect`` writes for every agent unless ``--tools`` says otherwise: the briefs and the
#: memories (18 tools). The shim's own default, when an entry names none, stays ``briefs`` (the wire contract).
CONNECT_TOOLS = "briefs,memories"
AGENT_NAMES = ("claude-code", "codex", "cursor", "gemini", "vscode", "windsurf", "claude-desktop")


def register(sub) -> None:
    c = command(
        sub,
        "connect",
        cmd_connect,
        help="add memoryd to your coding agents' MCP configs (and Claude Code's Stop hook)",
        description="Without AGENT: every agent whose config folder exists. Only memoryd's entry is written; "
        "files that do not parse (or are JSONC) are left untouched and the snippet to paste is printed.",
    )
    c.add_argument("agents", nargs="*", metavar="AGENT", help=f"one of {', '.join(AGENT_NAMES)}")
    c.add_argument("--all", action="store_true", help="every known agent, installed or not")
    c.add_argument(
        "--tools",
        metavar="GROUPS",
        help="tool groups for these agents (briefs, memories, sessions, memo, all; default: "
        f"{CONNECT_TOOLS}; without --tools an entry that names other groups keeps them)",
    )
    c.add_argument("--dry-run", action="store_true", help="show the diff per file; write nothing")
    c.add_argument(
        "--http",
        action="store_true",
        help="write HTTP entries (the daemon's /mcp URL and its token) instead of the stdio shim, for the "
        "agents whose config takes them (Claude Code, Codex, Cursor, Gemini CLI, VS Code, Windsurf); the "
        "daemon must serve HTTP all the time (memoryd service install --http)",
    )
    c.add_argument(
        "--print", action="store_true", dest="print_only", help="print the JSON/TOML to paste by hand"
    )
    c.add_argument(
        "--status", action="store_true", help="list each agent: connected, not connected, unreadable, stale"
    )
    c.add_argument(
        "--no-capture",
        action="store_true",
        help="leave out the capture hooks (Claude Code, Codex, Gemini CLI: prompts -> briefs, session digest)",
    )
    c.add_argument(
        "--context-tokens",
        type=int,
        metavar="N",
        help="token budget of the session-start digest (default 1500; 0 turns it off)",
    )

    cap = command(
        sub,
        "capture",
        cmd_capture,
        help="switch the capture hooks on or off for agents already connected",
        description="on: install the capture hooks (prompts become briefs; the session-start digest); "
        "off: remove them byte-exactly. Without AGENT: every agent with hooks whose config folder exists.",
    )
    cap.add_argument("state", choices=("on", "off"))
    cap.add_argument("agents", nargs="*", metavar="AGENT", help="claude-code, codex, gemini")
    cap.add_argument("--context-tokens", type=int, metavar="N", help="digest budget (with on)")
    cap.add_argument("--dry-run", action="store_true", help="show the diff per file; write nothing")

    d = command(
        sub,
        "disconnect",
        cmd_disconnect,
        help="remove memoryd from agents' MCP configs (and Claude Code's Stop hook)",
    )
    d.add_argument(
        "agents", nargs="*", metavar="AGENT", help="default: every agent whose config names memoryd"
    )
    d.add_argument("--dry-run", action="store_true", help="show the diff per file; write nothing")

    h = command(sub, "hook", cmd_hook, help="agent hooks (run by the agent, not by you)")
    h.add_argument(
        "event", choices=("claude-stop",), help="claude-stop: Claude Code's Stop hook (JSON on stdin)"
    )

    doc = command(
        sub,
        "doctor",
        cmd_doctor,
        help="check service, socket, versions, model, index, agents, disk; say how to fix",
    )
    doc.add_argument(
        "agents",
        nargs="*",
        metavar="AGENT",
        help="agents you want connected: for these, not connected is a problem (otherwise it is info)",
    )
    doc.add_argument("--json", action="store_true")


def _select(names: list[str], use_all: bool, wanted=None):
    from memoryd.cli.connect.agents import known_agents

    agents = known_agents()
    by_name = {a.name: a for a in agents}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        where = "" if set(unknown) - set(AGENT_NAMES) else " on this platform"
        guesses = [_closest(n, by_name) for n in unknown]
        meant = [g for g in guesses if g]
        hint = f"; did you mean {' '.join(meant)}?" if meant and len(meant) == len(unknown) else ";"
        raise SystemExit(
            f"memoryd: unknown agent {', '.join(unknown)}{where}{hint} known: {', '.join(by_name)} "
            "(`memoryd connect --print` gives a snippet for any other agent)"
        )
    if names:
        return [by_name[n] for n in names]
    if use_all:
        return agents
    return [a for a in agents if (wanted or (lambda a: a.folder.exists() or a.config.exists()))(a)]


def _closest(name: str, known) -> str | None:
    """The one known agent ``name`` most likely means (``claude`` -> ``claude-code``, ``gemni`` ->
    ``gemini``), or None when none or several fit (``code``: codex or vscode)."""
    import difflib

    name = name.lower()
    parts = [k for k in known if k.startswith(name) or k.endswith(name) or name.startswith(k)]
    if len(parts) == 1:
        return parts[0]
    close = difflib.get_close_matches(name, list(known), n=2, cutoff=0.75)
    return close[0] if len(close) == 1 else None


def _print_outcomes(outcomes, verb: str) -> int:
    from memoryd.cli.connect import manage

    code = EXIT_OK
    width = max(len(o.agent) for o in outcomes) if outcomes else 0  # "claude-code (capture hooks)" too
    for o in outcomes:
        line = {
            manage.CONNECTED: f"{verb}",
            manage.UPDATED: "updated (the old entry differed)",
            manage.UNCHANGED: "already " + ("connected" if verb == "connected" else "without memoryd"),
            manage.REMOVED: "removed",
            manage.WOULD_CHANGE: "would change:",
            manage.SKIPPED: "NOT changed",
            manage.FAILED: "FAILED",
        }[o.state]
        extra = f" ({o.detail})" if o.detail else ""
        backup = " [backup: .memoryd-backup]" if o.backup else ""
        print(f"{o.agent:<{width}}  {line}{extra}  {o.path}{backup}")
        if o.diff:
            print(o.diff, end="" if o.diff.endswith("\n") else "\n")
        if o.snippet:
            print(
                f"  paste this into {o.path} yourself:\n"
                + "".join(f"    {ln}\n" for ln in o.snippet.splitlines())
            )
        if not o.ok:
            code = EXIT_PROBLEM
    return code


def cmd_connect(args) -> int:
    from memoryd.cli.connect import edits, manage
    from memoryd.cli.connect.agents import hook_command, installed_without_folder, known_agents, server_entry
    from memoryd.cli.connect.capturecheck import codex_hooks_untrusted

    try:
        server = server_entry(args.tools or CONNECT_TOOLS)
    except ValueError as exc:
        print(f"memoryd connect: {exc}", file=sys.stderr)
        return EXIT_USAGE
    wants_http = getattr(args, "http", False) and not args.status
    http = httptarget.target() if wants_http else None
    if wants_http and http is None:
        return EXIT_PROBLEM
    if args.status:
        for agent in _select(args.agents, True):
            st = manage.status(agent, server)
            hook = f", Stop hook {st.hook}" if st.hook else ""
            capture_state = manage.capture_state(agent)
            if capture_state == "on" and agent.name == "codex" and codex_hooks_untrusted(agent):
                capture_state = "on once trusted (start codex, open /hooks)"  # as doctor warns
            hook += f", capture {capture_state}" if capture_state else ""
            detail = f" - {st.detail}" if st.detail else ""
            print(f"{agent.name:<16} {st.state}{hook}{detail}  ({agent.config})")
        return EXIT_OK
    if args.print_only:
        targets = _select(args.agents, True) if args.agents else []
        if not targets:
            generic = {
                "command": server["command"],
                "args": server["args"],
                **({"env": server["env"]} if "env" in server else {}),
            }
            print("# most agents (Claude Desktop, Cursor, Windsurf, Gemini CLI, Antigravity, ...): JSON")
            print(edits.snippet("json", ("mcpServers",), generic), end="")
            print("\n# Codex CLI: ~/.codex/config.toml")
            print(edits.snippet("toml", ("mcp_servers",), generic), end="")
            return EXIT_OK
        for agent in targets:
            print(f"# {agent.title}: {agent.config}")
            entry = (
                http and agent.http_entry(httptarget.url(http[0], args.tools or CONNECT_TOOLS), http[1])
            ) or agent.entry(server)
            print(edits.snippet(agent.fmt, agent.container, entry), end="")
            if agent.name == "claude-code":
                print(f"# {agent.title} Stop hook: {agent.folder / 'settings.json'}")
                print(edits.hook_snippet(hook_command(server["command"], server.get("env"))), end="")
        return EXIT_OK
    # An agent installed (on PATH) but never run has no folder yet: connect creates its config as when named
    # (marked .memoryd-created, so disconnect removes it again); one not installed is left alone.
    agents = _select(
        args.agents,
        args.all,
        lambda a: a.folder.exists() or a.config.exists() or installed_without_folder(a),
    )
    if not agents:
        known = ", ".join(a.name for a in known_agents())
        print(
            "memoryd connect: no agent config folder found. Name one (" + known + "), use --all, "
            "or `memoryd connect --print` for a snippet to paste.",
            file=sys.stderr,
        )
        return EXIT_PROBLEM
    if args.context_tokens is not None and args.context_tokens < 0:
        print("memoryd connect: --context-tokens must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    outcomes = []
    for agent in agents:
        # Without --tools, an entry keeps the tool groups it has (connect refreshes paths, not choices).
        kept = None if args.tools else manage.entry_tools(agent)
        kept = None if kept == CONNECT_TOOLS else kept
        try:
            ours = server_entry(kept) if kept else server
        except ValueError:  # groups this version does not know: the default, as before
            kept, ours = None, server
        entry = (
            agent.http_entry(httptarget.url(http[0], args.tools or kept or CONNECT_TOOLS), http[1])
            if http
            else None
        )
        done = manage.connect(
            agent,
            ours,
            dry_run=args.dry_run,
            capture=not args.no_capture,
            tokens=args.context_tokens,
            entry=entry,
        )
        if http and entry is None:
            done[0].detail = (done[0].detail + "; " if done[0].detail else "") + (
                "its config file takes no HTTP servers: the stdio entry was written"
            )
        elif http and done[0].state in (manage.CONNECTED, manage.UPDATED):
            done[0].detail = httptarget.token_exposure(agent.config) or done[0].detail
        if kept and done[0].ok and not done[0].detail:
            done[0].detail = f"keeps --tools {kept}"
        outcomes += done
    code = _print_outcomes(outcomes, "connected")
    if not args.dry_run and any(o.state in (manage.CONNECTED, manage.UPDATED) for o in outcomes):
        print(
            "\nRestart the agents (or reload their MCP servers) to pick memoryd up; then ask one to search_briefs."
        )
        for line in _trust_lines(outcomes):
            print(line)
    return code


def _trust_lines(outcomes) -> list[str]:
    """What a person still does by hand for the agents just connected: Codex runs a hook only once trusted,
    Gemini CLI runs MCP servers and hooks only in folders it trusts (the wording of ``memoryd doctor``)."""
    from memoryd.cli.connect import manage
    from memoryd.cli.connect.capturecheck import CODEX_TRUST_FIX, gemini_trust_fix

    changed = {o.agent for o in outcomes if o.state in (manage.CONNECTED, manage.UPDATED)}
    lines = []
    if "codex (capture hooks)" in changed:
        lines.append(f"Codex skips memoryd's hooks until you trust them: {CODEX_TRUST_FIX}.")
    if {"gemini", "gemini (capture hooks)"} & changed:
        lines.append(
            f"Gemini CLI runs memoryd only in folders it trusts: {gemini_trust_fix('each project folder')}."
        )
    return lines


def cmd_disconnect(args) -> int:
    from memoryd.cli.connect import manage

    agents = _select(args.agents, False, wanted=lambda a: a.config.exists())
    outcomes = [o for agent in agents for o in manage.disconnect(agent, dry_run=args.dry_run)]
    if not outcomes:
        print("memoryd disconnect: no agent config names memoryd.")
        return EXIT_OK
    return _print_outcomes(outcomes, "disconnected")


def cmd_capture(args) -> int:
    from memoryd.cli.connect import capturehooks, manage
    from memoryd.cli.connect.agents import server_entry

    unknown = [n for n in args.agents if n not in capturehooks.EVENTS]
    if unknown:
        print(
            f"memoryd capture: {', '.join(unknown)} has no capture hooks; agents with hooks: "
            + ", ".join(capturehooks.EVENTS),
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.context_tokens is not None and args.context_tokens < 0:
        print("memoryd capture: --context-tokens must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    agents = [a for a in _select(args.agents, False) if a.name in capturehooks.EVENTS]
    server = server_entry()
    outcomes = []
    for agent in agents:
        if args.state == "on":
            outcomes.append(
                manage.connect_capture(
                    agent, server["command"], args.context_tokens, server.get("env"), args.dry_run
                )
            )
        else:
            found = manage.disconnect_capture(agent, args.dry_run, remember=True)
            if found is not None:
                outcomes.append(found)
    if not outcomes:
        print(f"memoryd capture {args.state}: nothing to change.")
        return EXIT_OK
    return _print_outcomes(outcomes, "connected" if args.state == "on" else "disconnected")


def cmd_hook(args) -> int:
    from memoryd.cli.connect.hook import main

    return main()


def cmd_doctor(args) -> int:
    from memoryd.cli.connect.doctor import main

    _select(args.agents, False)  # an unknown name is refused the way connect refuses it
    return main(as_json=args.json, agents=tuple(args.agents))
