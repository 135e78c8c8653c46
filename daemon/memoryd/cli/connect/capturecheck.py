"""``memoryd doctor``'s checks of the capture hooks, per agent that has them (Claude Code, Codex, Gemini CLI).
One module of ~410 lines: the three agents' checks share the readers of their hooks files, the form check
and the trial run of the session-start command.

For each agent whose config folder exists and that is connected or holds memoryd's hooks:

* ``capture AGENT``: memoryd's hooks are in the agent's hooks file, one group per event of
  :data:`memoryd.cli.connect.capturehooks.EVENTS`, each well-formed (``type`` command, the agent and event the
  group sits under, a timeout the hook's own budget fits in); the interpreter the commands name exists;
  the session-start command, run as the agent runs it (``/bin/sh -c``) with ``--tokens 0`` appended and
  ``{}`` on stdin (no daemon is asked, nothing is written), exits 0 in time with nothing on stderr; and the
  digest budget it passes (``--tokens N``; none = the daemon's default).
* ``capture AGENT enabled``: what the agent itself needs to run them. Codex: ``[features] hooks`` (or the old
  ``codex_hooks``) not false in ``config.toml``, and memoryd's hooks not both in ``hooks.json`` and inline
  ``[hooks]`` (Codex runs both). Gemini CLI: version 0.26.0 or later (hooks on by default from there;
  ``gemini --version`` when ``gemini`` is on PATH), ``hooksConfig.enabled`` not false, none of memoryd's
  hook names in ``hooksConfig.disabled``.
* ``codex hook trust``: Codex runs a user hook only after the person trusted it in ``/hooks``, and keeps
  that as ``[hooks.state."<key>"] trusted_hash`` in ``config.toml``. memoryd does not recompute Codex's
  hash: an entry for each hook whose key names ``hooks.json`` and the event counts as trusted; none is a
  warning (Codex skips an untrusted hook without a word).
* ``gemini folder trust``: with folder trust on (``security.folderTrust.enabled``; the pinned 0.61.0 treats
  a missing setting as on), Gemini CLI runs a folder it does not trust in restricted mode: no MCP server
  (memoryd's included) and no hooks. The folder checked is the current one, against
  ``~/.gemini/trustedFolders.json`` (``GEMINI_CLI_TRUSTED_FOLDERS_PATH``) with Gemini's rule: the longest
  matching path wins, ``TRUST_PARENT`` trusts its folder's parent, ``DO_NOT_TRUST`` distrusts; and
  ``GEMINI_CLI_TRUST_WORKSPACE`` decides first. A trust file that does not parse stops Gemini CLI at start.

States: broken or switched-off hooks are problems (capture set up, yet nothing is captured); what depends on
the folder or cannot be verified here is a warning.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

from memoryd.cli.connect import capturehooks
from memoryd.cli.connect.agents import Agent, command_exists
from memoryd.cli.connect.doctor import INFO, OK, PROBLEM, WARN, Check, _me
from memoryd.cli.connect.edits import _get, lenient_json

#: Gemini CLI runs hooks by default (``hooksConfig.enabled``) from this version on.
GEMINI_MIN_VERSION = (0, 26, 0)
#: The hook's own budget is 2.5 s; an agent timeout below this would kill it first.
MIN_TIMEOUT_S = 3
RUN_TIMEOUT_S = 10.0
_CODEX_LABELS = {
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
    "SessionStart": "session_start",
    "PreCompact": "pre_compact",
}
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def _read_json(path: Path) -> tuple[Any, str | None]:
    """(value, None), or (None, why) when the file is there but unreadable; ({}, None) when absent."""
    try:
        return lenient_json(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, str(exc)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _ours(hooks: Any) -> dict[str, list[dict]]:
    """``{event: [hook objects]}`` of memoryd's capture hooks in a ``hooks`` mapping (JSON or TOML)."""
    found: dict[str, list[dict]] = {}
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for g in groups if isinstance(groups, list) else ():
            for h in (g.get("hooks") if isinstance(g, dict) else None) or ():
                if isinstance(h, dict) and capturehooks.is_capture_command(h.get("command")):
                    found.setdefault(event, []).append(h)
    return found


def _words(command: str) -> list[str]:
    """The command's words after its leading ``VAR=value`` assignments."""
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.DOTALL):
        words.pop(0)
    return words


def _tokens(words: list[str]) -> int | None | str:
    """The ``--tokens`` value (last wins, as the hook reads it); None when absent, the raw text when bad."""
    value = None
    for i, word in enumerate(words[:-1]):
        if word == "--tokens":
            value = words[i + 1]
    if value is None:
        return None
    return int(value) if value.isdigit() else value


def _form(agent: str, event: str, hooks: list[dict]) -> list[str]:
    """What is wrong with memoryd's hooks under one event (empty: well-formed)."""
    if len(hooks) > 1:
        return [f"{event}: {len(hooks)} memoryd hooks (each prompt would be captured {len(hooks)} times)"]
    hook, wrong = hooks[0], []
    if hook.get("type") != "command":
        wrong.append(f"{event}: type is {hook.get('type')!r}, not 'command'")
    try:
        words = _words(hook["command"])
    except ValueError as exc:
        return [f"{event}: the command does not parse ({exc})"]
    at = words.index("-m") if "-m" in words else -1
    if words[at + 2 : at + 4] != [agent, event]:
        wrong.append(f"{event}: the command runs {' '.join(words[at + 2 : at + 4]) or 'no event'}")
    timeout = hook.get("timeout")
    limit = MIN_TIMEOUT_S * 1000 if agent == "gemini" else MIN_TIMEOUT_S
    if timeout is not None and (not isinstance(timeout, int | float) or timeout < limit):
        unit = "ms" if agent == "gemini" else "s"
        wrong.append(f"{event}: timeout {timeout!r} {unit} is shorter than the hook's own budget")
    return wrong


def _run(command: str) -> tuple[bool, str, float]:
    """Run a hook command as the agent would, harmlessly: (ok, what went wrong, milliseconds)."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command + " --tokens 0"],
            input=b"{}",
            capture_output=True,
            timeout=RUN_TIMEOUT_S,
            cwd=Path.home() if Path.home().is_dir() else "/",
        )
    except subprocess.TimeoutExpired:
        return False, f"did not exit within {RUN_TIMEOUT_S:.0f} s", RUN_TIMEOUT_S * 1000
    except OSError as exc:
        return False, str(exc), 0.0
    ms = (time.perf_counter() - started) * 1000
    err = done.stderr.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or err:
        return False, f"exit {done.returncode}: {err[-1] if err else 'no message'}", ms
    if done.stdout.strip() not in (b"", b"{}"):
        return False, "it printed something other than the agent's JSON", ms
    return True, "", ms


def _install_check(agent: Agent, found: dict[str, list[dict]], where: Path, connected: bool) -> list[Check]:
    name = f"capture {agent.name}"
    if not found:
        if not connected:
            return []
        return [Check(name, INFO, f"off: no capture hooks in {where}", _me(f"capture on {agent.name}"))]
    events = capturehooks.EVENTS[agent.name]
    start = found.get(capturehooks.START_EVENT, [{}])[0].get("command")
    budget = None
    wrong = [f"{e}: missing" for e in events if e not in found]
    for event, hooks in found.items():
        wrong += (
            _form(agent.name, event, hooks) if event in events else [f"{event}: not an event memoryd uses"]
        )
    if isinstance(start, str):
        try:
            budget = _tokens(_words(start))
        except ValueError:
            budget = None
    if isinstance(budget, str):
        wrong.append(f"SessionStart: --tokens {budget!r} is not a whole number")
    keep = f" --context-tokens {budget}" if isinstance(budget, int) else ""
    fix = _me(f"capture on {agent.name}{keep}")
    if wrong:
        return [Check(name, PROBLEM, f"{where}: " + "; ".join(wrong), fix)]
    try:
        python = _words(start)[0]
    except (ValueError, IndexError, TypeError):
        python = ""
    if not command_exists(python):
        return [Check(name, PROBLEM, f"the hooks' interpreter {python!r} no longer exists", fix)]
    ok, why, ms = _run(start)
    if not ok:
        return [Check(name, PROBLEM, f"the SessionStart hook fails when run: {why}", fix)]
    if budget == 0:
        digest = "session-start digest off (--tokens 0)"
    elif budget is None:
        from memoryd.kinds.briefs.digest import DEFAULT_TOKENS

        digest = f"session-start digest budget not set: the default, {DEFAULT_TOKENS:,} tokens"
    else:
        digest = f"session-start digest budget {budget:,} tokens"
    detail = f"{len(events)} hooks in {where}, the hook runs ({ms:.0f} ms); {digest}"
    return [Check(name, OK, detail)]


#: How a person trusts memoryd's hooks in Codex (which skips an untrusted hook without a word).
CODEX_TRUST_FIX = "start codex, open /hooks and trust memoryd's hooks"


def gemini_trust_fix(folder: str) -> str:
    """How a person makes Gemini CLI trust ``folder`` (untrusted, it runs without MCP servers or hooks)."""
    return (
        f"start gemini in {folder} and pick Trust folder (later: /permissions in Gemini CLI); "
        "one scripted run: GEMINI_CLI_TRUST_WORKSPACE=true"
    )


def _codex(agent: Agent, found_json: dict, found_inline: dict, config: dict) -> list[Check]:
    checks = []
    features = config.get("features") if isinstance(config.get("features"), dict) else {}
    off = [k for k in ("hooks", "codex_hooks") if features.get(k) is False]
    if off:
        checks.append(
            Check(
                f"capture {agent.name} enabled",
                PROBLEM,
                f"[features] {off[0]} = false in {agent.config}: Codex runs no hooks, so nothing is captured",
                f"set {off[0]} = true under [features] in {agent.config}, or run {_me('capture off codex')}",
            )
        )
    if found_json and found_inline:
        checks.append(
            Check(
                f"capture {agent.name} enabled",
                PROBLEM,
                f"memoryd's hooks are both in {capturehooks.hooks_file('codex', agent.folder)} and inline "
                f"[hooks] in {agent.config}: Codex runs both, so every prompt is filed twice",
                f"remove memoryd's [hooks] entries from {agent.config} by hand (keep hooks.json)",
            )
        )
    if not found_json:
        return checks
    hooks_json = str(capturehooks.hooks_file("codex", agent.folder))
    state = _get(config, ("hooks", "state"))
    state = state if isinstance(state, dict) else {}
    trusted = {
        event
        for event, label in _CODEX_LABELS.items()
        for key, value in state.items()
        if hooks_json in key and label in key and isinstance(value, dict) and value.get("trusted_hash")
    }
    missing = [e for e in found_json if e not in trusted]
    if missing:
        checks.append(
            Check(
                "codex hook trust",
                WARN,
                f"no trust recorded in {agent.config} for memoryd's {', '.join(missing)} hook(s): Codex skips a "
                "hook until you trust it (and again after it changes)",
                CODEX_TRUST_FIX,
            )
        )
    else:
        checks.append(Check("codex hook trust", OK, f"trusted in {agent.config} ([hooks.state])"))
    return checks


def gemini_version(timeout: float = 20.0) -> tuple[tuple[int, int, int] | None, str]:
    """(version, text) of the ``gemini`` on PATH; (None, why) when there is none or it does not answer."""
    exe = shutil.which("gemini")
    if exe is None:
        return None, "gemini is not on PATH"
    try:
        done = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{exe} --version: {exc}"
    m = _VERSION.search(done.stdout)
    if m is None:
        return None, f"{exe} --version printed no version"
    return (int(m[1]), int(m[2]), int(m[3])), m[0]


def _gemini(agent: Agent, settings: dict, found: dict) -> list[Check]:
    name, problems = f"capture {agent.name} enabled", []
    version, text = gemini_version()
    need = ".".join(map(str, GEMINI_MIN_VERSION))
    if version is not None and version < GEMINI_MIN_VERSION:
        problems.append(
            Check(
                name,
                PROBLEM,
                f"Gemini CLI {text}: its hooks run from {need} on, so nothing is captured",
                "npm install -g @google/gemini-cli@latest   (or your package manager's upgrade)",
            )
        )
    config = settings.get("hooksConfig") if isinstance(settings.get("hooksConfig"), dict) else {}
    if config.get("enabled") is False:
        problems.append(
            Check(
                name,
                PROBLEM,
                f"hooksConfig.enabled is false in {agent.config}: Gemini CLI runs no hooks",
                f"set hooksConfig.enabled to true in {agent.config}, or run {_me('capture off gemini')}",
            )
        )
    disabled = config.get("disabled") if isinstance(config.get("disabled"), list) else []
    names = {h.get("name") for hooks in found.values() for h in hooks} | {
        h.get("command") for hooks in found.values() for h in hooks
    }
    off = sorted(str(d) for d in disabled if d in names)
    if off:
        problems.append(
            Check(
                name,
                PROBLEM,
                f"hooksConfig.disabled in {agent.config} switches off {', '.join(off)}",
                f"remove {', '.join(off)} from hooksConfig.disabled in {agent.config}",
            )
        )
    if problems:
        return problems
    seen = f"Gemini CLI {text}" if version else f"version not checked ({text}); hooks need {need} or later"
    return [Check(name, OK, f"{seen}; hooks not switched off in hooksConfig")]


def trusted_folder(folder: str, rules: dict[str, Any], env: dict[str, str] | None = None) -> bool | None:
    """Gemini CLI's verdict on ``folder``: True/False, None when no rule matches (untrusted when trust is on)."""
    env = os.environ if env is None else env
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == "false":
        return False
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return True
    here = os.path.realpath(folder)
    best, verdict = -1, None
    for rule, level in rules.items():
        if level not in ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST"):
            continue
        base = os.path.realpath(os.path.dirname(rule) if level == "TRUST_PARENT" else rule)
        inside = here == base or here.startswith(base.rstrip(os.sep) + os.sep)
        if inside and len(rule) > best:
            best, verdict = len(rule), level != "DO_NOT_TRUST"
    return verdict


def _gemini_trust(agent: Agent, settings: dict) -> Check:
    name = "gemini folder trust"
    if _get(settings, ("security", "folderTrust", "enabled")) is False:
        return Check(
            name, OK, "folder trust is off (security.folderTrust.enabled): every folder runs memoryd"
        )
    path = Path(os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or agent.folder / "trustedFolders.json")
    rules, error = _read_json(path)
    if error is not None or not isinstance(rules, dict):
        return Check(
            name,
            PROBLEM,
            f"{path} does not parse ({error or 'not a JSON object'}): Gemini CLI refuses to start",
            f"fix {path} by hand (it maps folders to TRUST_FOLDER, TRUST_PARENT or DO_NOT_TRUST)",
        )
    here = os.getcwd()
    verdict = trusted_folder(here, rules)
    if verdict:
        return Check(name, OK, f"this folder ({here}) is trusted: memoryd's tools and hooks run here")
    why = "distrusted" if verdict is False else "not trusted"
    return Check(
        name,
        WARN,
        f"this folder ({here}) is {why} by Gemini CLI: there it runs restricted, with memoryd's MCP server "
        "disabled and no hooks (other folders may differ)",
        gemini_trust_fix(here),
    )


def codex_hooks_untrusted(agent: Agent) -> bool:
    """Whether memoryd's hooks are in Codex's ``hooks.json`` but some has no trust recorded yet (the
    ``codex hook trust`` warning): Codex skips them until the person trusts them in ``/hooks``."""
    value, error = _read_json(capturehooks.hooks_file("codex", agent.folder))
    if error is not None:
        return False
    config = _read_toml(agent.config)
    checks = _codex(agent, _ours(_get(value, ("hooks",))), _ours(config.get("hooks")), config)
    return any(c.name == "codex hook trust" and c.state == WARN for c in checks)


def run(connected: dict[str, bool], asked: tuple[str, ...] = ()) -> list[Check]:
    """The capture checks of every agent with capture hooks whose folder exists (``connected``: agent name
    -> whether memoryd's MCP entry is in its config)."""
    from memoryd.cli.connect.agents import known_agents

    checks: list[Check] = []
    for agent in known_agents():
        if agent.name not in capturehooks.EVENTS or not agent.folder.exists():
            continue
        where = capturehooks.hooks_file(agent.name, agent.folder)
        value, error = _read_json(where)
        if error is not None:
            checks.append(Check(f"capture {agent.name}", PROBLEM, f"{where} is unreadable: {error}"))
            continue
        found = _ours(_get(value, ("hooks",)))
        is_on = connected.get(agent.name, False) or agent.name in asked
        if agent.name == "codex":
            config = _read_toml(agent.config)
            inline = _ours(config.get("hooks"))
            if inline and not found:  # moved into config.toml by hand: check them there
                checks += _install_check(agent, inline, agent.config, is_on)
            else:
                checks += _install_check(agent, found, where, is_on)
            checks += _codex(agent, found, inline, config)
            continue
        checks += _install_check(agent, found, where, is_on)
        if agent.name == "gemini":
            if found:
                checks += _gemini(agent, value if isinstance(value, dict) else {}, found)
            if found or is_on:
                checks.append(_gemini_trust(agent, value if isinstance(value, dict) else {}))
    return checks
