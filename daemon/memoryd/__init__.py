"""memoryd: a shared, always-warm memory for coding agents."""

__version__ = "0.1.0"
