"""The HTTP listener is its owner's only: token (bearer or cookie), the browser hand-over, Host and Origin
(DNS rebinding), the security headers, loopback-only binding, 0600 files, and another local user."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess

import pytest

from memoryd.http.auth import SIGNED_OUT_PAGE
from support.daemon import PYTHON, free_port
from support.httpd import start_http_daemon

PAGE_AND_MCP = ["/", "/mcp", "/nowhere"]


@pytest.mark.parametrize("path", PAGE_AND_MCP)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}, {"Cookie": "memoryd_token=wrong"}],
    ids=["none", "wrong-bearer", "basic", "wrong-cookie"],
)
def test_no_or_a_wrong_token_is_401_with_an_empty_body(hd, path, headers):
    status, rh, body = hd.request("GET", path, headers=headers)
    assert (status, body) == (401, b"")
    assert "www-authenticate" not in rh and not any(k.startswith("access-control-") for k in rh)


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"  # what a navigation sends


@pytest.mark.parametrize("path", [*PAGE_AND_MCP, "/open?token=used-or-stale"])
def test_a_browser_page_load_without_the_token_is_401_with_the_static_signed_out_page(hd, path):
    headers = {"Accept": BROWSER, "Cookie": "memoryd_token=from-a-rotated-token"}
    status, rh, body = hd.request("GET", path, headers=headers)
    assert (status, body) == (401, SIGNED_OUT_PAGE)
    assert b"Signed out: run <code>memoryd open</code> to open the page." in body
    assert rh["content-type"] == "text/html; charset=utf-8" and "www-authenticate" not in rh
    assert "default-src 'self'" in rh["content-security-policy"] and rh["x-frame-options"] == "DENY"
    assert hd.token.encode() not in body and b"token" not in body.lower()


@pytest.mark.parametrize(
    "method, accept",
    [("GET", "application/json, text/event-stream"), ("GET", "*/*"), ("POST", BROWSER), ("HEAD", BROWSER)],
)
def test_mcp_and_api_requests_without_the_token_keep_the_empty_401(hd, method, accept):
    assert hd.request(method, "/mcp", headers={"Accept": accept})[::2] == (401, b"")


def test_a_near_miss_token_is_refused(hd):
    token = hd.token
    for wrong in (token[:-1], token + "x", token.upper(), f" {token}x"):
        assert hd.request("GET", "/", headers={"Authorization": f"Bearer {wrong}"})[0] == 401


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1", "127.0.0.1:1", "localhost.evil:{port}"])
def test_a_foreign_host_is_403_even_with_the_token(hd, host):
    status, _, body = hd.request("GET", "/mcp", headers=hd.auth(Host=host.format(port=hd.port)))
    assert (status, body) == (403, b"")


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "https://127.0.0.1:{port}", "http://127.0.0.1:1"]
)
def test_a_foreign_origin_is_403_even_with_the_token_and_cookie(hd, origin):
    headers = hd.auth(Origin=origin.format(port=hd.port), Cookie=f"memoryd_token={hd.token}")
    status, rh, body = hd.request("POST", "/mcp", headers=headers, body=b"{}")
    assert (status, body) == (403, b"")
    assert not any(k.startswith("access-control-") for k in rh)


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]"])
def test_the_listener_s_own_names_pass(hd, name):
    headers = hd.auth(Host=f"{name}:{hd.port}", Origin=f"http://{name}:{hd.port}")
    status, rh, _ = hd.request("GET", "/", headers=headers)
    assert status in (200, 404) and not any(k.startswith("access-control-") for k in rh)


def test_every_answer_carries_the_security_headers(hd):
    for headers in ({}, hd.auth()):
        _, rh, _ = hd.request("GET", "/", headers=headers)
        csp = rh["content-security-policy"]
        assert (
            "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp
        )
        assert rh["x-content-type-options"] == "nosniff" and rh["referrer-policy"] == "no-referrer"
        assert rh["x-frame-options"] == "DENY" and "server" not in rh


def test_the_browser_hand_over_sets_a_strict_cookie_and_redirects_without_the_token(hd):
    status, rh, body = hd.request("GET", f"/open?token={hd.token}", headers={"Host": f"localhost:{hd.port}"})
    assert status == 303 and rh["location"] == "/" and body == b""
    cookie = rh["set-cookie"]
    assert cookie.startswith(f"memoryd_token={hd.token};")
    parts = {part.strip() for part in cookie.split(";")}
    assert {"HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={30 * 24 * 3600}"} <= parts
    assert rh["referrer-policy"] == "no-referrer"
    assert hd.request("GET", "/mcp", headers={"Cookie": f"other=1; memoryd_token={hd.token}"})[0] != 401
    for bad in ("/open", "/open?token=", "/open?token=nope", f"/open?token={hd.token[:-2]}"):
        assert hd.request("GET", bad)[:3:2] == (401, b"")


def test_memoryd_open_hands_a_one_time_code_not_the_token(hd):
    env = {**hd.proc.env, "PATH": os.environ["PATH"]}
    done = subprocess.run(
        [PYTHON, "-m", "memoryd", "open", "--print", "--socket", str(hd.proc.socket)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    assert url.startswith(f"http://127.0.0.1:{hd.port}/open?token=") and hd.token not in url
    path = url.split(str(hd.port), 1)[1]
    status, rh, _ = hd.request("GET", path)
    assert status == 303 and f"memoryd_token={hd.token};" in rh["set-cookie"]
    assert hd.request("GET", path)[0] == 401  # it works once


def test_memoryd_open_says_which_page_it_opened(hd, tmp_path):
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {tmp_path / "opened"}\n')
    browser.chmod(0o755)
    env = {**hd.proc.env, "PATH": os.environ["PATH"], "BROWSER": f"{browser} %s"}
    done = subprocess.run(
        [PYTHON, "-m", "memoryd", "open", "--socket", str(hd.proc.socket)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    opened = (tmp_path / "opened").read_text()
    assert opened.startswith(f"http://127.0.0.1:{hd.port}/open?token=")
    # the page's address, never the one-time link
    assert f"http://127.0.0.1:{hd.port}/" in done.stdout and "token" not in done.stdout + done.stderr


def test_memoryd_open_says_how_to_turn_http_on_when_it_is_off(tmp_path):
    done = subprocess.run(
        [PYTHON, "-m", "memoryd", "open", "--socket", str(tmp_path / "s.sock")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3 and "not serving HTTP" in done.stderr and "serve --http" in done.stderr


def test_the_token_and_port_files_are_0600_in_a_0700_dir(hd):
    assert stat.S_IMODE(hd.dir.stat().st_mode) == 0o700
    for name in ("http.token", "http.json"):
        st = (hd.dir / name).stat()
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    assert len(hd.token) >= 43


def _non_loopback_addresses() -> list[str]:
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except OSError:
        out = []
    return [a for a in out if not a.startswith(("127.", "::1"))]


def test_the_listener_is_on_loopback_only(hd):
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as s:
            s.settimeout(5)
            s.connect((host, hd.port))
    addresses = _non_loopback_addresses()
    if not addresses:
        pytest.skip("this machine has no non-loopback address (hostname -I shows none)")
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family) as s, pytest.raises(OSError):
            s.settimeout(3)
            s.connect((address, hd.port))
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{hd.port}"], capture_output=True, text=True).stdout
    if listening.strip():
        local = {line.split()[3].rsplit(":", 1)[0] for line in listening.splitlines()}
        assert local <= {"127.0.0.1", "[::1]"}, listening


def test_another_local_user_without_the_token_is_refused(hd):
    runuser = shutil.which("runuser")
    if os.getuid() != 0 or runuser is None:
        pytest.skip("needs root and runuser to act as another local user (nobody)")
    probe = (
        "import http.client,sys\n"
        "try:\n open(sys.argv[2]).read(); print('READ')\n"
        "except OSError: print('NOREAD')\n"
        "c=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]),timeout=10); c.request('GET','/mcp')\n"
        "r=c.getresponse(); print(r.status, len(r.read()))\n"
    )
    done = subprocess.run(
        [runuser, "-u", "nobody", "--", "/usr/bin/python3", "-c", probe, str(hd.port), str(hd.dir / "http.token")],
        capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    if done.returncode != 0 and "NOREAD" not in done.stdout:
        pytest.skip(f"cannot run as nobody here: {done.stderr.strip()[-300:]}")
    assert done.stdout.split() == ["NOREAD", "401", "0"], done.stdout + done.stderr


def test_a_busy_port_falls_back_to_a_free_one_and_replaces_the_token():
    port = free_port()
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    daemon = None
    try:
        daemon = start_http_daemon(port)
        actual = json.loads((daemon.dir / "http.json").read_text())["port"]
        assert actual != port and daemon.proc.status()["http"]["port"] == actual
        busy = daemon.proc.events("http_port_busy")
        assert (
            busy and busy[0]["asked"] == port and busy[0]["port"] == actual and busy[0]["token"] == "replaced"
        )
        daemon.port = actual
        assert daemon.request("GET", "/mcp", headers=daemon.auth())[0] != 401
    finally:
        squatter.close()
        if daemon is not None:
            daemon.proc.kill()
            shutil.rmtree(daemon.proc.root, ignore_errors=True)
