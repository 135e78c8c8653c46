"""The gate: only regular, singly linked files reached without any symlink are read."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from memoryd.board.gate import (
    BrokenFile,
    UnsafePath,
    is_safe_file,
    list_dir,
    open_dir,
    safe_read_bytes,
    safe_read_text,
)
from support.board import BRIEF, OUTSIDE_WORDS

SAID = Path("briefs") / BRIEF / "said.txt"


def brief_dir(board: Path) -> Path:
    return board / "briefs" / BRIEF


def test_regular_file_reads_relative_and_absolute(board):
    assert safe_read_text(board, SAID) == "the checkout button does nothing"
    assert safe_read_bytes(board, board / SAID) == b"the checkout button does nothing"
    assert is_safe_file(board, SAID) and is_safe_file(board, board / SAID)


def test_symlinked_board_root_is_allowed(board, tmp_path):
    link = tmp_path / "board-link"
    link.symlink_to(board)
    assert safe_read_text(link, SAID) == "the checkout button does nothing"
    assert safe_read_text(link, link / SAID) == "the checkout button does nothing"


def test_symlink_to_outside_file_is_refused(board, outside):
    (brief_dir(board) / "said.txt").unlink()
    (brief_dir(board) / "said.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(UnsafePath, match="symlink"):
        safe_read_bytes(board, SAID)
    assert not is_safe_file(board, SAID)


def test_symlink_to_a_file_inside_the_board_is_refused_too(board):
    (brief_dir(board) / "said.txt").unlink()
    (brief_dir(board) / "said.txt").symlink_to(brief_dir(board) / "prompt.md")
    with pytest.raises(UnsafePath, match="symlink"):
        safe_read_bytes(board, SAID)


def test_hard_link_to_outside_file_is_refused(board, outside):
    (brief_dir(board) / "said.txt").unlink()
    os.link(outside / "secret.txt", brief_dir(board) / "said.txt")
    with pytest.raises(UnsafePath, match="hard link"):
        safe_read_bytes(board, SAID)
    assert not is_safe_file(board, SAID)


def test_symlinked_parent_directory_is_refused(board, outside):
    (outside / "said.txt").write_text(OUTSIDE_WORDS)
    (board / "briefs" / "b-20260101-cccccc").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath, match="symlink"):
        safe_read_bytes(board, Path("briefs/b-20260101-cccccc/said.txt"))
    with pytest.raises(UnsafePath):
        list_dir(board, Path("briefs/b-20260101-cccccc"))
    assert not is_safe_file(board, Path("briefs/b-20260101-cccccc/said.txt"))


@pytest.mark.timeout(10)
def test_fifo_is_refused_without_blocking(board):
    (brief_dir(board) / "said.txt").unlink()
    os.mkfifo(brief_dir(board) / "said.txt")
    with pytest.raises(UnsafePath, match="fifo"):
        safe_read_bytes(board, SAID)
    assert not is_safe_file(board, SAID)


def test_socket_is_refused(board, monkeypatch):
    (brief_dir(board) / "said.txt").unlink()
    monkeypatch.chdir(brief_dir(board))  # bind a relative name: tmp paths can exceed sun_path
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("said.txt")
        with pytest.raises(UnsafePath, match="socket"):
            safe_read_bytes(board, SAID)


def test_device_node_is_refused(board):
    (brief_dir(board) / "said.txt").unlink()
    try:
        os.mknod(brief_dir(board) / "said.txt", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    except (PermissionError, OSError):
        pytest.skip("cannot create a device node here (needs CAP_MKNOD)")
    with pytest.raises(UnsafePath, match="device"):
        safe_read_bytes(board, SAID)


@pytest.mark.timeout(10)
def test_symlink_to_dev_zero_is_never_read(board):
    (brief_dir(board) / "said.txt").unlink()
    (brief_dir(board) / "said.txt").symlink_to("/dev/zero")
    with pytest.raises(UnsafePath, match="symlink"):
        safe_read_bytes(board, SAID)


def test_directory_is_not_a_file(board):
    with pytest.raises(UnsafePath, match="directory"):
        safe_read_bytes(board, Path("briefs") / BRIEF)


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "briefs/../../outside/secret.txt", "briefs/./x/../y"]
)
def test_climbing_paths_are_refused(board, outside, path):
    with pytest.raises(UnsafePath):
        safe_read_bytes(board, Path(path))
    assert not is_safe_file(board, Path(path))


def test_absolute_path_outside_the_board_is_refused(board, outside):
    with pytest.raises(UnsafePath, match="outside the board"):
        safe_read_bytes(board, outside / "secret.txt")
    assert not is_safe_file(board, Path("/etc/passwd"))


def test_nul_in_path_is_refused(board):
    with pytest.raises(UnsafePath):
        safe_read_bytes(board, Path("briefs/x\x00y"))
    assert not is_safe_file(board, Path("briefs/x\x00y"))


def test_too_large_is_refused(board):
    with pytest.raises(UnsafePath, match="too large"):
        safe_read_bytes(board, SAID, max_bytes=5)


def test_invalid_utf8_is_a_broken_file(board):
    (brief_dir(board) / "said.txt").write_bytes(b"ok \xff\xfe not utf-8")
    assert safe_read_bytes(board, SAID) == b"ok \xff\xfe not utf-8"
    with pytest.raises(BrokenFile, match="invalid UTF-8 at byte 3"):
        safe_read_text(board, SAID)
    assert issubclass(BrokenFile, UnsafePath)


def test_bom_is_dropped(board):
    (brief_dir(board) / "said.txt").write_bytes("\ufeffhello".encode())
    assert safe_read_text(board, SAID) == "hello"


def test_missing_file_raises_file_not_found(board):
    with pytest.raises(FileNotFoundError):
        safe_read_bytes(board, Path("briefs") / BRIEF / "notes.md")
    with pytest.raises(FileNotFoundError):
        safe_read_bytes(board, Path("briefs/b-20991231-ffffff/said.txt"))
    assert not is_safe_file(board, Path("briefs") / BRIEF / "notes.md")


def test_list_dir_does_not_follow_symlinks(board, outside):
    d = brief_dir(board)
    (d / "linked").symlink_to(outside, target_is_directory=True)
    entries = list_dir(board, Path("briefs") / BRIEF)
    names = [e.name for e in entries]
    assert names == sorted(names)
    assert {"brief.json", "said.txt", "prompt.md", "screens", "linked"} <= set(names)
    linked = next(e for e in entries if e.name == "linked")
    assert linked.is_symlink() and not linked.is_dir(follow_symlinks=False)
    screens = next(e for e in entries if e.name == "screens")
    assert screens.is_dir(follow_symlinks=False)


def test_list_dir_refuses_symlinked_directory(board, outside):
    (board / "briefs" / "b-20260101-dddddd").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePath, match="symlink"):
        list_dir(board, Path("briefs/b-20260101-dddddd"))


def test_open_dir_reads_relative_to_its_descriptor(board):
    with open_dir(board, Path("briefs") / BRIEF) as d:
        assert d.read_text("said.txt") == "the checkout button does nothing"
        assert d.rel == f"briefs/{BRIEF}"
        with pytest.raises(UnsafePath):
            d.read_bytes("../" + BRIEF + "/said.txt")


@pytest.mark.timeout(30)
def test_swapping_the_file_while_reading_never_leaks_or_blocks(board, outside):
    """A writer keeps replacing said.txt with a symlink out, a FIFO and a regular file; every read either
    returns the board's own text or is refused (the fstat-after-open re-check), and none blocks."""
    d = brief_dir(board)
    stop = threading.Event()

    def swapper() -> None:
        i = 0
        while not stop.is_set():
            tmp = d / f".swap{i % 3}"
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            if i % 3 == 0:
                tmp.symlink_to(outside / "secret.txt")
            elif i % 3 == 1:
                os.mkfifo(tmp)
            else:
                tmp.write_text("the checkout button does nothing")
            os.replace(tmp, d / "said.txt")
            i += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    outcomes = set()
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                text = safe_read_text(board, SAID)
            except UnsafePath as exc:
                outcomes.add(exc.reason.split(" (")[0])
            except FileNotFoundError:
                outcomes.add("absent")
            else:
                assert text == "the checkout button does nothing"
                outcomes.add("read")
    finally:
        stop.set()
        thread.join()
    assert OUTSIDE_WORDS not in repr(outcomes)
    assert outcomes & {"symlink", "fifo"}  # the swaps were seen and refused
