"""A plain, non-editable install must carry the front end and the scenarios inside the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(REPO)],
        check=True,
    )
    (whl,) = out.glob("layerscope-*.whl")
    return whl


def test_wheel_ships_frontend_and_scenarios(wheel: Path) -> None:
    zf = zipfile.ZipFile(wheel)
    names = zf.namelist()
    assert "layerscope/frontend/templates/index.html" in names
    assert any(n.startswith("layerscope/frontend/static/js/") for n in names)
    shipped = {Path(n).stem for n in names if n.startswith("layerscope/scenarios/") and n.endswith(".yaml")}
    assert shipped == {p.stem for p in (REPO / "scenarios").glob("*.yaml")}
    (entry_points,) = [n for n in names if n.endswith("entry_points.txt")]
    assert "layerscope = layerscope.cli:main" in zf.read(entry_points).decode()  # the console script


def test_installed_wheel_finds_its_assets_outside_the_repo(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import layerscope.paths as p, layerscope;"
        "print(layerscope.__file__); print(p.frontend_dir()); print(p.scenarios_dir())"
    )
    lines = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True,
                           capture_output=True, text=True).stdout.split()
    assert all(line.startswith(str(target)) for line in lines), lines
    listed = subprocess.run([sys.executable, "-m", "layerscope", "scenarios"], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == len(list((REPO / "scenarios").glob("*.yaml")))
