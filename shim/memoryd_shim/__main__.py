import sys

if not __package__:
    # run as a file, ``python [-S] <...>/memoryd_shim/__main__.py``: ~6 ms quicker to start than ``-m``,
    # which imports runpy (and contextlib, collections, ...). The package's parent folder goes on the path
    # in place of the package folder itself, so this works without site-packages too.
    sys.path[0] = sys.path[0].rpartition("/")[0] or "/"

from memoryd_shim import main  # noqa: E402

raise SystemExit(main())
