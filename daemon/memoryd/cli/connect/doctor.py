"""``memoryd doctor``: check the whole installation and say, for each problem, the command that fixes it.

Checks, in order: the background service (installed, running; :func:`memoryd.cli.service.manager.service_state`
when that module is present), the socket (answers, directory 0700 and socket 0600, owned by the user),
versions (shim, installed daemon, running daemon), the embedding model, the index against the board
(brief count and newest board file vs the last index write), each agent's connection (over HTTP: the
daemon serves that port, :mod:`memoryd.cli.connect.httpcheck`), and disk use.

Exit code 0 when nothing is wrong, 1 when at least one problem was found. A warning (``warn``: something
that depends on the folder, or that memoryd cannot verify, such as an agent's trust in a folder or a hook)
is printed with its fix and does not change the exit code. The capture hooks' checks are in
:mod:`memoryd.cli.connect.capturecheck`, the index's and the board files' in :mod:`memoryd.cli.connect.boardcheck`; this shell's ``MEMORYD_*`` variables are checked too.

What counts as a problem: something that keeps memoryd from working as set up. Not a problem (``info``):
no service installed (an agent's shim starts the daemon on demand), hence no daemon running yet; an agent
that is not connected (after ``memoryd disconnect`` that is what you asked for), unless you name it
(``memoryd doctor cursor``). An agent whose config file connect will not edit (unparsable, or with
comments) is a warning with its fix, so the bare ``memoryd doctor`` shows it too. Every fix printed is a command that works here as printed: ``memoryd`` is
spelled the way this shell finds this install (:func:`memoryd.paths.memoryd_command`), and a
restart names ``memoryd service restart`` only when a service is installed (else ``memoryd stop``: the next
agent call starts the daemon again). With no daemon running, the board files are checked by reading the
board the way the daemon does at its start (every record source's full load), so a broken file is named
before any daemon runs.
``command`` in ``--json`` is that runnable command line (``None`` when the fix needs a person's hands).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OK, PROBLEM, WARN, INFO = "ok", "problem", "warn", "info"
LOW_DISK_BYTES = 512 << 20


@dataclass
class Check:
    name: str
    state: str  # ok | problem | warn | info
    detail: str
    fix: str | None = None  # for people: a command, maybe followed by "   (a note)"
    command: str | None = None  # the fix's command line exactly as it runs, or None

    def __post_init__(self) -> None:
        if self.fix and self.command is None and not self.fix.startswith(_PROSE):
            self.command = self.fix.split("   (", 1)[0].strip()


# Fixes that start like this are instructions in words, not a command line.
_PROSE = ("stop ", "fix ", "free ", "reinstall ", "set ", "remove ", "start ", "make ")


def _me(args: str) -> str:
    """``memoryd <args>`` as this shell runs this install."""
    from memoryd.paths import memoryd_command

    return f"{memoryd_command()} {args}"


def _own(fix: str | None) -> str | None:
    """A fix from another component (``memoryd ...``), spelled the way this shell runs memoryd."""
    return _me(fix.removeprefix("memoryd ")) if fix and fix.startswith("memoryd ") else fix


def _service() -> tuple[list[Check], bool]:
    """The service check, and whether a service is installed (then its commands work)."""
    try:
        from memoryd.cli.service.manager import service_state
    except ModuleNotFoundError:
        return [Check("service", INFO, "service check unavailable in this version of memoryd")], False
    try:
        state = service_state()
    except Exception as exc:  # noqa: BLE001 - another component; report, never crash the doctor
        return [Check("service", PROBLEM, f"could not ask the service manager: {exc}")], False
    manager, detail = state.get("manager"), state.get("detail") or ""
    if manager is None:  # no launchd/systemd user manager: shims start the daemon on demand
        return [Check("service", INFO, detail or "no service manager on this machine")], False
    if not state.get("installed"):
        # Optional: without a service an agent's shim starts the daemon on demand. service_state() gives a
        # fix only where the manager answers (installing fails where it cannot be reached: no user systemd).
        return [Check("service", INFO, f"not installed: {detail} ({manager})", _own(state.get("fix")))], False
    if state.get("running") is None:
        return [Check("service", INFO, f"installed; {manager} cannot tell whether it runs: {detail}")], True
    if not state.get("running"):
        fix = _own(state.get("fix") or "memoryd service start")
        return [Check("service", PROBLEM, f"{detail} ({manager})", fix)], True
    return [Check("service", OK, f"{detail} ({manager})")], True


def _restart(service: bool, why: str = "") -> str:
    """The command that restarts the running daemon: the service's restart, else ``memoryd stop`` of the
    daemon a shim started (the next agent call starts it again)."""
    note = f"   ({why})" if why else ""
    if service:
        return _me("service restart") + note
    then = "; the next agent call starts it again, or run " + _me("serve")
    return f"{_me('stop')}   (stops the daemon cleanly{then}{'; ' + why if why else ''})"


def _socket_checks(
    status: dict[str, Any] | None, socket_path: Path, error: str | None, service: bool, manager: bool = True
) -> list[Check]:
    from memoryd_shim import rendezvous

    if error:
        start = _me("service start") if service else _me("serve")
        return [Check("socket", PROBLEM, error, f"stop whatever listens on {socket_path}, then run {start}")]
    if status is None:
        if service:
            return [
                Check(
                    "daemon", PROBLEM, f"not running (nothing answers on {socket_path})", _me("service start")
                )
            ]
        at_login = f"; {_me('service install')} runs it at login" if manager else ""
        return [
            Check(
                "daemon",
                INFO,
                f"not running yet: an agent's memoryd-shim starts it on demand (or run {_me('serve')}{at_login})",
            )
        ]
    checks = [Check("daemon", OK, f"running, pid {status.get('pid')}, socket {socket_path}")]
    sock = status.get("socket") or {}
    problem = rendezvous.socket_dir_problem(str(socket_path.parent))
    if problem:
        checks.append(Check("socket", PROBLEM, problem, _socket_dir_fix(socket_path.parent)))
    elif sock.get("mode") not in (None, "0600") or sock.get("owner_uid") not in (None, os.getuid()):
        checks.append(
            Check(
                "socket",
                PROBLEM,
                f"mode {sock.get('mode')}, owner uid {sock.get('owner_uid')}",
                f"chmod 600 {socket_path}",
            )
        )
    else:
        checks.append(Check("socket", OK, f"mode {sock.get('mode')}, directory 0700, owned by you"))
    return checks


def _socket_dir_fix(directory: Path) -> str:
    """``chmod 700`` for a folder memoryd made (its state folder) or one of the user's own no one else may
    write to; for a shared one such as /tmp, a private folder instead (never a chmod of it)."""
    from memoryd.serve.socketfile import PRIVATE_DIR_ADVICE, is_memoryd_dir, shared_dir

    with contextlib.suppress(OSError):
        if is_memoryd_dir(directory) or not shared_dir(directory.lstat()):
            return f"chmod 700 {directory}"
    return PRIVATE_DIR_ADVICE


def _versions(status: dict[str, Any] | None, service: bool) -> Check:
    from memoryd import __version__ as daemon_version
    from memoryd_shim import __version__ as shim_version

    running = (status or {}).get("version")
    detail = f"shim {shim_version}, installed daemon {daemon_version}" + (
        f", running daemon {running}" if running else ""
    )
    if shim_version != daemon_version:
        return Check(
            "versions",
            PROBLEM,
            detail,
            f"reinstall memoryd into {sys.executable} (`make setup` in a checkout)",
        )
    if running and running != daemon_version:
        return Check("versions", PROBLEM, detail + " (the running daemon is older)", _restart(service))
    return Check("versions", OK, detail)


def _model(status: dict[str, Any] | None, service: bool) -> Check | None:
    if status is None:
        return None
    engine = status.get("engine") or {}
    model = engine.get("model") or {}
    state = model.get("state") or engine.get("state") or status.get("engine_state")
    if state == "ready":
        return Check("model", OK, f"{model.get('name')} loaded ({engine.get('search_mode')} search)")
    if state == "loading":
        return Check("model", INFO, "the engine is still loading; ask again in a few seconds")
    if state == "disabled":
        return Check("model", INFO, "disabled (--model none): keyword-only search")
    return Check(
        "model",
        PROBLEM,
        f"{model.get('name')}: {state} ({model.get('detail') or engine.get('error')})",
        _restart(service, "retries loading the model; the daemon's log says why it failed"),
    )


def _agents(asked: tuple[str, ...] = ()) -> tuple[list[Check], dict[str, bool]]:
    """One check per agent found, and which agents have memoryd's entry. Not connected is ``info`` unless the
    agent is in ``asked``; a config file connect will not edit (unreadable, or JSON with comments) is a
    ``warn`` with its fix (a problem when asked); a broken connection (stale entry, Stop hook missing or
    stale) is a problem."""
    from memoryd.cli.connect import manage
    from memoryd.cli.connect.agents import known_agents, server_entry

    checks = []
    connected: dict[str, bool] = {}
    server = server_entry()
    for agent in known_agents():
        st = manage.status(agent, server)
        connected[agent.name] = st.state in ("connected", "entry stale")
        wanted = agent.name in asked
        if st.state == "not installed" and not wanted:
            continue
        name, connect = f"agent {agent.name}", _me(f"connect {agent.name}")
        hook = f"; Stop hook {st.hook}" if st.hook else ""
        if st.state == "connected" and st.hook in (None, "installed"):
            checks.append(Check(name, OK, f"connected ({agent.config}){hook}"))
        elif st.state == "config unreadable":
            fix = f"fix the file by hand, then run {connect}   (or paste: {_me('connect --print ' + agent.name)})"
            detail = f"{agent.config} is unreadable: {st.detail}"
            if not wanted:
                detail = f"{detail}; memoryd cannot tell whether it is connected"
            checks.append(Check(name, PROBLEM if wanted else WARN, detail, fix))
        elif st.state in ("not connected", "not installed") and st.hook in (None, "missing"):
            if _is_jsonc(agent):  # connect leaves a commented file alone and prints the entry instead
                paste = _me("connect --print " + agent.name)
                detail = f"{st.state} ({agent.config} has comments, so connect does not rewrite it)"
                fix = f"{paste}   (and paste its entry into {agent.config} by hand)"
                checks.append(Check(name, PROBLEM if wanted else WARN, detail, fix))
                continue
            detail = f"{st.state} ({agent.config}); {connect} connects it"
            checks.append(Check(name, PROBLEM if wanted else INFO, detail, connect))
        else:  # connected through a stale entry, or without its Stop hook
            checks.append(Check(name, PROBLEM, f"{st.state} {st.detail}{hook}".strip(), connect))
    if not checks:
        checks.append(Check("agents", INFO, "no known agent found on this machine", _me("connect --print")))
    return checks, connected


def _is_jsonc(agent) -> bool:
    """Whether the agent's JSON config file is JSONC (comments, trailing commas), which connect never edits."""
    from memoryd.cli.connect.jsonedit import NotPlainJson, classify

    if agent.fmt != "json":
        return False
    try:
        classify(agent.config.read_text(encoding="utf-8"))
    except NotPlainJson as exc:
        return exc.kind == "jsonc"
    except (OSError, UnicodeDecodeError):
        return False
    return False


def _settings() -> Check:
    """This shell's ``MEMORYD_*`` variables (:func:`memoryd.settings.check_env`)."""
    from memoryd.settings import check_env

    found = check_env()
    refused = [(var, message) for var, state, message in found if state == "refused"]
    if refused:
        names = " ".join(var for var, _ in refused)
        detail = "; ".join(m for _, m in refused) + ": a daemon started from this environment exits at once"
        return Check("settings", PROBLEM, detail, f"unset {names}   (or set a usable value)")
    if found:
        return Check("settings", INFO, "; ".join(m for _, _, m in found))
    return Check("settings", OK, "every MEMORYD_* variable set here is usable")


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _disk(locations) -> Check:
    parts = {
        "board": locations.board,
        "index": locations.index,
        "models": locations.models,
        "logs": locations.logs,
    }
    used = ", ".join(f"{name} {_human(_size(path))}" for name, path in parts.items() if path.exists())
    try:
        free = shutil.disk_usage(next((p for p in parts.values() if p.exists()), Path.home())).free
    except OSError:
        free = None
    detail = f"{used or 'nothing yet'}; {_human(free) if free is not None else '?'} free"
    if free is not None and free < LOW_DISK_BYTES:
        return Check("disk", PROBLEM, detail, "free some disk space (the index needs room to compact)")
    return Check("disk", OK, detail)


def run_checks(agents: tuple[str, ...] = ()) -> list[Check]:
    """Every check; ``agents``: agent names the user asked about (not connected = a problem for them)."""
    from memoryd.paths import resolve
    from memoryd.serve.control import ask_status

    locations = resolve()
    status, error = None, None
    try:
        status = ask_status(locations.socket, timeout=3.0)
    except ValueError as exc:
        error = str(exc)
    checks, service = _service()
    try:  # without one, the service check said once that there is none: no `memoryd service` advice
        from memoryd.cli.service.manager import manager_here

        manager = manager_here()
    except ModuleNotFoundError:
        manager = False
    checks += _socket_checks(status, locations.socket, error, service, manager) + [_versions(status, service)]
    from memoryd.cli.connect import boardcheck, capturecheck, httpcheck

    board = boardcheck.files(status, locations.board, scan=status is None and error is None)
    checks += [
        c for c in (_model(status, service), boardcheck.index(status, service), board) if c is not None
    ]

    agent_checks, connected = _agents(agents)
    agent_checks += httpcheck.run(status if error is None else None)
    return checks + agent_checks + capturecheck.run(connected, agents) + [_settings(), _disk(locations)]


def main(as_json: bool = False, agents: tuple[str, ...] = ()) -> int:
    checks = run_checks(agents)
    problems = [c for c in checks if c.state == PROBLEM]
    if as_json:
        print(
            json.dumps({"problems": len(problems), "checks": [asdict(c) for c in checks]}, ensure_ascii=False)
        )
    else:
        mark = {OK: "ok  ", PROBLEM: "FAIL", WARN: "warn", INFO: "info"}
        width = max([20] + [len(c.name) for c in checks])  # one column for the details and the fixes
        for c in checks:
            print(f"{mark[c.state]}  {c.name:<{width}} {c.detail}")
            if c.fix and c.state in (PROBLEM, WARN):
                print(f"      {'':<{width}} fix: {c.fix}")
        warnings = sum(c.state == WARN for c in checks)
        also = f" {warnings} warning(s): see the warn lines." if warnings else ""
        print(
            f"\n{len(problems)} problem(s) found.{also}"
            if problems
            else f"\nNo problems.{also}"
            if also
            else "\nAll good."
        )
    return 1 if problems else 0
