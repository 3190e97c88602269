"""Papercuts: the CLI's warnings without library source lines, the notebook extra's nbconvert, the
number of heads from a model's config."""

import pathlib
import re
import warnings

import numpy as np
import pytest

import particles
from headflow import cli
from particles import InvalidParameterError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_cli_warnings_have_no_source_lines(monkeypatch, capsys, tmp_path):
    def warn(cfg, **kwargs):
        warnings.warn("sweep cell 3 failed: overflow at t = 1.2 (the cell is kept as NaN)", UserWarning, stacklevel=2)

    monkeypatch.setitem(cli._RUNNERS, "simulate", warn)
    path = tmp_path / "run.toml"
    path.write_text(cli.EXAMPLES["simulate"])
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["simulate", str(path), "--out", str(tmp_path / "run.nc"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "headflow simulate: UserWarning: sweep cell 3 failed" in err
    assert ".py:" not in err and "warnings.warn" not in err


def test_readme_points_to_the_tutorial_and_how_to_run_it():
    """A new user starts from the README: the notebook is named there with the extra that runs it."""
    text = (ROOT / "README.md").read_text()
    assert "docs/tutorial.ipynb" in text and '".[notebook]"' in text
    assert "nbconvert --to notebook --execute docs/tutorial.ipynb" in text
    assert (ROOT / "docs" / "tutorial.ipynb").is_file()


def test_documented_submodules_resolve_after_the_plain_import():
    """The docs write metrics.spectral_reference, metrics.sentences, meanfield.extend: after
    `from headflow import metrics` they were AttributeErrors until imported by name."""
    import subprocess
    import sys

    code = ("from headflow import meanfield, metrics; import sys; assert 'metrics.sentences' not in sys.modules; "
            "print(metrics.spectral_reference.SpectralSlicedReference.__name__, metrics.sentences.tokenize.__name__, "
            "metrics.io.__name__, metrics.extend.__name__, meanfield.extend.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["SpectralSlicedReference", "tokenize", "metrics.io", "metrics.extend", "meanfield.extend"]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import metrics

        metrics.nothing  # noqa: B018  (an unknown name still fails)


def test_notebook_extra_has_nbconvert():
    text = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^notebook = \[(.*)\]$", text, re.M)[1]
    assert "nbconvert" in extra


def _bert(rng, d=8, heads=2):
    t = {}
    for c in ("query", "key", "value"):
        t[f"encoder.layer.0.attention.self.{c}.weight"] = rng.standard_normal((d, d))
    t["encoder.layer.0.attention.output.dense.weight"] = rng.standard_normal((d, d))
    return t


def test_load_attention_takes_the_heads_from_the_config():
    t = _bert(np.random.default_rng(0))
    w = particles.load_attention(t, config={"num_attention_heads": 2, "hidden_size": 8})
    assert w.n_heads == 2 and particles.load_attention(t, n_heads=2).n_heads == 2
    assert [v.n_heads for v in particles.load_attention_layers(t, config={"n_head": 4})] == [4]
    with pytest.raises(InvalidParameterError, match="contradicts the config's 2 heads"):
        particles.load_attention(t, n_heads=4, config={"num_attention_heads": 2})
    with pytest.raises(InvalidParameterError, match="pass n_heads=... or the model's config"):
        particles.load_attention(t)


def test_sweep_head_strengths_are_numbers():
    import metrics

    kw = dict(fixed={"d": 2, "n_particles": 4, "kind": "softmax"}, n_seeds=1, t1=0.1, dt=0.05, n_saves=2,
              metrics=("energy_multi",))
    one = metrics.run_sweep({"lambdas": [[1.0], [0.5], [2.0]]}, **kw)
    assert one.lambdas.dtype.kind == "f"
    picked = one.energy_multi.sel(lambdas=[1.0, 0.5])
    np.testing.assert_array_equal(picked.lambdas.values, [1.0, 0.5])
    several = metrics.run_sweep({"lambdas": [[1.0], [1.0, 0.5]]}, **kw)
    assert list(several.lambdas.values) == ["[1.0]", "[1.0, 0.5]"]
    np.testing.assert_array_equal(several.lambda_h.values, [[1.0, np.nan], [1.0, 0.5]])
    assert several.sel(lambdas="[1.0, 0.5]").lambda_h.values.tolist() == [1.0, 0.5]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the failing cell's diagnostics overflow float64
def test_failed_cell_warning_reads_as_one_sentence():
    import metrics

    with pytest.warns(metrics.FailedCellWarning) as record:
        metrics.run_sweep({"beta": [1.0, 400.0]}, fixed={"n_particles": 8, "kind": "usa", "d": 3}, n_seeds=1, t1=2.0,
                          dt=0.5, n_saves=3, method="euler")
    text = next(str(w.message) for w in record if w.category is metrics.FailedCellWarning)
    assert "1 of 2 cells did not reach t1" in text and ".." not in text
