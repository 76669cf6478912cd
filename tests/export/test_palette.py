"""The report and the dashboard share one palette (frontend/static/js/palette.js)."""

from __future__ import annotations

import pytest

from layerscope.export import report
from layerscope.export.palette import palette


def test_both_themes_have_every_entity() -> None:
    dark, light = palette("dark"), palette("light")
    for key in ("theme", "stage_kind", "phase", "run", "series", "cell"):
        assert dark[key].keys() == light[key].keys(), key
    assert light["theme"]["panel"] == "#ffffff"


def test_unknown_theme_is_named() -> None:
    with pytest.raises(ValueError, match="unknown theme 'neon'"):
        palette("neon")


def test_report_uses_the_dashboards_colours() -> None:
    light = palette("light")
    assert report.PAGE_COLOURS[1] == light["phase"]["prefill"] and report.PAGE_COLOURS[5] == light["cell"]["evicted"]
    assert report._stage_colour("attention") == light["stage_kind"]["attention"]
    assert report._run_colour(1) == light["run"]["compare"]
