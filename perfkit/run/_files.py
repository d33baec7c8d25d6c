"""Durable writes: a file is replaced whole or not at all, a line is appended whole or not at all,
and a failure is said in the words a user acts on.

Training must not lose what a run wrote when the disk fills or the process is killed, and two
jobs may write one run directory at once. So a file is written to a temporary file of this
process's own and renamed over the old one (``write_atomically``); a line is appended under an
``flock`` after cutting off a line a killed writer left torn (``append_line``), and undone when
the write fails; ``locked`` serialises a read-modify-write of a shared file (``run.json``).
``describe_os_error`` says ``no space left on device``, not ``[Errno 28]``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


def describe_os_error(exc: OSError) -> str:
    """An OS error in the words a user acts on (``no space left on device``), with the file."""
    words = {
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "read-only file system",
        errno.EFBIG: "file too large",
    }.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return f"{words} ({exc.filename})" if exc.filename else words


def write_atomically(path: Path, text: str, *, new: bool = False) -> None:
    """Write ``path`` through a temporary file and a rename: a full disk leaves the old file whole.

    The temporary name is this process's own (pid and a random part), so two writers of one
    file never write into each other's. ``new``: claim the name first (``O_EXCL``), raising
    ``FileExistsError`` when another writer has it, so a file is never replaced.
    """
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    if new:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if new:  # the claimed name, left empty: free it for the next window
            with contextlib.suppress(OSError):
                path.unlink()
        raise


def read_object(file: Path) -> dict[str, Any] | None:
    """The JSON object in ``file``; None where it is missing, unreadable or not an object."""
    try:
        info = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


@contextlib.contextmanager
def locked(file: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``file`` (created if missing) for the block; where the file
    system has no locks, the block runs unlocked (the writes are still whole)."""
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def append_line(path: Path, line: Mapping[str, Any], *, sync: bool = False) -> None:
    """Append ``line`` as one JSON line. A torn last line (a write cut short by a full disk or a
    kill) is cut off first, so the new line never glues to it; a write that fails is undone."""
    data = (json.dumps(line, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with contextlib.suppress(OSError):  # another job appending: one line at a time, whole
            fcntl.flock(fd, fcntl.LOCK_EX)
        size = _untorn(fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # shrinking needs no space: the file ends on a whole line
            raise
    finally:
        os.close(fd)


def _untorn(fd: int) -> int:
    """Cut the file open on ``fd`` back to its last newline; returns its size."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return start + cut + 1
        end = start
    os.ftruncate(fd, 0)
    return 0
