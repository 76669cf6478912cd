"""Run every bench/bench_*.py in turn and print the JSON line each prints (`make bench`).

Each script runs in its own process with this interpreter, the OPENBLAS_* overrides removed from its environment
(the figures are for numpy's own BLAS settings). A script that fails prints {"bench": NAME, "error": ...} instead;
the exit status is 1 if any failed.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/run_all.py [NAME ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 900


def json_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        try:
            if isinstance(json.loads(line), dict):
                out.append(line)
        except ValueError:
            continue
    return out


def run(script: Path) -> tuple[list[str], bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    try:
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return [json.dumps({"bench": script.stem, "error": f"timed out after {TIMEOUT_S} s"})], False
    lines = json_lines(proc.stdout)
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [json.dumps({"bench": script.stem, "error": f"exit {proc.returncode}: {tail}"})], False
    return lines, True


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem in names or s.stem.removeprefix("bench_") in names]
    ok = True
    for script in scripts:
        lines, good = run(script)
        ok &= good
        for line in lines:
            print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
