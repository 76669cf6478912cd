"""server/overview.py: the main run's label names the settings its compare run changes, dotted ones included."""

from __future__ import annotations

from layerscope.scenario import ScenarioSpec
from layerscope.server.overview import main_label


def test_the_label_reads_dotted_compare_fields() -> None:
    spec = ScenarioSpec.model_validate({
        "name": "budget", "workload": {"num_requests": 2, "input_len": 64, "output_len": 4},
        "scheduler": {"max_num_batched_tokens": 8192},
        "compare": {"label": "small budget", "set": {"scheduler.max_num_batched_tokens": 1024, "chunk_size": 2048}},
    })
    assert main_label(spec) == "scheduler.max_num_batched_tokens=8192, chunk_size=4096"
    assert main_label(spec.model_copy(update={"compare": None})) == "budget"
