"""Outputs written atomically: a temporary file in the target's folder, renamed over the target once complete.

A full disk, a crash or Ctrl-C mid-write leaves the old file as it was (and no temporary behind); a reader never
sees half a file. Every command that writes a file goes through here (`layerscope run --events/--trace/--summary`,
`report -o`, `sweep --html`, bench outputs).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


@contextmanager
def atomic_writer(path: Path | str, encoding: str = "utf-8") -> Iterator[TextIO]:
    """A text file to write `path` through; it replaces `path` only when the block ends without an error.
    An OSError names `path` (not the temporary)."""
    with _atomic_file(path, "w", encoding) as f:
        yield f


@contextmanager
def _atomic_file(path: Path | str, mode: str, encoding: str | None) -> Iterator[Any]:
    """A temporary in `path`'s folder, opened with `mode`, renamed over `path` once written and synced."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except OSError as e:
        _remove(tmp)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    except BaseException:
        _remove(tmp)
        raise


def write_text_atomic(path: Path | str, text: str, encoding: str = "utf-8") -> None:
    with atomic_writer(path, encoding) as f:
        f.write(text)


def _mode_for(path: Path) -> int:
    """The mode the file has, or a new file's (0666 less the umask): mkstemp's 0600 is not what `>` would give."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """`data` into `path` as atomic_writer writes text: a temporary in the same folder, renamed over `path`."""
    with _atomic_file(path, "wb", None) as f:
        f.write(data)
