"""server/load.py: one set of rules from a run request to a spec (no engine needed)."""

from __future__ import annotations

import pytest

from layerscope import scenario as scn
from layerscope.events import ChunkEvent, SummaryEvent
from layerscope.export.events import header
from layerscope.protocol import RunRequest
from layerscope.runtime.budget import estimate_work
from layerscope.server.load import CommandError, check_work, replay_spec, requested_spec

PRESET = scn.load_preset("prefill-8k-chunked")


def _chunk(size: int, reason: str = "default") -> ChunkEvent:
    return ChunkEvent(t_us=0.0, chunk=0, token_start=0, token_end=size, chunk_size=size, reason=reason, pages=[0],
                      barrier_us=1.0)


def _refused(req: RunRequest, events: list | None = None, own: scn.ScenarioSpec | None = None) -> CommandError:
    with pytest.raises(CommandError) as e:
        replay_spec(req, header(own) if own is not None else None, events or [])
    return e.value


def test_requested_spec_is_the_preset_with_its_overrides() -> None:
    spec = requested_spec(RunRequest(scenario="prefill-8k-chunked", set={"chunk_size": 2048}))
    assert spec.chunk_size == 2048 and spec.name == "prefill-8k-chunked"
    with pytest.raises(CommandError) as e:
        requested_spec(RunRequest(scenario="prefill-8k-chunked", spec={"name": "x"}))
    assert e.value.field == "scenario" and "exactly one of" in str(e.value)
    with pytest.raises(CommandError) as e:
        requested_spec(RunRequest(scenario="prefill-8k-chunked", set={"banks": 0}))
    assert e.value.field == "set.banks"


def test_work_limit_names_the_field_that_asks_too_much() -> None:
    req = RunRequest(scenario="prefill-8k-chunked", set={"decode_steps": 900})
    with pytest.raises(CommandError) as e:
        check_work(estimate_work, requested_spec(req), req, limit=500)
    assert e.value.field == "set.decode_steps" and "at most 500" in str(e.value)
    check_work(estimate_work, PRESET, RunRequest(scenario="prefill-8k-chunked"), limit=500)  # 2 chunks + 8 steps: fine


def test_a_recording_with_its_spec_line_adopts_it_or_must_match() -> None:
    own = PRESET.with_overrides({"chunk_size": 2048})
    assert replay_spec(RunRequest(), header(own), []) == own  # nothing asked: its own spec
    asked = RunRequest(scenario="prefill-8k-chunked", set={"chunk_size": 2048})
    assert replay_spec(asked, header(own), []).chunk_size == 2048  # asked for that very run
    err = _refused(RunRequest(scenario="prefill-8k-chunked"), own=own)
    assert err.field == "scenario"
    assert "a run of 'prefill-8k-chunked' (chunk_size=2048), not of 'prefill-8k-chunked' (chunk_size=4096)" in str(err)
    assert _refused(RunRequest(set={"gpu": "h200"}), own=own).field == "set"


def test_a_recording_without_it_is_checked_against_what_it_says() -> None:
    summary = SummaryEvent(t_us=9.0, figures={"prompt_len": 8192, "gpu": "h100-sxm", "page_size": 256})
    req = RunRequest(scenario="prefill-8k-chunked")
    assert replay_spec(req, None, [_chunk(4096), _chunk(2048, "low_memory"), summary]) == PRESET
    err = _refused(req, [_chunk(2048), summary])
    assert "not a run of 'prefill-8k-chunked': recorded chunk_size=2048, the scenario has chunk_size=4096" in str(err)
    err = _refused(RunRequest(spec={"name": "mine", "model": "article", "runtime": "article", "gpu": "h200"}),
                   [summary])
    assert err.field == "spec" and "not a run of 'mine': recorded gpu=h100-sxm, the scenario has gpu=h200" in str(err)
    with pytest.raises(CommandError) as e:  # no spec line, no spec: which run it is cannot be known
        replay_spec(RunRequest(), None, [summary])
    assert e.value.field == "scenario"
