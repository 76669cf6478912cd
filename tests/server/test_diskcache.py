"""Prepared presets on disk (server/diskcache.py): a cold server's first screen without simulating first."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest
from fakesim import PRESETS, fake_simulate
from fastapi.testclient import TestClient

from layerscope import cli
from layerscope import scenario as scn
from layerscope.commands.serve import build_app
from layerscope.server import prewarm
from layerscope.server.diskcache import PreparedCache, code_digest, default_dir
from layerscope.server.runs import prepare
from layerscope.server.settings import Settings

NAME = "two-chunks"


def _settings(folder: Path, **kw: object) -> Settings:
    return Settings(play_seconds=0.2, tick_s=0.005, prepared_cache_dir=str(folder), **kw)


def _wait_files(folder: Path, n: int) -> list[Path]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        files = sorted(folder.glob("*.json.gz"))
        if len(files) >= n:
            return files
        time.sleep(0.01)
    raise AssertionError(f"fewer than {n} files in {folder}")


def _first_screen(folder: Path, simulate=fake_simulate, encoding: str = "gzip") -> tuple[str, object]:
    """GET /api/loaded/NAME on a new server (a cold start) and its app, once the run is written to disk."""
    app = build_app(_settings(folder), simulate)
    with TestClient(app) as client:
        r = client.get(f"/api/loaded/{NAME}", headers={"Accept-Encoding": encoding})
        assert r.status_code == 200 and r.headers.get("content-encoding", "identity") in (encoding, "identity")
        text = r.text
        with client.websocket_connect("/ws") as ws:  # the page's own load: the run plays
            ws.send_json({"type": "load", "scenario": NAME, "loaded": False})
            assert [ws.receive_json()["type"] for _ in range(2)] == ["details", "state"]
        _wait_files(folder, 1)
    return text, app


def test_a_cold_server_serves_a_preset_from_disk_byte_for_byte_as_a_fresh_prepare(
        presets_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "prepared"
    run = prepare(fake_simulate(scn.load_preset(NAME)))
    fresh, whole = run.loaded.text, run.loaded_whole  # the first screen; the disk's text holds the details too
    assert whole == fresh[:-1] + ',"details":' + run.details.text + "}"
    first, app1 = _first_screen(folder)
    assert first == fresh and app1.state.prepared.hits == 0  # simulated: nothing on disk yet
    assert gzip.decompress(_wait_files(folder, 1)[0].read_bytes()).decode() == whole
    again, app2 = _first_screen(folder)
    assert again == whole
    assert app2.state.prepared.hits == 1  # from disk ...
    assert app2.state.runs.simulations == 1  # ... and the run simulated beside it, for playback
    assert app2.state.prepared.written == 0  # a whole file is not written again
    plain, app3 = _first_screen(folder, encoding="identity")  # a client that takes no gzip gets the text
    assert plain == whole and app3.state.prepared.hits == 1


def test_the_key_is_the_scenarios_content_seed_simulator_and_code(presets_dir: Path, tmp_path: Path) -> None:
    spec = scn.load_preset(NAME)
    base = PreparedCache(tmp_path, "engine", code="a")
    assert base.put(spec, "A")
    assert base.get(spec) == "A"
    assert PreparedCache(tmp_path, "engine", code="b").get(spec) is None  # the code changed: never stale
    assert PreparedCache(tmp_path, "fake", code="a").get(spec) is None  # another simulator
    assert base.get(spec.model_copy(update={"seed": spec.seed + 1})) is None
    assert base.get(spec.model_copy(update={"decode_steps": spec.decode_steps + 1})) is None
    assert len(code_digest()) == 64 and code_digest() == code_digest()


def test_the_code_digest_follows_every_file_of_the_package(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "data" / "table.json").write_text("[1]")
    before = code_digest.__wrapped__(tmp_path)
    (tmp_path / "data" / "table.json").write_text("[2]")  # a measured table changed
    assert code_digest.__wrapped__(tmp_path) != before


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_partial_or_corrupt_file_is_ignored_and_written_again(
        presets_dir: Path, tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "prepared"
    fresh, _ = _first_screen(folder)
    path = _wait_files(folder, 1)[0]
    whole = path.read_bytes()
    path.write_bytes({"truncated": whole[: len(whole) // 2], "garbage": b"not gzip", "empty": b""}[damage])
    text, app = _first_screen(folder)  # the damaged file is not served: the run is simulated again ...
    assert text == fresh and app.state.runs.simulations == 1 and app.state.prepared.hits == 0
    assert _wait_files(folder, 1)[0].read_bytes() == whole  # ... and written whole again


def test_the_folder_is_bounded_the_files_used_longest_ago_go_first(presets_dir: Path, tmp_path: Path) -> None:
    spec = scn.load_preset(NAME)
    specs = [spec.model_copy(update={"seed": s}) for s in range(4)]
    cache = PreparedCache(tmp_path, "engine", max_bytes=10**9, code="a")
    for i, s in enumerate(specs):
        assert cache.put(s, os.urandom(2000).hex())  # ~4 kB gzipped each: random text does not compress
        os.utime(cache.path(s), (1000 + i, 1000 + i))
    os.utime(cache.path(specs[0]), (2000, 2000))  # the oldest written, used most recently
    size = cache.path(specs[0]).stat().st_size
    cache.max_bytes = 2 * size + size // 2
    assert cache.evict() == 2
    assert [cache.path(s).exists() for s in specs] == [True, False, False, True]


def test_prewarm_fills_the_disk_cache_with_every_preset(
        presets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prewarm, "START_DELAY_S", 0.0)
    folder = tmp_path / "prepared"
    app = build_app(_settings(folder, default_scenario="long-decode"), fake_simulate, prewarm=True)
    with TestClient(app):
        assert len(_wait_files(folder, len(PRESETS))) == len(PRESETS)


def test_without_a_folder_nothing_is_kept(presets_dir: Path, settings: Settings) -> None:
    app = build_app(settings, fake_simulate)
    assert app.state.prepared is None
    with TestClient(app) as client:
        assert client.get(f"/api/loaded/{NAME}").status_code == 200


def test_serve_keeps_them_in_the_checkout_unless_told(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import uvicorn

    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app))
    monkeypatch.delenv("LAYERSCOPE_PREPARED_CACHE_DIR", raising=False)
    assert cli.main(["serve", "--port", "0"]) == 0
    folder = seen["app"].state.prepared.folder  # type: ignore[attr-defined]
    assert folder == default_dir() and folder.parts[-2:] == (".cache", "prepared")
    assert cli.main(["serve", "--port", "0", "--cache-dir", str(tmp_path)]) == 0
    assert seen["app"].state.prepared.folder == tmp_path  # type: ignore[attr-defined]
    assert cli.main(["serve", "--port", "0", "--cache-dir", ""]) == 0
    assert seen["app"].state.prepared is None  # type: ignore[attr-defined]


def test_the_real_engine_from_disk_is_byte_for_byte_a_fresh_prepare(tmp_path: Path) -> None:
    """The shipped preset over the real engine: the first server simulates and writes it, a second (cold) one
    serves the file, and both are the texts of a prepare in this process."""
    from layerscope.runtime.engine import simulate

    name = "prefill-8k-chunked"
    run = prepare(simulate(scn.load_preset(name)))
    texts = []
    for _ in range(2):
        app = build_app(Settings(prepared_cache_dir=str(tmp_path)))
        with TestClient(app) as client:
            texts.append(client.get(f"/api/loaded/{name}").text)
            _wait_files(tmp_path, 1)
    # the first answers with its first screen at once, the second from disk with the details inside
    assert texts == [run.loaded.text, run.loaded_whole] and app.state.prepared.hits == 1


def test_a_cold_servers_websocket_load_sends_the_preset_from_disk_before_its_run_is_ready(
        presets_dir: Path, tmp_path: Path) -> None:
    """A preset switch (a websocket `load` asking for `loaded`) on a cold server: the stored text goes out first,
    byte for byte a fresh prepare's, then the run's state once it is simulated; `loaded` is not sent twice."""
    folder = tmp_path / "prepared"
    fresh = prepare(fake_simulate(scn.load_preset(NAME))).loaded_whole  # with its details
    _first_screen(folder)  # a first visit writes the file
    app = build_app(_settings(folder), fake_simulate)
    with TestClient(app) as client, client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "load", "scenario": NAME})
        first = ws.receive_text()
        assert first == fresh
        assert [ws.receive_json()["type"] for _ in range(2)] == ["details", "state"]
        ws.send_json({"type": "play"})  # the run streams: the disk's `loaded` and the run are one
        kinds = {ws.receive_json()["type"] for _ in range(3)}
        assert "loaded" not in kinds and kinds & {"frame", "state"}
    assert app.state.prepared.hits == 1 and app.state.runs.simulations == 1
