"""Finding 11: CLI files. Non-finite or overflowing trace times, /dev/zero or a FIFO as a trace: one line, exit 2. Every
output is written atomically: on a full disk (ENOSPC, faked) the command says so in one line, exits 2, and the old
file is intact with no temporary left behind."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from layerscope import atomic
from layerscope.atomic import atomic_writer, write_text_atomic
from layerscope.cli import main

SERVING = ["serving-kv-preemption", "--set", "free_hbm_gib=20", "--quiet"]


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("nan.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\nnan,10,5\n", "finite"),
        ("inf.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\ninf,10,5\n", "finite"),
        ("big.jsonl", '{"timestamp": 1e400, "input_length": 10, "output_length": 5}\n', "timestamp"),
        ("huge.jsonl", '{"timestamp": 1' + "0" * 400 + ', "input_length": 10, "output_length": 5}\n', "timestamp"),
        ("digits.jsonl", '{"timestamp": 1' + "0" * 5000 + ', "input_length": 10, "output_length": 5}\n', "not JSON"),
        ("len.jsonl", '{"timestamp": 0, "input_length": 1e400, "output_length": 5}\n', "input_length"),
    ],
)
def test_bad_trace_numbers_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, words: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    err = _one_line_exit_2(["run", *SERVING, "--set", f"workload.trace={path}"], capsys)
    assert words in err and "line" in err


def test_a_bom_csv_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\n0,64,4\n1,64,4\n".encode())
    assert main(["run", *SERVING, "--set", f"workload.trace={path}"]) == 0


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_special_files_as_a_trace_are_refused_quickly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "p.csv", "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(main(["run", *SERVING, "--set", f"workload.trace={path}"])),
                         daemon=True)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive() and codes == [2]
    assert "not a regular file" in capsys.readouterr().err


def _full_disk(monkeypatch: pytest.MonkeyPatch, after_bytes: int = 100) -> None:
    """Writes through atomic_writer fail with ENOSPC after `after_bytes`, as on a full disk."""
    real = atomic.os.fdopen

    def fdopen(fd: int, *a: Any, **kw: Any) -> Any:
        f = real(fd, *a, **kw)
        written = [0]
        write = f.write

        def limited(s: str) -> int:
            written[0] += len(s)
            if written[0] > after_bytes:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return write(s)

        f.write = limited  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(atomic.os, "fdopen", fdopen)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["run", "decode-pulses", "--quiet"], "--events"),
        (["run", "decode-pulses", "--quiet"], "--trace"),
        (["run", "decode-pulses", "--quiet"], "--summary"),
        (["report", "decode-pulses"], "-o"),
    ],
)
def test_a_full_disk_leaves_the_old_file_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], flag: str
) -> None:
    out = tmp_path / "out.file"
    out.write_text("the good old file\n")
    _full_disk(monkeypatch)
    err = _one_line_exit_2([*argv, flag, str(out)], capsys)
    assert "No space left on device" in err and str(out) in err
    assert out.read_text() == "the good old file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.file"]  # no temporary left behind


def test_sweep_html_is_written_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sweep.html"
    out.write_text("old")
    _full_disk(monkeypatch)
    _one_line_exit_2(["sweep", "serving-64-h200-tp8", "--set", "workload.num_requests=8", "--grid",
                      "scheduler.max_num_seqs=4,8", "--html", str(out)], capsys)
    assert out.read_text() == "old"


def test_atomic_writer_replaces_only_when_complete(tmp_path: Path) -> None:
    out = tmp_path / "x.txt"
    write_text_atomic(out, "one")
    with pytest.raises(RuntimeError), atomic_writer(out) as f:
        f.write("half")
        raise RuntimeError("interrupted")
    assert out.read_text() == "one" and [p.name for p in tmp_path.iterdir()] == ["x.txt"]
    write_text_atomic(out, "two")
    assert out.read_text() == "two" and oct(out.stat().st_mode & 0o777) != oct(0o600)
