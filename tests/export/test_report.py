"""The offline report: the bank-map replay, and one self-contained HTML file per run."""

from __future__ import annotations

import html
import re
from functools import lru_cache
from pathlib import Path

import pytest

from layerscope.cli import main
from layerscope.events import PageAllocEvent, PageEvictEvent, PageFreeEvent, PageMigrateEvent
from layerscope.export.report import PAGE_STATES, bank_grid
from layerscope.scenario import preset_names

FREE, PREFILL, DECODE, HINT, TENANT, EVICTED = range(len(PAGE_STATES))


def test_bank_grid_replays_page_events_up_to_a_moment() -> None:
    events = [
        PageAllocEvent(t_us=0.0, owner="tenant", phase="idle", logical=[0], banks=[1], slots=[3]),
        PageAllocEvent(t_us=1.0, owner="seq0", phase="prefill", logical=[0, 1, 2], banks=[0, 1, 2], slots=[0, 0, 0]),
        PageAllocEvent(t_us=1.0, owner="hint", phase="prefill", logical=[0], banks=[2], slots=[1]),
        PageMigrateEvent(t_us=2.0, owner="seq0", logical=1, from_bank=1, from_slot=0, to_bank=0, to_slot=1,
                         bytes=1.0, dur_us=1.0),
        PageAllocEvent(t_us=3.0, owner="seq0", phase="decode", logical=[3], banks=[1], slots=[0]),
        PageEvictEvent(t_us=4.0, owner="seq0", logical=[0], banks=[0], slots=[0], bytes=1.0),
        PageFreeEvent(t_us=5.0, owner="tenant", banks=[1], slots=[3]),
    ]  # fmt: skip
    assert bank_grid(events, 1.5, banks=3, capacity=4) == [
        [PREFILL, FREE, FREE, FREE],
        [PREFILL, FREE, FREE, TENANT],
        [PREFILL, HINT, FREE, FREE],
    ]
    assert bank_grid(events, 10.0, banks=3, capacity=4) == [
        [EVICTED, PREFILL, FREE, FREE],  # the migrated page keeps its state in its new slot
        [DECODE, FREE, FREE, FREE],
        [PREFILL, HINT, FREE, FREE],
    ]


_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S | re.I)
_EXTERNAL = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


@lru_cache(maxsize=1)
def _report() -> tuple[str, object]:
    from layerscope.export.report import build_report
    from layerscope.runtime.engine import simulate
    from layerscope.scenario import load_preset

    result = simulate(load_preset("article-vs-real"))  # a pair: both runs in the figures
    return build_report(result), result


def test_report_is_self_contained() -> None:
    doc, _ = _report()
    assert doc.startswith("<!DOCTYPE html>")
    markup = _SCRIPT.sub("", doc)  # plotly.min.js holds URL strings in its code; attributes are what load
    assert not _EXTERNAL.search(markup)
    assert not re.search(r"<script[^>]*\bsrc=", doc, re.I) and not re.search(r"<link[^>]*\bhref=", doc, re.I)
    assert "* plotly.js v" in doc  # the library itself is inlined


def test_report_contains_figures_claims_and_tour() -> None:
    from layerscope.claims import build_claims
    from layerscope.tour import tour_results

    doc, result = _report()
    for fid in ("timeline", "memory", "latency", "stages", "banks"):
        assert f'id="fig-{fid}"' in doc
    assert doc.count("Plotly.newPlot") >= 5
    assert "after prefill" in doc and "mid-decode" in doc and "end of run" in doc  # the bank map at key moments
    assert '<table class="claims">' in doc
    for row in build_claims(result):
        assert row["claim"].replace("'", "&#x27;") in doc
    for step, row in zip(result.spec.tour, tour_results(result), strict=True):
        assert step.title in doc
        assert ("passed" if row["passed"] else "FAILED") in doc
    assert result.spec.compare.label in doc  # the compare run is named


def test_report_command_writes_one_file(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "prefill-8k-chunked", "-o", str(out)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]
    assert "Two attention launches" in out.read_text()
    assert main(["report", "prefill-8k-chunked", "-o", str(tmp_path / "nope" / "r.html")]) == 2


def test_pressure_pages_show_as_another_tenant() -> None:
    events = [PageAllocEvent(t_us=0.0, owner="pressure", phase="decode", logical=[0, 1], banks=[0, 1], slots=[1, 0])]
    assert bank_grid(events, 1.0, banks=2, capacity=2) == [[FREE, TENANT], [TENANT, FREE]]


@pytest.mark.parametrize("name", preset_names())
def test_every_presets_report_builds_with_its_figures_and_no_empty_one(name: str, preset_run) -> None:  # noqa: ANN001
    from layerscope.export.report import build_report, figures

    result = preset_run(name)
    figs = figures(result)
    assert all(fig.data for _, _, fig in figs)  # an empty figure is left out, not drawn blank
    ids = {fid for fid, _, _ in figs}
    serving = result.spec.workload is not None
    assert ({"requests", "step-mix", "latency-dist"} <= ids) == serving
    assert ("latency" in ids) == any(e.kind == "decode_step" for e in result.events)
    doc = build_report(result)
    assert doc.startswith("<!DOCTYPE html>") and html.escape(result.spec.title) in doc
    assert ("<h2>Deployment</h2>" in doc) == (result.spec.deployment is not None)
    if serving and result.spec.deployment is not None:
        assert "GPU KV cache size:" in doc  # vLLM's startup log lines for the run's placement
    assert ("SLO figures" in doc) == serving  # TTFT, TPOT and ITL p50 / p99 against sla_ms


def test_a_serving_reports_latency_samples_are_the_summarys(preset_run) -> None:  # noqa: ANN001
    from layerscope.export.report import latency_samples

    result = preset_run("serving-long-prompt-itl")
    for run in (result, result.compare):
        s = latency_samples(run.events)
        assert len(s["TTFT"]) == run.summary["completed"] == 40
        assert sum(s["TTFT"]) / len(s["TTFT"]) == pytest.approx(run.summary["mean_ttft_ms"], rel=1e-3)
        assert sum(s["TPOT"]) / len(s["TPOT"]) == pytest.approx(run.summary["mean_tpot_ms"], rel=1e-3)
        assert sum(s["ITL"]) / len(s["ITL"]) == pytest.approx(run.summary["mean_itl_ms"], rel=1e-3)


def test_report_of_a_pair_with_a_dotted_compare_field(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "serving-long-prompt-itl", "-o", str(out)]) == 0
    doc = out.read_text()
    assert "run A: scheduler.max_num_batched_tokens=8192" in doc and "max_num_batched_tokens 1024" in doc
