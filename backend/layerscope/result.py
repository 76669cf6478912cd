"""What a simulation hands its readers (server, tour, claims, export, commands): one type, `SimResult`.

The run's clock is stated, never inferred: "layer" when the events are one decoder layer's simulated time (a
one-request run: its chunks and decode steps are laid out as one layer runs them, whole-model figures are in the
summary), "model" when they are the whole model's, as a client sees it (a serving run: step i starts at start_us
and lasts model_dur_us). The topology is the one the engine ran (its plan's, with a deployment's collectives).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from layerscope.events import Topology
from layerscope.scenario import ScenarioSpec

Clock = Literal["layer", "model"]


def run_clock(spec: ScenarioSpec) -> Clock:
    """The clock a run of `spec` keeps: a workload is served on the whole model's clock, one request on a layer's."""
    return "model" if spec.workload is not None else "layer"


@dataclass
class SimResult:
    spec: ScenarioSpec
    events: list[Any]  # typed events (layerscope.events), time-ordered; the summary event last
    topology: Topology
    summary: dict[str, float | int | bool | str]
    clock: Clock
    compare: SimResult | None = None  # the comparison preset's second run, on its own clock from 0
