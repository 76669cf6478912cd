"""Server settings: one pydantic model, filled from the command line (or LAYERSCOPE_* variables)."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


def _env_list(name: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, "").split(",") if v.strip()]


class Settings(BaseModel):
    host: str = Field("127.0.0.1", description="interface to bind; loopback unless told otherwise")
    port: int = Field(8000, ge=0, le=65535)
    default_scenario: str | None = Field(None, description="preset the page loads first (None: the first preset)")
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="extra websocket Origins allowed besides the page's own host (e.g. 'https://lab.example')",
    )
    allowed_hosts: list[str] = Field(
        default_factory=lambda: _env_list("LAYERSCOPE_ALLOWED_HOSTS"),
        description="Host header values accepted besides the bound host, 127.0.0.1, localhost and ::1 (a name the "
        "server is reached by, e.g. 'lab.example'; '*' accepts any): others are refused (DNS rebinding)",
    )
    play_seconds: float = Field(20.0, gt=0.0, le=3600.0, description="wall seconds a whole run takes at speed 1")
    tick_s: float = Field(0.03, ge=0.001, le=1.0, description="at most one frame per tick per client")
    max_frame_events: int = Field(4000, ge=1, description="events in one playback frame (the rest go in the next)")
    queue_frames: int = Field(32, ge=1, description="frames pending per client before they coalesce")
    queue_control: int = Field(64, ge=1, description="control messages pending per client before it is dropped")
    cache_runs: int = Field(8, ge=1, description="simulated runs kept (LRU), keyed by the spec")
    prepared_cache_dir: str | None = Field(
        None,
        description="folder keeping each preset's prepared `loaded` message, gzipped, across restarts (server/"
        "diskcache.py); None or '' keeps none (`layerscope serve` defaults to the checkout's .cache/prepared/)",
    )
    prepared_cache_bytes: int = Field(256 * 2**20, ge=1, description="that folder's size; the files used longest "
                                      "ago are removed past it")
    cache_events: int = Field(500_000, ge=1, description="events kept over all cached runs (LRU eviction)")
    max_concurrent_sims: int = Field(2, ge=1, description="simulations running at once (CPU-bound, in threads)")
    seek_snapshots: int = Field(1000, ge=2, description="mergeable snapshots per kind kept in a seek frame")
    ws_compression: bool = Field(
        False,
        description="permessage-deflate on websockets: frames ~10x smaller on the wire, but deflated once per viewer "
        "(~50% more server CPU with 50 viewers, bench/README.md); worth it only behind a slow link",
    )
    max_sessions: int = Field(
        256, ge=1, le=100_000, description="websocket viewers at once; one more is told the server is full and closed"
    )
    max_sim_work: int = Field(
        10_000,
        ge=1,
        description="weighted engine steps one requested run may simulate, its compare run included "
        "(runtime.budget.estimate_work); refused before it runs (~0.15 ms of CPU and ~7-20 events per unit)",
    )
    max_run_events: int = Field(
        150_000, ge=1, description="events one run may make: a run passing it is stopped (~3 KB of memory each)"
    )
    max_run_cpu_s: float = Field(60.0, gt=0.0, description="CPU seconds one run may take: a run passing it is stopped")
    max_memory_events: int = Field(
        450_000,
        ge=1,
        description="events of all runs alive at once (cached, shown by viewers, simulating at max_run_events "
        "each): a custom run that cannot fit is refused 'busy, retry' (~1.3 GB at ~3 KB an event)",
    )
    max_queue: int = Field(8, ge=0, description="simulations waiting for a slot; one more is refused 'busy, retry'")
    max_loaded_bytes: int = Field(
        32 * 2**20, ge=1, description="the `loaded` message of one run (its first screen): a larger run is refused"
    )
    commands_per_s: float = Field(
        50.0, gt=0.0, description="play/pause/step/speed commands per second per viewer, in bursts of as many; "
        "past it a command waits its turn (the viewer's connection reads nothing meanwhile)"
    )
    seek_interval_s: float = Field(
        0.1, ge=0.0, le=10.0, description="seeks applied at most this often per viewer; those between coalesce"
    )
    max_concurrent_exports: int = Field(1, ge=1, description="exports (report, trace, events) built at once")
    max_export_queue: int = Field(4, ge=0, description="exports waiting; one more is refused 503 'busy, retry'")
    export_cache_bytes: int = Field(64 * 2**20, ge=0, description="exports kept (LRU), so repeated ones cost nothing")
    max_connections: int = Field(
        512, ge=1, description="HTTP and websocket connections at once (uvicorn --limit-concurrency); then 503"
    )
    max_header_bytes: int = Field(
        32 * 1024, ge=1024, description="request line and headers of one HTTP request; larger is refused 400"
    )
    header_timeout_s: float = Field(
        10.0, gt=0.0, description="seconds a connection may take to send its request's headers; then closed"
    )
    graceful_shutdown_s: int = Field(
        3, ge=0, description="on SIGTERM, seconds open connections get before they are closed and work is cancelled"
    )

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Every field from a LAYERSCOPE_<FIELD> variable (LAYERSCOPE_MAX_RUN_EVENTS=100000; lists comma-separated:
        LAYERSCOPE_ALLOWED_ORIGINS, LAYERSCOPE_ALLOWED_HOSTS), then explicit overrides (a list from the command line
        replaces the environment's)."""
        data: dict[str, object] = {}
        for name, info in cls.model_fields.items():
            raw = os.environ.get(f"LAYERSCOPE_{name.upper()}")
            if raw is not None and raw.strip():
                data[name] = _env_list(f"LAYERSCOPE_{name.upper()}") if info.annotation == list[str] else raw.strip()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)
