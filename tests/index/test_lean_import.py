"""LanceDB imported through ``memoryd.index`` loads none of the REST client's API modules, works on a local
index, and the REST client package still gives every name it defines the moment one is asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DAEMON = Path(__file__).resolve().parents[2] / "daemon"

SCRIPT = """
import sys, tempfile
import memoryd.index.store
import lancedb, pyarrow as pa
api = lambda: sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api"))
assert api() == [], api()
assert "lance_namespace_urllib3_client.models" in sys.modules
table = lancedb.connect(tempfile.mkdtemp()).create_table("t", pa.table({"id": ["a"], "text": ["hello world"]}))
table.create_fts_index("text")
assert [r["id"] for r in table.search("hello", query_type="fts").limit(5).to_list()] == ["a"]
assert api() == []
from memoryd.index import lean_import
assert lean_import.register() is False  # already registered, lancedb imported
import threading
import lance_namespace_urllib3_client as client
got = []
threads = [threading.Thread(target=lambda: got.append(client.ApiClient)) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert len(got) == 4 and len(set(got)) == 1, got  # the first use from four threads at once: one __init__
assert client.TableApi.__name__ == "TableApi" and client.ApiClient.__name__ == "ApiClient"
from lance_namespace_urllib3_client import Configuration
namespace = {}
exec("from lance_namespace_urllib3_client import *", namespace)
assert "NamespaceApi" in namespace and "lance_namespace_urllib3_client.api.table_api" in sys.modules
try:
    client.not_a_name
except AttributeError as exc:
    assert "not_a_name" in str(exc)
else:
    raise AssertionError("an unknown name resolved")
print("ok")
"""


def test_lancedb_works_without_the_rest_api_modules_and_they_load_when_asked_for():
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(DAEMON), "PATH": "/usr/bin:/bin", "LANCEDB_LOG": "error"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"
