"""The report and the dashboard share one palette (frontend/static/js/palette.js)."""

from __future__ import annotations

import colorsys

import pytest

from layerscope.export import report
from layerscope.export.palette import palette, request_colour


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


def test_request_colours_never_take_the_error_reds() -> None:
    for theme in ("dark", "light"):
        p = palette(theme)
        for rid in range(512):
            colour = request_colour(rid, theme)
            r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
            hue = colorsys.rgb_to_hls(r, g, b)[0] * 360
            assert 35 <= hue <= 315, (theme, rid, colour, hue)  # the reds (errors, evictions, SLA) stay theirs
        for name in ("evicted", "crc_bad"):
            r, g, b = (int(p["cell"][name][i : i + 2], 16) / 255 for i in (1, 3, 5))
            err = colorsys.rgb_to_hls(r, g, b)[0] * 360
            assert err > 315 or err < 35, (name, err)
