"""Streaming read of Chrome trace files: one event at a time, never the whole file in memory.

torch's default (C++) writer spreads each event over ~10 lines and its Python writer puts one
per line, so neither line-based parsing nor ``json.load`` (memory several times the file) will
do. Instead the top-level object is walked key by key and each element of ``"traceEvents"`` is
decoded with ``json.JSONDecoder.raw_decode`` from a sliding buffer of about one chunk.

Some exporters write an event's ``ts`` or ``dur`` as a string; Chrome's trace viewer reads a
numeric one ("12.5") as the number, so this reader does too, and refuses any other string rather
than let the analysis leave the event out.

    metadata: dict[str, object] = {}
    for event in iter_trace_events("step.pt.trace.json.gz", metadata):
        ...
    metadata["deviceProperties"]        # the other top-level keys, filled in as they are met
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .._validate import check_int

_CHUNK_CHARS = 1 << 18
_NOT_SPACE = re.compile(r"[^ \t\r\n]")
_GZIP_MAGIC = b"\x1f\x8b"
# A value that is still incomplete after this much text is corrupt, not merely cut at a chunk edge.
_MAX_VALUE_CHARS = 1 << 27
# A decoding error this close to the end of the text may just mean the value goes on in the next chunk.
_EDGE_CHARS = 16
# The time fields an exporter may write as strings, and the strings that are JSON numbers.
_TIME_KEYS = ("ts", "dur")
_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def iter_trace_events(
    path: str | os.PathLike[str], metadata: dict[str, Any] | None = None, *, chunk_chars: int = _CHUNK_CHARS
) -> Iterator[dict[str, Any]]:
    """Yield the events of a Chrome trace (``.json`` or gzip, told by content, not by name).

    Top-level keys other than ``traceEvents`` go into ``metadata`` as they are read (torch
    writes them before the events, except ``traceName``). The JSON array form (a bare list of
    events) is read too; elements that are not objects are left out. A ``ts`` or ``dur`` written
    as a numeric string comes out as the number. Raises ``FileNotFoundError`` at once for a
    missing file and ``ValueError`` naming the file and the character offset, while iterating,
    for anything that is not a trace (bad JSON, nesting too deep for Python's decoder, a number
    too long to convert, a ``ts`` or ``dur`` that is a string but not a number).
    ``chunk_chars`` is how much text is read at a time.

    >>> import json, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> _ = open(p, "w").write(json.dumps({"traceEvents": [{"ph": "X", "name": "a"}], "k": 1}))
    >>> meta = {}
    >>> [e["name"] for e in iter_trace_events(p, meta)], meta
    (['a'], {'k': 1})
    >>> _ = open(p, "w").write(json.dumps({"traceEvents": [{"name": "a", "ts": "12.5", "dur": "3"}]}))
    >>> [(e["ts"], e["dur"]) for e in iter_trace_events(p)]
    [(12.5, 3)]
    """
    values = iter_trace_values(path, metadata, chunk_chars=chunk_chars)
    return (event for event in values if isinstance(event, dict))


def iter_trace_values(
    path: str | os.PathLike[str], metadata: dict[str, Any] | None = None, *, chunk_chars: int = _CHUNK_CHARS
) -> Iterator[Any]:
    """Like :func:`iter_trace_events`, but every element of the events array, objects or not.

    The analyser counts the elements that are not events instead of dropping them unseen.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {path!r}")
    file = Path(path)
    if not file.is_file():
        what = "is not a file" if file.exists() else "not found"
        raise FileNotFoundError(f"trace file {what}: {str(file)!r}")
    check_int(chunk_chars, "chunk_chars", low=1)
    return _events(file, metadata if metadata is not None else {}, chunk_chars)


def _events(file: Path, metadata: dict[str, Any], chunk_chars: int) -> Iterator[Any]:
    with _open_text(file) as fh:
        buf = _Buffer(fh, file, chunk_chars)
        first = buf.peek()
        if first == "[":
            yield from _array(buf, closed=False)
            return
        if first != "{":
            raise buf.error("not a Chrome trace (expected a JSON object or array)")
        buf.advance()
        found = False
        while (c := buf.peek()) != "}":
            if c == ",":
                buf.advance()
                continue
            key = buf.decode()
            if not isinstance(key, str) or buf.peek() != ":":
                raise buf.error("not valid JSON (expected a key and ':')")
            buf.advance()
            if key == "traceEvents" and buf.peek() == "[":
                found = True
                yield from _array(buf, closed=True)
            else:
                metadata[key] = buf.decode()
    if not found:
        raise ValueError(f"{str(file)!r} has no 'traceEvents' array: not a Chrome trace")


def _array(buf: _Buffer, *, closed: bool) -> Iterator[Any]:
    """Events of the array at the cursor; ``closed=False`` accepts a missing ``]`` (Chrome does)."""
    buf.advance()
    while (c := buf.peek(allow_eof=not closed)) != "]":
        if c is None:
            return
        if c == ",":
            buf.advance()
            continue
        start = buf.offset
        value = buf.decode(peeked=True)
        if type(value) is dict and (type(value.get("ts")) is str or type(value.get("dur")) is str):
            _read_times(value, buf, start)
        yield value
    buf.advance()


def _read_times(event: dict[str, Any], buf: _Buffer, start: int) -> None:
    """Replace a numeric string ``ts`` or ``dur`` by its number; refuse any other string."""
    for key in _TIME_KEYS:
        text = event.get(key)
        if type(text) is not str:
            continue
        number = text.strip()
        try:
            if _INTEGER.fullmatch(number):
                event[key] = int(number)
                continue
            if _NUMBER.fullmatch(number):
                event[key] = float(number)
                continue
        except ValueError:  # an integer past Python's digit limit, as for a JSON number
            pass
        name = event.get("name")
        which = f"event {_short(name)!r}" if isinstance(name, str) else "an event"
        raise buf.error(f"not a readable trace ({which} has {key} {_short(text)!r}, not a number)", start)


def _short(text: str, limit: int = 60) -> str:
    """``text`` cut to fit in a one-line error."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _open_text(file: Path) -> IO[str]:
    with open(file, "rb") as probe:
        gzipped = probe.read(2) == _GZIP_MAGIC
    # Names with bytes that are not UTF-8 must not stop the analysis of everything else.
    if gzipped:
        return gzip.open(file, "rt", encoding="utf-8", errors="replace")
    return open(file, encoding="utf-8", errors="replace")


class _Buffer:
    """A window onto the text: refilled by chunks, consumed text dropped."""

    def __init__(self, fh: IO[str], file: Path, chunk_chars: int) -> None:
        self._fh = fh
        self._chunk_chars = chunk_chars
        self._file = file
        self._decoder = json.JSONDecoder()
        self._text = ""
        self._pos = 0
        self._dropped = 0  # characters before self._text, for error offsets
        self._eof = False

    @property
    def offset(self) -> int:
        """The character offset of the cursor in the whole text."""
        return self._dropped + self._pos

    def error(self, what: str, at: int | None = None) -> ValueError:
        """``what`` is wrong at character ``at`` of the whole text (default: at the cursor)."""
        where = self.offset if at is None else at
        return ValueError(f"{str(self._file)!r} is {what} at character {where}")

    def peek(self, *, allow_eof: bool = False) -> str | None:
        """The next character after white space; at the end: None if allowed, else an error."""
        while True:
            found = _NOT_SPACE.search(self._text, self._pos)
            if found is not None:
                self._pos = found.start()
                return self._text[self._pos]
            self._pos = len(self._text)
            if not self._fill():
                if allow_eof:
                    return None
                raise self.error("cut short (the JSON ends too early)")

    def advance(self) -> None:
        self._pos += 1

    def decode(self, *, peeked: bool = False) -> Any:
        """The JSON value after white space at the cursor (``peeked``: the cursor is on it already)."""
        if not peeked:
            self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as exc:
                where = exc.pos - self._pos  # from the cursor, which a failed refill moves to 0
                cut = exc.pos >= len(self._text) - _EDGE_CHARS or exc.msg.startswith("Unterminated string")
                if cut and self._fill():
                    continue
                raise self.error(f"not valid JSON ({exc.msg})", self.offset + where) from None
            except RecursionError:  # the C decoder recurses once per level of [ or {
                raise self.error("nested too deeply to decode") from None
            except ValueError as exc:  # e.g. an integer past Python's digit limit
                raise self.error(f"not readable ({exc})") from None
            # A number at the very end of the buffer may continue in the next chunk.
            if end < len(self._text) or not self._fill():
                self._pos = end
                return value

    def _fill(self) -> bool:
        if self._eof:
            return False
        if len(self._text) - self._pos > _MAX_VALUE_CHARS:
            raise self.error("not valid JSON (a value that never ends)")
        try:
            more = self._fh.read(self._chunk_chars)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"cannot read trace file {str(self._file)!r}: {exc}") from None
        self._dropped += self._pos
        self._text = self._text[self._pos :] + more
        self._pos = 0
        self._eof = not more
        return bool(more)
