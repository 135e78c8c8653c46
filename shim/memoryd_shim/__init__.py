"""memoryd-shim: the per-agent stdio relay to the memoryd daemon (standard library only)."""

__version__ = "0.1.0"


def main(argv: list[str] | None = None) -> int:
    """Console entry point; see :mod:`memoryd_shim.relay`."""
    from memoryd_shim.relay import main as _main

    return _main(argv)
