"""The dashboard's palette (frontend/static/js/palette.js), so the offline report uses the same colour per entity.

palette.js is an ES module whose body after `export default` is plain JSON; reading it here keeps one source.
"""

from __future__ import annotations

import colorsys
import json
from functools import cache
from typing import Any

from layerscope.paths import frontend_dir


@cache
def palette(theme: str = "light") -> dict[str, dict[str, str]]:
    """The colours of one theme ("dark" or "light"): theme, stage_kind, phase, bound, run, series, cell."""
    text = (frontend_dir() / "static" / "js" / "palette.js").read_text()
    body = text[text.index("{", text.index("export default")) : text.rindex("}") + 1]
    themes: dict[str, Any] = json.loads(body)
    if theme not in themes:
        raise ValueError(f"unknown theme {theme!r}: one of {', '.join(themes)}")
    return themes[theme]


def request_colour(request_id: int, theme: str = "light") -> str:
    """A request's colour as the dashboard paints it (colors.js requestColor): a golden-angle hue inside the
    palette's request range (which skips the error reds), as "#rrggbb"."""
    p: Any = palette(theme)["request"]
    hue = p["hue_start"] + (request_id * 137.508) % p["hue_span"]
    r, g, b = colorsys.hls_to_rgb(hue / 360.0, p["lightness"], p["saturation"])
    return "#" + "".join(f"{round(v * 255):02x}" for v in (r, g, b))
