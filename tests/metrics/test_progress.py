"""One rule for progress bars (metrics._runs.progress): none when nothing is left to do, none with
progress=False, at once with True, after 2 s of work by default; labels name the work."""

import sys
import types
import warnings

import pytest
import tqdm.auto
import tqdm.std

import metrics
from metrics._runs.progress import AUTO_DELAY, progress_bar, progress_step
from particles import MultiHead, tqdm_class


@pytest.mark.parametrize("progress, total, done, shown, delay", [
    (True, 4, 0, True, 0.0), (None, 4, 1, True, AUTO_DELAY), (False, 4, 0, False, None),
    (True, 4, 4, False, None), (None, 0, 0, False, None),  # nothing left to do: no bar whatever progress says
])
def test_the_rule(progress, total, done, shown, delay):
    bar = progress_bar(progress, total=total, done=done, desc="work")
    assert (bar is not None) == shown
    if bar is not None:
        assert bar.delay == delay and bar.n == done and bar.total == total and bar.desc.startswith("work")
        bar.close()


def test_a_step_counts_once_and_not_on_error():
    with progress_step(False, "reference"):
        pass
    with pytest.raises(RuntimeError), progress_step(None, "reference"):
        raise RuntimeError("boom")


def test_sweep_bar_is_labelled_and_absent_on_a_full_store_rerun(tmp_path, capsys):
    kw = dict(n_seeds=2, t1=0.1, dt=0.05, n_saves=2, metrics=("n_clusters",), store=tmp_path / "cells")
    metrics.run_sweep({"n_particles": [4, 6]}, progress=True, **kw)
    err = capsys.readouterr().err
    assert "sweep: 100%" in err and "4/4" in err
    metrics.run_sweep({"n_particles": [4, 6]}, progress=True, **kw)  # every cell in the store
    assert capsys.readouterr().err == ""
    metrics.run_sweep({"n_particles": [4, 6, 8]}, progress=True, **kw)  # two new cells: the bar starts at 4/6
    err = capsys.readouterr().err
    assert "4/6" in err and "6/6" in err


def test_studies_name_their_bars_and_quick_runs_stay_silent(capsys, monkeypatch):
    metrics.phase_diagram([1.0, 2.0], n=4, d=2, t1=0.5, n_systems=2, n_saves=2, progress=True)
    assert "phase diagram: 100%" in capsys.readouterr().err
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    study = dict(n_values=(8, 16), n_seeds=2, t1=0.1, n_saves=2, m_grid=64, dt=0.05)
    metrics.mean_field_limit_study(model, lambda x: 1 + 0.5 * x[:, 0], progress=True, **study)
    err = capsys.readouterr().err
    assert "reference: 100%" in err and "S^1 study: 100%" in err
    monkeypatch.setattr("metrics._runs.progress.AUTO_DELAY", 3600.0)  # (a loaded machine may take 2 s)
    metrics.mean_field_limit_study(model, lambda x: 1 + 0.5 * x[:, 0], **study)  # default: a short run, no bar
    assert capsys.readouterr().err == ""


def test_without_ipywidgets_the_bar_is_tqdm_std_and_silent(monkeypatch):
    # a Jupyter kernel without ipywidgets: tqdm.auto would warn "IProgress not found"; the text bar does not
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # (import ipywidgets raises ImportError)
    assert tqdm_class() is tqdm.std.tqdm
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar = progress_bar(True, total=2, desc="work")
        assert type(bar) is tqdm.std.tqdm
        bar.close()


def test_with_ipywidgets_the_bar_is_tqdm_auto(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", types.ModuleType("ipywidgets"))
    assert tqdm_class() is tqdm.auto.tqdm
