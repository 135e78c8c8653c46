"""LanceDB without the REST client it imports at its top level and memoryd never uses.

``import lancedb`` imports ``lance_namespace``, which imports request and response models from
``lance_namespace_urllib3_client``; that package's ``__init__`` also imports its nine REST API modules
(urllib3 and generated request builders) for the REST namespaces, which memoryd never connects to: its
index is a local folder. Measured with lancedb 0.40 / lance-namespace 0.13 on 2 cores: ``import lancedb``
2.5 s -> 1.6 s, and 13.5 MB less resident (129 -> 115.5 MB, 60 modules fewer).

:func:`register` puts the package in ``sys.modules`` with its ``__path__`` but without running its
``__init__``, so ``lance_namespace_urllib3_client.models`` loads as usual and the API modules never do.
The first use of any name on the package itself (``ApiClient``, ``TableApi``, ``from ... import *``)
runs the package's own ``__init__`` then, so every name it defines is there, as shipped. The package
imports this module (``memoryd/index/__init__.py``) before any of its modules imports lancedb.
"""

from __future__ import annotations

import importlib.util
import sys
import threading

REST_CLIENT = "lance_namespace_urllib3_client"

_lock = threading.RLock()  # re-entered when the package's own __init__ asks itself for a name


def register() -> bool:
    """Register the package without its ``__init__``; False (nothing done) when it or lancedb is already
    imported, or the package is not installed."""
    if REST_CLIENT in sys.modules or "lancedb" in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(REST_CLIENT)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return False
    module = importlib.util.module_from_spec(spec)
    done = False

    def run_init(name: str):
        # a name the package's own __init__ defines: run it now, in this very module object
        nonlocal done
        if name.startswith("__") and name not in ("__all__", "__version__"):
            raise AttributeError(name)
        with _lock:
            if not done:
                done = True
                try:
                    spec.loader.exec_module(module)
                finally:
                    if module.__dict__.get("__getattr__") is run_init:  # not one the package defines
                        del module.__getattr__
        return module.__dict__[name] if name in module.__dict__ else _missing(name)

    module.__getattr__ = run_init
    sys.modules[REST_CLIENT] = module
    return True


def _missing(name: str):
    raise AttributeError(f"module {REST_CLIENT!r} has no attribute {name!r}")
