"""JSON for the shim's start-up path, without importing the ``json`` package.

``import json`` pulls in ``re`` and ``enum``: on a slow machine that is ~15 ms of the shim's 50 ms budget
(spawn -> first answered ``initialize``). ``json`` does its real work in CPython's C accelerator ``_json``;
this module calls the same scanner and encoder directly, configured as ``json.loads`` / ``json.dumps``
configure them. Where ``_json`` lacks them (another interpreter), it falls back to ``json`` itself.

``raw_decode(text, index)`` is ``json.JSONDecoder().raw_decode``. ``loads(data)`` takes ``bytes`` (UTF-8) or ``str`` and raises ``ValueError`` for anything that is not exactly
one JSON value (``UnicodeDecodeError`` and ``json.JSONDecodeError`` are ``ValueError`` subclasses).
``dumps(obj, ensure_ascii=True, separators=(",", ":"))`` returns a ``str``; raises ``TypeError`` for
values JSON cannot hold.
"""

from __future__ import annotations

_WS = " \t\n\r"


def _raise_type_error(obj: object) -> object:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class _ScanContext:
    """The attributes ``_json.make_scanner`` reads, set as ``json.JSONDecoder()`` sets them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner

    _scan = make_scanner(_ScanContext())
    _encoders = {
        (ascii, seps): make_encoder(None, _raise_type_error, esc, None, seps[1], seps[0], False, False, True)
        for ascii, esc in ((True, encode_basestring_ascii), (False, encode_basestring))
        for seps in ((",", ":"), (", ", ": "))
    }
except (ImportError, TypeError):  # no usable C accelerator: the json package does the same, slower to import
    _scan = None
    _encoders = {}


def _c_scan(text: str, index: int) -> tuple[object, int]:
    try:
        return _scan(text, index)
    except StopIteration:
        raise ValueError(f"expecting a JSON value at offset {index}") from None
    except SystemError:
        # CPython 3.11's scanner builds its errors from json.decoder.JSONDecodeError and fails with
        # SystemError when json.decoder was never imported: import it (invalid input only) and rescan.
        import json.decoder  # noqa: F401

        try:
            return _scan(text, index)
        except StopIteration:
            raise ValueError(f"expecting a JSON value at offset {index}") from None


def loads(data: bytes | str) -> object:
    """Parse one JSON value (surrounding whitespace allowed)."""
    if _scan is None:
        import json

        return json.loads(data)
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    start = len(text) - len(text.lstrip(_WS))
    value, end = _c_scan(text, start)
    if text[end:].strip(_WS):
        raise ValueError(f"extra data after the JSON value at offset {end}")
    return value


def raw_decode(text: str, index: int) -> tuple[object, int]:
    """``(value, end)`` for the JSON value starting exactly at ``text[index]``; raises ``ValueError``."""
    if _scan is None:
        import json

        return json.JSONDecoder().raw_decode(text, index)
    return _c_scan(text, index)


def dumps(obj: object, ensure_ascii: bool = True, separators: tuple[str, str] = (",", ":")) -> str:
    """Serialize like ``json.dumps(obj, ensure_ascii=..., separators=...)``."""
    encoder = _encoders.get((ensure_ascii, separators))
    if encoder is None:
        import json

        return json.dumps(obj, ensure_ascii=ensure_ascii, separators=separators)
    if isinstance(obj, str):  # the C encoder handles containers and scalars, but not a bare str
        return (encode_basestring_ascii if ensure_ascii else encode_basestring)(obj)
    return "".join(encoder(obj, 0))
