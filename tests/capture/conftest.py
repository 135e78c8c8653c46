"""Fixtures for the capture tests: real daemon processes (see :mod:`support.daemon`), never left running."""

from support.fixtures import make_daemon, pytest_runtest_makereport  # noqa: F401  (fixture and hook)
