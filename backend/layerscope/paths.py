"""Where the shipped assets live: inside the wheel (installed) or at the repository top (editable)."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent
_REPO = _PKG.parent.parent


def _asset(name: str) -> Path:
    for candidate in (_PKG / name, _REPO / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"LayerScope asset folder {name!r} not found next to {_PKG}")


def frontend_dir() -> Path:
    return _asset("frontend")


def scenarios_dir() -> Path:
    return _asset("scenarios")
