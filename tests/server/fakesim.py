"""A small, fake but well-formed simulation built from the real event classes (server tests need no engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from layerscope import events as ev
from layerscope.scenario import ScenarioSpec

STAGES = [("input_norm", "norm"), ("qkv_proj", "gemm"), ("attention", "attention"), ("experts", "moe")]
NUM_BANKS, CAPACITY = 4, 16


@dataclass
class FakeResult:
    spec: ScenarioSpec
    events: list[Any]
    topology: ev.Topology
    summary: dict[str, Any]
    compare: FakeResult | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    clock: str = "layer"  # one request through one layer (layerscope.result.SimResult.clock)


def topology(spec: ScenarioSpec) -> ev.Topology:
    nodes = [ev.TopologyNode(id=s, label=s, kind=k) for s, k in STAGES]  # type: ignore[arg-type]
    edges = [
        ev.TopologyEdge(source=a[0], target=b[0], bytes=1e6 * (i + 1))
        for i, (a, b) in enumerate(zip(STAGES, STAGES[1:], strict=False))
    ]
    phase = ev.PhaseTopology(nodes=nodes, edges=edges)
    return ev.Topology(model=spec.model, runtime=spec.runtime, prefill=phase, decode=phase)


def _kernel(t: float, stage: str, kind: str, phase: str, **kw: Any) -> ev.KernelEvent:
    return ev.KernelEvent(
        t_us=t,
        name=f"{stage}_kernel",
        stage=stage,
        stage_kind=kind,
        phase=phase,
        start_us=t,
        dur_us=8.0,  # type: ignore[arg-type]
        flops=1e9,
        bytes=1e6,
        bound="memory",
        hbm_util=0.7,
        l2_hit=0.3,
        shapes="x[4,4]",
        **kw,
    )


def fake_simulate(spec: ScenarioSpec) -> FakeResult:
    """Prefill in ceil(prompt/chunk) chunks (one attention launch each), then `decode_steps` decode steps."""
    out: list[Any] = [ev.PhaseEvent(t_us=0.0, phase="prefill")]
    t, used, page = 0.0, [0] * NUM_BANKS, 0
    n_chunks = -(-spec.prompt_len // spec.chunk_size)
    for c in range(n_chunks):
        out.append(
            ev.ChunkEvent(
                t_us=t,
                chunk=c,
                token_start=c * spec.chunk_size,
                token_end=min(spec.prompt_len, (c + 1) * spec.chunk_size),
                chunk_size=spec.chunk_size,
            )
        )
        for stage, kind in STAGES:
            out.append(_kernel(t, stage, kind, "prefill", chunk=c))
            t += 10.0
        for _ in range(2):  # two pages per chunk, two snapshots each: something for a slow reader to lose
            bank = page % NUM_BANKS
            out.append(
                ev.PageAllocEvent(
                    t_us=t, owner="seq0", phase="prefill", logical=[page], banks=[bank], slots=[used[bank]]
                )
            )
            used[bank] += 1
            page += 1
            out.append(ev.BanksEvent(t_us=t, used=list(used), capacity=CAPACITY))
            out.append(
                ev.MemoryEvent(
                    t_us=t,
                    hbm_total_bytes=8e10,
                    hbm_used_bytes=4e10 + page * 1e6,
                    hbm_free_bytes=4e10 - page * 1e6,
                    kv_bytes=page * 1e6,
                    largest_free_run_bytes=1e9,
                )
            )
            t += 1.0
    out.append(ev.PhaseEvent(t_us=t, phase="decode"))
    for s in range(spec.decode_steps):
        t0 = t
        for stage, kind in STAGES:
            out.append(_kernel(t, stage, kind, "decode", step=s))
            t += 10.0
        out.append(
            ev.DecodeStepEvent(
                t_us=t,
                step=s,
                context_len=spec.prompt_len + s,
                latency_us=t - t0,
                model_latency_us=(t - t0) * 94,
                sla_us=spec.sla_ms * 1e3,
                jitter_us=0.0,
                over_sla=False,
            )
        )
        out.append(
            ev.ExpertsEvent(
                t_us=t,
                phase="decode",
                step=s,
                scaled_model="tiny",
                counts=[s % 3, 1, 2, 0],
                distinct_full=8.0,
                assumed="balanced",
            )
        )
        out.append(ev.BanksEvent(t_us=t, used=list(used), capacity=CAPACITY))
    out.append(
        ev.NumericsEvent(
            t_us=t,
            phase="decode",
            scaled_model="tiny",
            tokens=1,
            rel_error=float("inf"),
            max_abs_error=1.0,
            nan_count=0,
            inf_count=1,
        )
    )
    out.append(ev.SummaryEvent(t_us=t, figures={"chunks": n_chunks, "decode_steps": spec.decode_steps}))
    result = FakeResult(spec, out, topology(spec), {"chunks": n_chunks, "duration_us": t})
    if spec.compare is not None:
        result.compare = fake_simulate(spec.model_copy(update={"compare": None, **spec.compare.set}))
    return result


PRESETS = {
    "two-chunks": {
        "name": "two-chunks",
        "title": "Two chunks",
        "description": "8192 tokens in chunks of 4096",
        "prompt_len": 8192,
        "chunk_size": 4096,
        "decode_steps": 6,
    },
    "long-decode": {
        "name": "long-decode",
        "title": "Long decode",
        "description": "many decode steps",
        "prompt_len": 1024,
        "chunk_size": 1024,
        "decode_steps": 200,
        "compare": {"label": "naive", "set": {"allocator": "naive"}},
    },
}


def rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """A column table of loaded.overview back to dicts, the way store.js decodeTable does."""
    cols, dicts = table["cols"], table.get("dict", {})
    shared = table.get("shared", {"cols": [], "rows": []})
    own = [c for c in cols if c not in shared["cols"]]

    def cells(names: list[str], r: list[Any]) -> dict[str, Any]:
        return {c: (dicts[c][v] if c in dicts else v) for c, v in zip(names, r, strict=True)}

    if not shared["cols"]:
        return [cells(cols, r) for r in table["rows"]]
    common = [cells(shared["cols"], r) for r in shared["rows"]]
    # the keys in `cols` order, as decodeTable's objects hold them
    return [{c: d[c] for c in cols} for d in ({**cells(own, r[:-1]), **common[r[-1]]} for r in table["rows"])]


def full_kernels(loaded: dict[str, Any], streamed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed (slim) kernel events with their full records from loaded.overview (store.js kernelRecord)."""
    table = rows(loaded["overview"]["runs"][0]["tables"]["kernel"])
    return [{**table[k["row"]], **k} for k in streamed]
