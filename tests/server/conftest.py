"""Server tests run against a fake simulator and a temporary scenarios folder: fast, no engine needed."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from layerscope import scenario as scn
from layerscope.commands.serve import build_app
from layerscope.server.settings import Settings

_spec = importlib.util.spec_from_file_location("fakesim", Path(__file__).with_name("fakesim.py"))
assert _spec and _spec.loader
fakesim = importlib.util.module_from_spec(_spec)
sys.modules["fakesim"] = fakesim
_spec.loader.exec_module(fakesim)


@pytest.fixture
def presets_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "scenarios"
    d.mkdir()
    for name, data in fakesim.PRESETS.items():
        (d / f"{name}.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setattr(scn, "scenarios_dir", lambda: d)
    return d


@pytest.fixture
def settings() -> Settings:
    return Settings(play_seconds=0.2, tick_s=0.005)


@pytest.fixture
def client(presets_dir: Path, settings: Settings) -> Iterator[TestClient]:
    app = build_app(settings, simulate=fakesim.fake_simulate)
    with TestClient(app) as c:
        yield c
