"""Prepared presets kept on disk: each preset's `loaded` message (its first screen), gzipped, across restarts.

    GET /api/loaded/NAME ─▶ in memory? ─▶ the run's text
                         └▶ on disk?   ─▶ the file as it is (gzip); the run is simulated at the page's `load`
    a preset prepared (a visit, --prewarm) ─▶ its text written here, in the background

A cold server simulated a heavy preset before its first screen (two-nodes-wide-ep 5.6 s, two-node-1p3d 4.1 s:
bench/README.md "First screen, fifth round"). A file is named by a digest of what made its text: the scenario's
content (its seed included), the simulator handed to the server, the code (every file of the layerscope package,
its measured tables in hardware/data included) and the interpreter, numpy and OPENBLAS_* settings, so a code
change never serves stale events. Files are written
atomically (layerscope/atomic.py); a file that does not decompress whole (a partial or corrupt one: gzip checks
its CRC and length) is ignored, removed and written again at the next prepare. Past `max_bytes` the files used
longest ago go first.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import os
import sys
import zlib
from functools import cache
from pathlib import Path

from layerscope.atomic import write_bytes_atomic
from layerscope.scenario import ScenarioSpec

log = logging.getLogger("layerscope.server")
_PKG = Path(__file__).resolve().parent.parent  # the layerscope package: its sources and its data files
SUFFIX = ".json.gz"
# gzip level 1: a 10 MB `loaded` in ~0.1 s (level 6 took several times that for a file ~10% smaller); the files
# are read far more often than written
GZIP_LEVEL = 1
# 22 presets' `loaded` are 0.1-11 MB of JSON, ~0.02-1.5 MB gzipped: this holds the library many times over
DEFAULT_MAX_BYTES = 256 * 2**20


def gzip_text(text: str) -> bytes:
    """`text` as UTF-8, gzipped at GZIP_LEVEL with no timestamp (the same text, the same bytes): a file here, and a
    warm server's GET /api/loaded answer (server/runs.py PreparedRun.loaded_gzip)."""
    return gzip.compress(text.encode("utf-8"), GZIP_LEVEL, mtime=0)


def environment() -> str:
    """What besides the code changes the numbers: the interpreter, numpy, and the OPENBLAS_* variables (BLAS
    kernels chosen by OPENBLAS_CORETYPE round differently: bench/event_digests.py runs with them as they are)."""
    import numpy

    blas = sorted((k, v) for k, v in os.environ.items() if k.startswith("OPENBLAS_"))
    return f"{sys.version}|numpy {numpy.__version__}|{blas}"


@cache
def code_digest(root: Path = _PKG) -> str:
    """sha256 over every file of the package (path and bytes; bytecode caches left out): what made the events."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def default_dir() -> Path | None:
    """.cache/prepared/ at the repository's top (a gitignored folder); None when the package is not run from a
    checkout (an installed wheel writes nowhere unless told: `layerscope serve --cache-dir`)."""
    repo = _PKG.parent.parent
    return repo / ".cache" / "prepared" if (repo / "pyproject.toml").is_file() else None


class PreparedCache:
    """`loaded` texts of prepared presets in `folder`, keyed by spec, simulator and code (see the module)."""

    def __init__(self, folder: Path, simulator: str, max_bytes: int = DEFAULT_MAX_BYTES, code: str | None = None):
        self.folder = Path(folder)
        self.simulator = simulator  # the engine's qualified name: a test's fake never shares the engine's files
        self.max_bytes = max_bytes
        self.code = code if code is not None else code_digest()
        self.hits = self.misses = self.written = 0  # tests and /api/debug

    def path(self, spec: ScenarioSpec) -> Path:
        h = hashlib.sha256()
        for part in (spec.model_dump_json(), self.simulator, self.code, environment()):
            h.update(part.encode() + b"\0")
        return self.folder / f"{h.hexdigest()[:40]}{SUFFIX}"

    def get(self, spec: ScenarioSpec) -> str | None:
        """The `loaded` text stored for `spec`, or None (none, or one that does not decompress whole: removed)."""
        found = self.get_gzip(spec)
        return None if found is None else found[1]

    def get_gzip(self, spec: ScenarioSpec) -> tuple[bytes, str] | None:
        """The file as stored (gzip, what an HTTP answer can carry as it is) and its text, checked whole; or None."""
        found = self._read(self.path(spec))
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def _read(self, path: Path) -> tuple[bytes, str] | None:
        try:
            raw = path.read_bytes()
            text = gzip.decompress(raw).decode("utf-8")
            if not text:  # an empty file decompresses to nothing: no run's text is empty
                raise EOFError("empty")
        except FileNotFoundError:
            return None
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:  # partial or corrupt: BadGzipFile is OSError
            log.warning("prepared cache: %s ignored (%s); it is written again", path.name, e)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: evicted last
        return raw, text

    def put(self, spec: ScenarioSpec, text: str) -> bool:
        """Store `text` for `spec` unless a whole file is there already; then evict past max_bytes. False when the
        folder cannot be written (logged: the server works the same without it)."""
        path = self.path(spec)
        if path.is_file() and self._read(path) is not None:
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(path, gzip_text(text))
        except OSError as e:
            log.warning("prepared cache: %s not written: %s", path.name, e)
            return False
        self.written += 1
        self.evict(keep=path)
        return True

    def evict(self, keep: Path | None = None) -> int:
        """Remove the files used longest ago until the folder holds at most max_bytes; returns how many went."""
        files = []
        for p in self.folder.glob(f"*{SUFFIX}"):
            with contextlib.suppress(OSError):
                st = p.stat()
                files.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in files)
        gone = 0
        for _, size, p in sorted(files, key=lambda f: f[0]):
            if total <= self.max_bytes:
                break
            if p == keep:
                continue
            with contextlib.suppress(OSError):
                p.unlink()
                total -= size
                gone += 1
        return gone
