"""TEST STUB, not the real tool: stands in for ``launchctl`` and ``systemctl`` in tests/service.

Records each invocation's argv as one JSON line in ``$MEMORYD_STUB_LOG`` and keeps a tiny state in
``$MEMORYD_STUB_STATE`` (which job is loaded, which units are enabled/active) so that idempotency and
status can be checked. It answers like the real tools in the few ways memoryd relies on: ``launchctl
print`` exits 113 for a job that is not loaded, ``bootstrap`` of a loaded job fails, ``systemctl show``
prints ``Key=Value`` lines, ``systemctl is-system-running`` prints ``offline`` where systemd is not PID 1.
"""

import json
import os
import sys
from pathlib import Path

STUB_PID = 4242


def record(argv):
    with open(os.environ["MEMORYD_STUB_LOG"], "a") as log:
        log.write(json.dumps({"argv": argv}) + "\n")


def flag(name):
    return Path(os.environ["MEMORYD_STUB_STATE"], name)


def launchctl(args):
    verb, rest = args[0], args[1:]
    loaded = flag("launchd.loaded")
    if verb == "bootstrap":
        if loaded.exists():
            print("Bootstrap failed: 5: Input/output error", file=sys.stderr)
            return 5
        if not Path(rest[1]).is_file():
            print(f"Bootstrap failed: 2: No such file or directory: {rest[1]}", file=sys.stderr)
            return 2
        loaded.touch()
        flag("launchd.running").touch()
        return 0
    if verb == "bootout":
        if not loaded.exists():
            print("Boot-out failed: 3: No such process", file=sys.stderr)
            return 3
        loaded.unlink()
        flag("launchd.running").unlink(missing_ok=True)
        return 0
    if verb in ("print", "kickstart"):
        if not loaded.exists():
            print(f'Could not find service "{rest[-1]}" in domain', file=sys.stderr)
            return 113
        if verb == "kickstart":
            flag("launchd.running").touch()
            return 0
        running = flag("launchd.running").exists()
        print(f"{rest[0]} = {{\n\tactive count = 1\n\tstate = {'running' if running else 'not running'}")
        if running:
            print(f"\tpid = {STUB_PID}")
        print("\tlast exit code = (never exited)\n}")
        return 0
    return 0


def systemctl(args):
    no_init = flag("no-init").exists()  # like a container or WSL whose PID 1 is not systemd
    if args == ["is-system-running"]:
        print("offline" if no_init else "running")
        return 1 if no_init else 0
    assert args[0] == "--user", args
    if no_init or flag("no-bus").exists():  # like a session without a systemd --user manager (containers, CI)
        print("Failed to connect to bus: No medium found", file=sys.stderr)
        return 1
    verb, rest = args[1], args[2:]
    units = [a for a in rest if not a.startswith("-")]
    if verb == "show":
        unit = units[0]
        unit_file = Path(os.environ["HOME"], ".config", "systemd", "user", unit)
        active = flag(f"{unit}.active").exists()
        print(f"LoadState={'loaded' if unit_file.exists() else 'not-found'}")
        print(f"ActiveState={'active' if active else 'inactive'}")
        print(f"SubState={'running' if active else 'dead'}")
        print(f"MainPID={STUB_PID if active and unit.endswith('.service') else 0}")
        print(f"UnitFileState={'enabled' if flag(unit + '.enabled').exists() else 'disabled'}")
        return 0
    for unit in units:
        if verb == "enable":
            flag(f"{unit}.enabled").touch()
        if verb == "disable":
            flag(f"{unit}.enabled").unlink(missing_ok=True)
        if verb in ("start", "restart") or (verb == "enable" and "--now" in rest):
            flag(f"{unit}.active").touch()
        if verb == "stop" or (verb == "disable" and "--now" in rest):
            flag(f"{unit}.active").unlink(missing_ok=True)
    return 0


def main():
    name, args = os.path.basename(sys.argv[1]), sys.argv[2:]  # argv[1]: the wrapper script's $0
    record([name, *args])
    return {"launchctl": launchctl, "systemctl": systemctl}[name](args)


if __name__ == "__main__":
    sys.exit(main())
