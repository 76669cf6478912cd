import json
from pathlib import Path

import pytest

from layerscope.cli import main
from layerscope.events import parse_event


def test_run_writes_events_trace_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev, tr, su = tmp_path / "e.jsonl", tmp_path / "t.json", tmp_path / "s.json"
    rc = main(["run", "prefill-8k-chunked", "--set", "decode_steps=4", "--events", str(ev), "--trace", str(tr),
               "--summary", str(su)])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""  # no progress bar when stderr is not a terminal
    assert "prefill-8k-chunked" in out and "chunks (attention launches)" in out
    events = [parse_event(json.loads(line)) for line in ev.read_text().splitlines()]
    assert events[-1].kind == "summary"
    summary = json.loads(su.read_text())
    assert summary == json.loads(json.dumps(events[-1].figures)) and summary["num_chunks"] == 2
    assert json.loads(tr.read_text())["traceEvents"]


def test_run_twice_gives_identical_event_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        assert main(["run", "decode-pulses", "--quiet", "--set", "numerics=true", "--events", str(path)]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_run_accepts_a_yaml_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nmodel: article\nruntime: article\nprompt_len: 300\ndecode_steps: 2\n")
    assert main(["run", str(path)]) == 0
    assert "mine: article" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
        (["run", "prefill-8k-chunked", "--set", "chunk_size"], "expected key=value"),
        (["run", "prefill-8k-chunked", "--set", "nope=1"], "unknown field 'nope'"),
        (["run", "prefill-8k-chunked", "--set", "banks=0"], "field 'banks'"),
        (["run", "prefill-8k-chunked", "--set", "prompt_len=999999999"], "field 'prompt_len'"),
        (["sweep", "prefill-8k-chunked", "--chunk-sizes", "big"], "--chunk-sizes"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_sweep_memory_path_contention_leaves_hbm_prefill_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """Prefill reads HBM, not the host memory path: contention changes no chunk's time, larger chunks win."""
    def rows(contention: float) -> dict:
        assert main(["sweep", "prefill-8k-chunked", "--chunk-sizes", "1024,2048,4096,8192", "--json",
                     "--set", f"memory_path_contention={contention}"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert [r["chunk_size"] for r in data["rows"]] == [1024, 2048, 4096, 8192]
        assert [r["num_chunks"] for r in data["rows"]] == [8, 4, 2, 1]
        return data

    calm, contended = rows(0.0), rows(1.0)
    assert calm["best_chunk_size"] == contended["best_chunk_size"] == 8192
    assert calm["rows"] == contended["rows"]


def test_sweep_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "prefill-8k-chunked", "--chunk-sizes", "2048,4096"]) == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and "<- best" in out and len(out.splitlines()) == 4


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """stderr a pseudo-terminal: the bar is drawn in place and ends at 100%."""
    import os
    import pty
    import subprocess
    import sys

    main_fd, tty_fd = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "layerscope", "run", "decode-pulses"], stderr=tty_fd,
                          stdout=subprocess.PIPE, text=True, timeout=120)
    os.close(tty_fd)
    drawn = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main_fd)
    assert proc.returncode == 0 and "decode-pulses" in proc.stdout
    frames = [f for f in drawn.decode().split("\r") if f.strip()]  # the terminal turns "\n" into "\r\n"
    assert len(frames) > 2 and frames[0].startswith("decode-pulses [")
    assert frames[-1].strip().endswith("100%") and "#" * 30 in frames[-1]


def test_run_a_workload_from_a_trace_with_dotted_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layerscope.paths import scenarios_dir

    trace = scenarios_dir() / "traces" / "sample-azure.csv"
    ev, tr = tmp_path / "e.jsonl", tmp_path / "t.json"
    rc = main(["run", "serving-kv-preemption", "--set", f"workload.trace={trace}", "--set", "free_hbm_gib=20",
               "--set", "compare=null", "--set", "scheduler.prefix_caching=true", "--events", str(ev),
               "--trace", str(tr)])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    assert "successful requests" in out and "P99 TPOT" in out and "prefix cache hit rate" in out
    assert "free_queue allocator" in out.splitlines()[0]
    events = [parse_event(json.loads(line)) for line in ev.read_text().splitlines()]
    rejected = [e for e in events if e.kind == "request" and e.what == "rejected"]  # over the preset's max_model_len
    assert rejected and all(e.input_len + e.output_len > 4096 for e in rejected)
    assert sum(e.kind == "request" and e.what == "finished" for e in events) == 40 - len(rejected)
    assert events[-1].figures["completed"] == 40 - len(rejected) and events[-1].figures["failed"] == len(rejected)
    assert json.loads(tr.read_text())["traceEvents"]


def test_run_refuses_a_bad_trace_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,12,3\n1,-5,3\n")
    assert main(["run", "serving-kv-preemption", "--set", f"workload.trace={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 3, column 'ContextTokens'" in err
