from layerscope.runtime.chunks import GIB, ChunkScheduler, path_bw_scale
from layerscope.runtime.engine import simulate
from layerscope.scenario import ScenarioSpec


def test_8192_tokens_at_4096_is_two_chunks() -> None:
    plan = ChunkScheduler(4096, 2048, 12.0, page_size=256).plan(8192, free_hbm_bytes=40 * GIB)
    assert [(c.token_start, c.token_end) for c in plan] == [(0, 4096), (4096, 8192)]
    assert [c.pages for c in plan] == [tuple(range(0, 16)), tuple(range(16, 32))]
    assert all(c.reason == "default" and c.remapped for c in plan)


def test_low_free_memory_halves_the_chunk() -> None:
    plan = ChunkScheduler(4096, 2048, 12.0, page_size=256).plan(8192, free_hbm_bytes=10 * GIB)
    assert [c.num_tokens for c in plan] == [2048] * 4
    assert {c.reason for c in plan} == {"low_memory"}


def test_last_chunk_is_short_and_pages_round_up() -> None:
    plan = ChunkScheduler(4096, 2048, 12.0, page_size=256).plan(5000, free_hbm_bytes=40 * GIB)
    assert [c.num_tokens for c in plan] == [4096, 904]
    assert plan[1].pages == tuple(range(16, 20))  # tokens 4096..4999 -> pages 16..19


def test_disabled_scheduler_writes_chunk_relative_pages() -> None:
    plan = ChunkScheduler(4096, 2048, 12.0, page_size=256, disabled=True).plan(8192, free_hbm_bytes=40 * GIB)
    assert plan[0].pages == plan[1].pages == tuple(range(16))
    assert not any(c.remapped for c in plan) and {c.reason for c in plan} == {"disabled"}


def test_engine_launches_one_attention_per_chunk() -> None:
    for free, launches, size in ((40.0, 2, "4096"), (10.0, 4, "2048")):
        spec = ScenarioSpec(model="article", runtime="article", prompt_len=8192, decode_steps=0, free_hbm_gib=free)
        r = simulate(spec)
        attn = [e for e in r.events if e.kind == "kernel" and e.name == "qwen3_prefill_flash_attn_chunked"]
        assert len(attn) == launches == r.summary["num_attention_launches"] == r.summary["num_chunks"]
        assert sorted(e.chunk for e in attn) == list(range(launches))
        assert r.summary["chunk_sizes"] == size


def test_chunks_shrink_when_the_prompt_fills_memory() -> None:
    # 14 GiB free: the first chunks see > 12 GiB free; the KV they write pushes free HBM under the threshold.
    spec = ScenarioSpec(model="qwen3-235b-a22b", runtime="vllm", prompt_len=32768, decode_steps=0, free_hbm_gib=14)
    chunks = [e for e in simulate(spec).events if e.kind == "chunk"]
    reasons = [c.reason for c in chunks]
    assert reasons[0] == "default" and reasons[-1] == "low_memory"
    assert [c.token_end - c.token_start for c in chunks if c.reason == "low_memory"][0] == 2048
    assert chunks[-1].token_end == 32768


def test_path_contention_shares_the_host_path() -> None:
    assert path_bw_scale(0.0) == 1.0
    assert path_bw_scale(1.0) == 0.5  # as much competing traffic as ours: half the link
    assert 0.5 < path_bw_scale(0.6) < path_bw_scale(0.2) < 1.0
