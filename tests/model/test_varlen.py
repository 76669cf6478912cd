"""The varlen forward: one pass over an engine step's flattened tokens equals each sequence's own forward."""

from __future__ import annotations

import numpy as np
import pytest

from layerscope.model import Layer, preset


@pytest.fixture(scope="module")
def layer() -> Layer:
    return Layer.random(preset("tiny"), seed=0)


def _check(y: np.ndarray, ref: np.ndarray) -> None:
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_batched_steps_equal_each_sequence_alone_including_a_recomputed_one(layer: Layer) -> None:
    h = layer.config.hidden_size
    rng = np.random.default_rng(1)
    lens = {"a": 33, "b": 21, "c": 9}  # every token each sequence will compute (prompt, then decodes)
    xs = {s: rng.standard_normal((n, h), dtype=np.float32) for s, n in lens.items()}
    refs = {s: layer.forward(x, np.arange(len(x))) for s, x in xs.items()}  # each alone, no cache, causal
    caches = {s: layer.new_cache(page_size=8, banks=4) for s in lens}
    done = dict.fromkeys(lens, 0)

    def step(plan: list[tuple[str, int]]) -> None:
        rows = [xs[s][done[s] : done[s] + n] for s, n in plan]
        pos = np.concatenate([np.arange(done[s], done[s] + n) for s, n in plan])
        y, trace = layer.forward_varlen(np.concatenate(rows), pos, [caches[s] for s, _ in plan], [n for _, n in plan])
        start = 0
        for s, n in plan:
            _check(y[start : start + n], refs[s][done[s] : done[s] + n])
            start += n
            done[s] += n
        assert trace.y is y

    step([("a", 12), ("b", 9)])  # two prefill chunks
    step([("a", 18), ("b", 1), ("c", 5)])  # a's last chunk, b's first decode, c's first chunk
    step([("a", 1), ("b", 1), ("c", 4)])  # decodes beside a prefill chunk
    # b is preempted: its cache is dropped and it recomputes the 11 tokens it had, in one chunk
    caches["b"], done["b"] = layer.new_cache(page_size=8, banks=4), 0
    step([("a", 1), ("b", 11)])
    step([("b", 1), ("a", 1)])  # order within the batch does not matter
    step([("b", 9)])
    assert done == lens


def test_bad_seq_lens_are_refused(layer: Layer) -> None:
    x = np.zeros((5, layer.config.hidden_size), dtype=np.float32)
    c = [layer.new_cache(page_size=8, banks=4)]
    with pytest.raises(ValueError, match="seq_lens"):
        layer.forward_varlen(x, np.arange(5), c, [4])
    with pytest.raises(ValueError, match="seq_lens"):
        layer.forward_varlen(x, np.arange(5), c + c, [5, 0])
