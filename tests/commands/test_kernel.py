"""`layerscope kernel`: one kernel from flags or many from JSONL, one {"us", "source", "table", "parts"} a line; a bad
spec refused naming its line and field (exit 2, one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layerscope.cli import main
from layerscope.hardware import tables
from layerscope.hardware.kernel import AllReduceOp, ContextAttentionOp, GemmOp, MoeOp

SPECS = [
    {"op": "gemm", "gpu": "h200", "m": 1024, "n": 4096, "k": 4096, "dtype": "bf16"},
    {"op": "moe", "gpu": "h200", "tokens": 16384, "hidden": 4096, "inter": 1536, "experts": 128, "topk": 8,
     "moe_tp": 1, "ep": 8, "dtype": "bf16", "routing": "balanced"},
    {"op": "context_attention", "gpu": "h100-sxm", "batch": 4, "seq_len": 1000, "prefix_len": 0, "q_heads": 64,
     "kv_heads": 4, "head_dim": 128, "kv_dtype": "bf16"},
    {"op": "decode_attention", "gpu": "b200", "batch": 8, "kv_len": 4096, "q_heads": 8, "kv_heads": 1,
     "head_dim": 128, "kv_dtype": "bf16"},
    {"op": "all_reduce", "gpu": "h200", "gpus": 8, "bytes": 8192, "impl": "custom"},
    {"op": "all_to_all", "gpu": "a100-80g-sxm", "gpus": 8, "bytes": 1048576},
]


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_one_kernel_from_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "--op", "gemm", "--gpu", "h200", "--m", "1000", "--n", "4608", "--k", "4096"]) == 0
    (out,) = _lines(capsys)
    assert list(out) == ["us", "source", "table", "parts"]
    hit = tables.price("h200", GemmOp(1000, 4608, 4096, "bf16"))
    assert out["source"] == "measured" and hit is not None and out["us"] == pytest.approx(hit.us)
    assert out["table"] == hit.table.as_dict() and out["table"]["system"] == "h200_sxm"
    assert out["parts"]["measured_us"] == pytest.approx(hit.us) and out["parts"]["analytic_us"] > 0


def test_many_kernels_from_jsonl_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "specs.jsonl"
    f.write_text("\n".join(json.dumps(s) for s in SPECS) + "\n\n")
    assert main(["kernel", "--from", str(f)]) == 0
    out = _lines(capsys)
    assert len(out) == len(SPECS) and all(o["source"] == "measured" for o in out)
    assert [o["table"]["system"] for o in out] == ["h200_sxm", "h200_sxm", "h100_sxm", "b200_sxm", "h200_sxm",
                                                  "a100_sxm"]
    moe = tables.price("h200", MoeOp(16384, 4096, 1536, 128, 8, 1, 8, "bf16", "balanced"))
    assert moe is not None and out[1]["us"] == pytest.approx(moe.us)  # the experts' kernels share it
    assert set(out[1]["parts"]) >= {"moe_align_block_size_kernel", "fused_moe_kernel", "fused_moe_kernel #2",
                                    "moe_sum_kernel"}
    ctx = tables.price("h100-sxm", ContextAttentionOp(4, 1000, 0, 64, 4, 128))
    assert ctx is not None and out[2]["us"] == pytest.approx(ctx.us)
    assert out[3]["table"]["kernel"] == "vllm_flashinfer_trtllmdecode"  # what vLLM runs on B200
    assert out[4]["us"] == pytest.approx(tables.price("h200", AllReduceOp(8, 8192)).us)
    assert out[4]["us"] == pytest.approx(5.1, rel=0.02)


def test_a_shape_no_table_covers_is_analytic_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "--op", "gemm", "--gpu", "b200", "--m", "64", "--n", "4096", "--k", "4096",
                 "--dtype", "fp8_block"]) == 0  # the eager table's host-launch-bound rows do not cover it
    (out,) = _lines(capsys)
    assert out["source"] == "analytic" and out["table"] is None and out["us"] > 0
    assert set(out["parts"]) == {"per_token_group_quant_fp8", "cutlass_3x_gemm_sm90_fp8_e4m3_scaled_mm"}
    assert main(["kernel", "--op", "gemm", "--gpu", "h200", "--m", "64", "--n", "4096", "--k", "4096",
                 "--dtype", "fp8_block"]) == 0  # on Hopper the per-tensor fp8 rows stand in
    (out,) = _lines(capsys)
    assert out["source"] == "measured" and out["table"]["kernel"] == "CutlassFP8ScaledMMLinearKernel"
    assert main(["kernel", "--op", "context_attention", "--gpu", "h200", "--batch", "1", "--seq-len", "512",
                 "--prefix-len", "4096", "--q-heads", "64", "--kv-heads", "4", "--head-dim", "128"]) == 0
    (out,) = _lines(capsys)
    assert out["source"] == "measured" and out["us"] >= 14.1  # the fresh prompt of equal work (2,111 tokens)
    assert out["parts"]["equal_work_seq_len"] == pytest.approx(2111, abs=1)


@pytest.mark.parametrize(("line", "field"), [
    ({"op": "conv", "gpu": "h200"}, "op"),
    ({"op": "gemm", "gpu": "h300", "m": 1, "n": 1, "k": 1}, "gpu"),
    ({"op": "gemm", "gpu": "h200", "m": 1, "n": 1}, "k"),
    ({"op": "gemm", "gpu": "h200", "m": 1.5, "n": 1, "k": 1}, "m"),
    ({"op": "gemm", "gpu": "h200", "m": 0, "n": 1, "k": 1}, "m"),
    ({"op": "gemm", "gpu": "h200", "m": 1, "n": 1, "k": 1, "dtype": "int4"}, "dtype"),
    ({"op": "gemm", "gpu": "h200", "m": 1, "n": 1, "k": 1, "tokens": 3}, "tokens"),
    ({"op": "moe", "gpu": "h200", "tokens": 8, "hidden": 4096, "inter": 1536, "experts": 128, "topk": 8,
      "routing": "zipf"}, "routing"),
    ({"op": "moe", "gpu": "h200", "tokens": 8, "hidden": 4096, "inter": 1536, "experts": 128, "topk": 8,
      "ep": 3}, "ep"),
    ({"op": "all_reduce", "gpu": "h200", "gpus": 3, "bytes": 64}, "gpus"),
    ({"op": "all_reduce", "gpu": "h200", "gpus": 8, "bytes": "lots"}, "bytes"),
    ({"op": "decode_attention", "gpu": "h200", "batch": 1, "kv_len": 9, "q_heads": 8, "kv_heads": 3,
      "head_dim": 128}, "kv_heads"),
])
def test_a_bad_spec_is_refused_naming_its_line_and_field(line: dict, field: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "specs.jsonl"
    f.write_text(json.dumps(SPECS[0]) + "\n" + json.dumps(line) + "\n")
    assert main(["kernel", "--from", str(f)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing priced from a file with a bad line
    err = captured.err.strip()
    assert "\n" not in err and "line 2" in err and f"field '{field}'" in err


def test_bad_input_beyond_the_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "specs.jsonl"
    f.write_text("[1, 2]\n")
    assert main(["kernel", "--from", str(f)]) == 2
    assert "line 1" in capsys.readouterr().err
    f.write_text("{not json\n")
    assert main(["kernel", "--from", str(f)]) == 2
    assert "line 1: not JSON" in capsys.readouterr().err
    assert main(["kernel", "--gpu", "h200"]) == 2  # no --op
    assert main(["kernel", "--from", str(f), "--op", "gemm"]) == 2
    assert main(["kernel", "--op", "gemm", "--gpu", "h200", "--m", "abc", "--n", "1", "--k", "1"]) == 2
    assert "field 'm'" in capsys.readouterr().err
    assert main(["kernel", "--from", str(tmp_path / "missing.jsonl")]) == 2
