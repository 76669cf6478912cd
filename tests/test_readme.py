"""The README's examples work as written: the Python example (from the repository top), `make run PORT=...`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own documentation
    assert namespace["step"].shape == (1, namespace["layer"].config.hidden_size)


@pytest.mark.parametrize(("extra", "host", "port"), [([], "127.0.0.1", "8000"), (["PORT=8765"], "127.0.0.1", "8765"),
                                                     (["HOST=0.0.0.0", "PORT=9001"], "0.0.0.0", "9001")])
def test_make_run_serves_on_the_port_and_host_given(extra: list[str], host: str, port: str) -> None:
    readme = (REPO / "README.md").read_text()
    assert "make run PORT=8765" in readme and "make run HOST=0.0.0.0" in readme
    dry = subprocess.run(["make", "-n", "-C", str(REPO), "run", *extra], capture_output=True, text=True, check=True)
    (serve,) = [line for line in dry.stdout.splitlines() if " serve " in line]
    assert "layerscope serve --prewarm" in serve  # every preset warm for a first visit
    assert serve.endswith(f" --host {host} --port {port}")
