"""Server settings: one pydantic model, filled from the command line (or LAYERSCOPE_* variables)."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field


class Settings(BaseModel):
    host: str = Field("127.0.0.1", description="interface to bind; loopback unless told otherwise")
    port: int = Field(8000, ge=0, le=65535)
    default_scenario: str | None = Field(None, description="preset the page loads first (None: the first preset)")
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="extra websocket Origins allowed besides the page's own host (e.g. 'https://lab.example')",
    )
    play_seconds: float = Field(20.0, gt=0.0, le=3600.0, description="wall seconds a whole run takes at speed 1")
    tick_s: float = Field(0.03, ge=0.001, le=1.0, description="at most one frame per tick per client")
    max_frame_events: int = Field(4000, ge=1, description="events in one playback frame (the rest go in the next)")
    queue_frames: int = Field(32, ge=1, description="frames pending per client before they coalesce")
    queue_control: int = Field(64, ge=1, description="control messages pending per client before it is dropped")
    cache_runs: int = Field(8, ge=1, description="simulated runs kept (LRU), keyed by the spec")
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
        description="prefill chunks + decode steps one requested run may simulate (x2 with compare); "
        "bounds the CPU time and memory one client can ask for (~2 ms and ~20 events per unit)",
    )

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """LAYERSCOPE_ALLOWED_ORIGINS (comma-separated) from the environment, then explicit overrides."""
        data: dict[str, object] = {}
        if origins := os.environ.get("LAYERSCOPE_ALLOWED_ORIGINS"):
            data["allowed_origins"] = [o.strip() for o in origins.split(",") if o.strip()]
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)
