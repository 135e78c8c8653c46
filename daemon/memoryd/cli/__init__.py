"""The ``memoryd`` command line: :func:`main` parses, each command lives in its own module (:mod:`.main`)."""

from memoryd.cli.main import main

__all__ = ["main"]
