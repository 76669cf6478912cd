"""A plain, non-editable install must carry the front end, the scenarios and the calibration data inside the wheel,
and work from any folder with nothing of the source tree beside it."""

from __future__ import annotations

import json
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
    pkg = REPO / "backend/layerscope"
    shipped_data = {n for n in names if n.startswith("layerscope/hardware/data/")}
    in_tree = {f"layerscope/{p.relative_to(pkg)}" for p in (pkg / "hardware/data").rglob("*") if p.is_file()}
    assert shipped_data == in_tree
    assert {
        "layerscope/hardware/data/README.md",
        "layerscope/hardware/data/vidur_a100_llama-2-7b_mlp.csv.gz",
        "layerscope/hardware/data/collectives/vidur_h100_dgx_all_reduce.csv.gz",
    } <= shipped_data
    (entry_points,) = [n for n in names if n.endswith("entry_points.txt")]
    assert "layerscope = layerscope.cli:entry" in zf.read(entry_points).decode()  # the console script (main, then exit)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed with pip --target into a folder of its own (no editable link to the repository)."""
    target = tmp_path_factory.mktemp("install") / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True)
    return target


def _env(target: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LAYERSCOPE_CALIBRATION_DIR"}
    return {**env, "PYTHONPATH": str(target)}


def test_installed_wheel_finds_its_assets_outside_the_repo(installed: Path, tmp_path: Path) -> None:
    target = installed
    env = _env(target)
    code = (
        "import layerscope.paths as p, layerscope;"
        "print(layerscope.__file__); print(p.frontend_dir()); print(p.scenarios_dir());"
        "import layerscope.calibration.gemm as c; print(c.calibration_dir())"
    )
    lines = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True,
                           capture_output=True, text=True).stdout.split()
    assert all(line.startswith(str(target)) for line in lines), lines
    listed = subprocess.run([sys.executable, "-m", "layerscope", "scenarios"], env=env, cwd=tmp_path,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == len(list((REPO / "scenarios").glob("*.yaml")))


def test_installed_console_script_calibrates_from_the_shipped_data(installed: Path, tmp_path: Path) -> None:
    """`layerscope calibrate`, the installed console script, run from a folder outside the repository."""
    script = installed / "bin" / "layerscope"
    assert script.is_file()
    work = tmp_path / "elsewhere"
    work.mkdir()
    assert REPO not in work.parents
    done = subprocess.run([str(script), "calibrate", "--json"], env=_env(installed), cwd=work, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stored_in_sample"]["n"] > 10_000  # both GPUs' linear-op rows were read
    assert report["in_sample"]["median"] < 0.5 * report["plain_roofline"]["median"]  # the fit beats a plain roofline
    for name, value in report["stored"].items():  # refitting the shipped data reproduces the stored constants
        assert abs(report["constants"][name] - value) <= 0.02 * max(abs(value), 1.0), name
    table = subprocess.run([str(script), "calibrate"], env=_env(installed), cwd=work, capture_output=True, text=True,
                           timeout=300)
    assert table.returncode == 0 and "held out: fit a100 -> test h100" in table.stdout, table.stderr
