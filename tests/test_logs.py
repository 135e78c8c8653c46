"""Where log lines go: JSON on stderr only, in fresh interpreters (real modules, real board files).

stdout is the protocol of the shim and the hooks and the output of CLI commands; structlog's own default
prints there, so no memoryd module may log before ``memoryd.logs`` has configured stderr. And the stderr
handler follows ``sys.stderr``: a test runner's capture, swapped in when logging was configured and closed
since, once turned the daemon's later lines (``board.memory_written``, ``memory_edges_removed``) into
"--- Logging error ---" reports in the runner's output.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True, timeout=60
    )


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_a_module_used_without_configuring_logging_writes_json_on_stderr_and_nothing_on_stdout(tmp_path):
    done = run(
        """
        import sys
        from pathlib import Path
        from memoryd.kinds.memories.files import Memory, write_memory

        write_memory(Path(sys.argv[1]), Memory.new("written by a script that configured nothing", tags=("t",)))
        """,
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert [line["event"] for line in json_lines(done.stderr)] == ["board.memory_written"]


def test_lines_follow_stderr_after_the_stream_logging_was_configured_on_is_closed(tmp_path):
    done = run(
        """
        import io, sys
        from pathlib import Path

        real, sys.stderr = sys.stderr, io.StringIO()  # a test runner's capture
        from memoryd.kinds.memories.files import Memory, write_memory  # its logger configures logging

        sys.stderr.close()  # the capture ends
        sys.stderr = real
        write_memory(Path(sys.argv[1]), Memory.new("written after the capture ended", tags=("t",)))
        """,
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "Logging error" not in done.stderr, done.stderr
    assert [line["event"] for line in json_lines(done.stderr)] == ["board.memory_written"]
