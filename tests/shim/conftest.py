"""Fixtures for the shim's tests; the helpers themselves are in :mod:`support.shim`."""

from __future__ import annotations

import os
import shutil

import pytest

from support.daemon import short_tmpdir
from support.shim import EchoPeer, ShimProc


@pytest.fixture
def short_dir():
    """A short private directory under /tmp (socket paths must stay under ~100 bytes)."""
    path = str(short_tmpdir())
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sock_path(short_dir) -> str:
    return os.path.join(short_dir, "d.sock")


@pytest.fixture
def peers():
    """Factory for :class:`EchoPeer`; every peer is stopped at teardown."""
    started: list[EchoPeer] = []

    def make(path: str, **kwargs) -> EchoPeer:
        peer = EchoPeer(path, **kwargs).start()
        started.append(peer)
        return peer

    yield make
    for peer in started:
        peer.stop()


@pytest.fixture
def shims():
    """Factory for :class:`ShimProc`; every shim still running at teardown is killed."""
    started: list[ShimProc] = []

    def make(
        *args: str,
        env: dict | None = None,
        cwd: str | None = None,
        script: bool = False,
        command=None,
        default_signals: bool = False,
    ) -> ShimProc:
        shim = ShimProc(
            list(args), env=env, cwd=cwd, script=script, command=command, default_signals=default_signals
        )
        started.append(shim)
        return shim

    yield make
    for shim in started:
        shim.kill()
