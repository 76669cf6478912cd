"""Any text a client sends is either a valid command or one CommandError naming the problem."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from layerscope.protocol import MAX_MESSAGE_BYTES
from layerscope.server.session import CommandError, parse_command

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3))
commands = st.fixed_dictionaries(
    {"type": st.sampled_from(["load", "play", "pause", "step", "seek", "speed", "bogus"])},
    optional={"speed": values, "t_us": values, "scenario": values, "spec": values, "set": values, "x": values},
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | commands.map(json.dumps))
def test_parse_command_never_raises_anything_else(text: str) -> None:
    try:
        cmd = parse_command(text)
    except CommandError as e:
        assert str(e) and len(str(e)) < 2000
    else:
        assert cmd.type in {"load", "play", "pause", "step", "seek", "speed"}


def test_size_limit_counts_bytes_not_characters() -> None:
    text = json.dumps({"type": "pause", "pad": "é" * (MAX_MESSAGE_BYTES // 2)}, ensure_ascii=False)
    assert len(text) < MAX_MESSAGE_BYTES < len(text.encode())
    try:
        parse_command(text)
    except CommandError as e:
        assert "limit" in str(e)
    else:
        raise AssertionError("oversized message accepted")
