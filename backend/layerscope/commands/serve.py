"""Serve the live dashboard: the server, handed the engine (the server imports none)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time

import uvicorn
from fastapi import FastAPI

from layerscope import scenario as scn
from layerscope.protocol import MAX_REPLAY_BYTES
from layerscope.runtime.budget import estimate_work
from layerscope.runtime.engine import simulate as engine_simulate
from layerscope.runtime.sharded import run_topology
from layerscope.server.app import create_app
from layerscope.server.diskcache import default_dir
from layerscope.server.runs import Simulate, Simulator
from layerscope.server.security import header_deadline_protocol
from layerscope.server.settings import Settings
from layerscope.server.wsdeflate import deflate_protocol

HELP = "serve the live dashboard (FastAPI + websocket) on http://HOST:PORT"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--scenario", default=None, help="preset the page opens with (default: the first preset)")
    p.add_argument("--max-viewers", type=int, default=None, help="websocket viewers at once (default 256)")
    p.add_argument(
        "--ws-compression",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="permessage-deflate on websockets (default off: on a LAN it costs the server more CPU than it saves; "
        "turn it on when viewers sit behind a slow link)",
    )
    p.add_argument(
        "--prewarm",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pay the engine's one-off costs before answering, then simulate every preset in the background, so a "
        "first visit finds its run ready (`make run` does; default off: a server started for tests or scripts "
        "simulates only what it is asked)",
    )
    p.add_argument(
        "--cache-dir", default=None, metavar="DIR",
        help="keep each preset's prepared first screen here, gzipped, across restarts, so a cold server shows it "
        "without simulating first (default: .cache/prepared/ in the checkout; '' keeps none)",
    )
    p.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"],
        help="LayerScope's own log (refused origins, bad commands, dropped clients); default info",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="also answer requests whose Host is NAME (repeatable; default: the bound host, 127.0.0.1, localhost, "
        "::1; others are refused, against DNS rebinding)",
    )
    p.add_argument("--max-connections", type=int, default=None,
                   help="HTTP and websocket connections at once, then 503 (uvicorn --limit-concurrency; default 512)")
    p.add_argument("--header-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds a connection may take to send a request's headers (default 10)")
    p.add_argument("--timeout-graceful-shutdown", type=int, default=None, metavar="SECONDS",
                   help="on SIGTERM, seconds open connections get before work is cancelled (default 3)")
    p.add_argument(
        "--allow-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="also accept websocket connections from this Origin (repeatable; default: same host only)",
    )


# The server allocates Python objects with the C library's malloc, not pymalloc: pymalloc hands a 1 MiB arena back
# to the OS only once every object in it is free, so the few long-lived objects made while a viewer's run was alive
# (a preset cached meanwhile, memo entries) kept most of the freed runs resident (345-372 MiB after 8 heavy
# clients left, never under; ~240 MiB with malloc, whose free pages malloc_trim returns: bench/README.md, Hardening).
SERVER_PYTHONMALLOC = "malloc"
# ...and with one malloc arena: glibc gives each thread that allocates (the simulation and export workers) an arena of
# its own, and the few objects left in each pin their pages; measured over 8 serving runs a viewer left, RSS settled
# 22-38 MiB above the first run's with the default arenas, 0-4 MiB with one (bench/README.md, Hardening).
SERVER_MALLOC_ARENA_MAX = "1"


def use_system_malloc(argv: list[str]) -> list[str] | None:
    """The command line to re-execute this `layerscope serve` process with under SERVER_PYTHONMALLOC (the allocator
    is chosen at interpreter start, so only a new one can change it); None to go on as is: PYTHONMALLOC already set
    (by the user, or by the re-execution), or `serve` called from inside another program (tests)."""
    if "PYTHONMALLOC" in os.environ or sys.argv[1:2] != ["serve"] or not sys.platform.startswith("linux"):
        return None
    return [sys.executable, *argv[1:]]


def simulator(simulate: Simulate | None = None) -> Simulator:
    """The engine as the server is handed it: its simulate, work estimate and topology. `simulate` replaces the
    engine's own run (tests hand the server a fake; the estimate and the topology stay the engine's)."""
    if simulate is None:
        return Simulator(engine_simulate, estimate_work, run_topology, is_engine=True)
    return Simulator(simulate, estimate_work, run_topology)


def build_app(settings: Settings | None = None, simulate: Simulate | None = None, prewarm: bool = False) -> FastAPI:
    """The dashboard's app, handed the engine (`simulate`: a fake in its place, for tests)."""
    return create_app(simulator(simulate), settings, prewarm)


def run(args: argparse.Namespace) -> int:
    if (again := use_system_malloc(sys.orig_argv)) is not None:
        env = {"MALLOC_ARENA_MAX": SERVER_MALLOC_ARENA_MAX, **os.environ, "PYTHONMALLOC": SERVER_PYTHONMALLOC}
        os.execve(again[0], again, env)
    if args.scenario is not None:
        scn.load_preset(args.scenario)  # fail now, in one line, rather than in the browser
    settings = Settings.from_env(
        host=args.host,
        port=args.port,
        default_scenario=args.scenario,
        allowed_origins=args.allow_origin,
        max_sessions=args.max_viewers,
        ws_compression=args.ws_compression,
        allowed_hosts=args.allowed_host,
        max_connections=args.max_connections,
        header_timeout_s=args.header_timeout,
        graceful_shutdown_s=args.timeout_graceful_shutdown,
        prepared_cache_dir=args.cache_dir,
    )
    if settings.prepared_cache_dir is None:  # neither the flag nor LAYERSCOPE_PREPARED_CACHE_DIR: the checkout's
        settings = settings.model_copy(update={"prepared_cache_dir": str(default_dir() or "")})
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("layerscope").setLevel(args.log_level.upper())
    print(f"LayerScope dashboard on http://{settings.host}:{settings.port}  (Ctrl-C to stop)", flush=True)
    # Frames above MAX_REPLAY_BYTES (a recorded run to replay) are closed by uvicorn with 1009 before parsing.
    # h11 (not httptools) bounds a request's head (h11_max_incomplete_event_size); the protocol adds its deadline.
    app = build_app(settings, prewarm=args.prewarm)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        http=header_deadline_protocol(settings.header_timeout_s),
        h11_max_incomplete_event_size=settings.max_header_bytes,
        limit_concurrency=settings.max_connections,
        timeout_graceful_shutdown=settings.graceful_shutdown_s,
        ws_max_size=MAX_REPLAY_BYTES + 64 * 1024,
        ws_per_message_deflate=settings.ws_compression,
        ws=deflate_protocol() if settings.ws_compression else "auto",
        log_level="warning",
    )
    app.state.runs.close()  # (the lifespan did it already, unless startup failed)
    _exit_if_work_lingers(EXIT_GRACE_S)
    return 0


EXIT_GRACE_S = 2.0  # simulations stop within one check interval (runtime/budget.py CHECK_EVERY steps): well under this


def _exit_if_work_lingers(grace_s: float) -> None:
    """Worker threads still running after the server stopped (a simulation between checks, an export) would keep
    the interpreter alive at exit: wait `grace_s` for them, then leave without joining them."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]:
            return
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
