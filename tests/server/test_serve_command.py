"""`layerscope serve`: arguments and settings (the server itself is tested through commands.serve.build_app)."""

from __future__ import annotations

import pytest

from layerscope import cli
from layerscope.server.settings import Settings


def test_unknown_scenario_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--scenario", "no-such-preset", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no-such-preset" in err


def test_defaults_bind_loopback() -> None:
    args = cli.build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.scenario) == ("127.0.0.1", 8000, None)


def test_settings_from_env_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERSCOPE_ALLOWED_ORIGINS", "https://a.example, https://b.example")
    s = Settings.from_env(port=9000, allowed_origins=None)
    assert s.allowed_origins == ["https://a.example", "https://b.example"] and s.port == 9000
    assert Settings.from_env(allowed_origins=["https://c.example"]).allowed_origins == ["https://c.example"]


@pytest.mark.parametrize(
    ("flag", "deflate"), [([], False), (["--ws-compression"], True), (["--no-ws-compression"], False)]
)
def test_ws_compression_reaches_uvicorn(monkeypatch: pytest.MonkeyPatch, flag: list[str], deflate: bool) -> None:
    import uvicorn

    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    assert cli.main(["serve", "--port", "0", *flag]) == 0
    assert seen["ws_per_message_deflate"] is deflate
    assert (seen["ws"] != "auto") is deflate  # with compression: the protocol with a 32 KB deflate window


def test_tuned_deflate_protocol_is_uvicorns_with_other_settings() -> None:
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    from layerscope.server.wsdeflate import deflate_protocol

    proto = deflate_protocol()
    assert isinstance(proto, type) and issubclass(proto, WebSocketsSansIOProtocol)


def test_serve_reexecutes_itself_on_the_system_malloc_only_as_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from layerscope.commands.serve import use_system_malloc

    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/layerscope", "serve", "--port", "0"])
    argv = ["/venv/bin/python", "-X", "dev", "/venv/bin/layerscope", "serve", "--port", "0"]
    assert use_system_malloc(argv) == [sys.executable, *argv[1:]]  # the same command, interpreter options kept
    monkeypatch.setenv("PYTHONMALLOC", "pymalloc")  # chosen by the user, or already re-executed
    assert use_system_malloc(argv) is None
    monkeypatch.delenv("PYTHONMALLOC")
    monkeypatch.setattr(sys, "argv", ["pytest", "tests/server"])  # cli.main(["serve", ...]) inside a program
    assert use_system_malloc(argv) is None
