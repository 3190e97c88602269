"""One seed rule: ``headflow simulate`` and the documented Python lines give the same run."""

import pathlib
import re

import numpy as np
import xarray as xr

from headflow import cli, particles

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _block(page: str, heading: str) -> str:
    """The first python block after ``heading`` in ``page``."""
    text = (ROOT / page).read_text()
    start = text.index(heading)
    return re.search(r"```python\n(.*?)```", text[start:], re.S)[1]


def test_seed_streams_are_the_children_of_the_seed_sequence():
    streams = particles.seed_streams(7)
    kids = np.random.SeedSequence(7).spawn(2)
    assert np.array_equal(streams.x0.standard_normal(4), np.random.default_rng(kids[0]).standard_normal(4))
    assert np.array_equal(streams.noise.standard_normal(4), np.random.default_rng(kids[1]).standard_normal(4))


def test_cli_example_and_readme_lines_give_identical_datasets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = cli.load_config("simulate", cli.EXAMPLES["simulate"])
    ds_cli = cli.run_simulate(cfg, out=str(tmp_path / "cli.nc"), progress=False)
    exec(compile(_block("README.md", "## A typical call"), "README", "exec"), {"__name__": "__doc__"})
    with xr.open_dataset(tmp_path / "run_python.nc") as ds_py:
        ds_py = ds_py.load()
    assert set(ds_cli.data_vars) == set(ds_py.data_vars)
    for name in ds_cli.data_vars:
        np.testing.assert_array_equal(ds_cli[name].values, ds_py[name].values, err_msg=name)
    np.testing.assert_array_equal(ds_cli.positions.isel(time=0).values, ds_py.positions.isel(time=0).values)


def test_cli_guide_lines_draw_the_cli_tokens(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = cli.load_config("simulate", cli.EXAMPLES["simulate"])
    ds_cli = cli.run_simulate(cfg, out=str(tmp_path / "cli.nc"), progress=False)
    space: dict = {}
    exec(compile(_block("docs/guide/cli.md", "**Seeds.**"), "cli guide", "exec"), space)
    np.testing.assert_array_equal(space["traj"].x, ds_cli.positions.values)
