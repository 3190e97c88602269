"""Figures check their inputs and their output path before drawing anything: NaN positions, empty
names, a path that is a folder, under a file, in a missing or read-only folder, and animations too
long or too large to hold are refused, and nothing is drawn or written."""

import matplotlib
import numpy as np
import pytest

import metrics
from metrics._figures import animation
from particles.validation import InvalidParameterError
from tests.metrics.test_plotting import _trajectory
from tests.test_cli_outputs import _make_read_only

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def s2():
    return _trajectory(8, 3, 5)


def _nan_run(ds):
    bad = ds.copy(deep=True)
    bad["positions"][3:] = np.nan  # a run that failed after the third save
    return bad


@pytest.mark.parametrize("draw", ["animate", "plot_sphere", "plot_angles"])
def test_nan_positions_are_refused_before_drawing(s2, tmp_path, draw):
    bad = _nan_run(s2 if draw != "plot_angles" else _trajectory(6, 2, 5))
    with pytest.raises(InvalidParameterError, match=r"NaN or inf positions at 2 saved time\(s\).*isel\(time=slice"
                                                    r"\(0, 3\)\)"):
        if draw == "animate":
            metrics.animate(bad, tmp_path / "t.gif", dpi=20)
        else:
            getattr(metrics, draw)(bad)
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_failed_from_the_start_has_nothing_to_draw(s2, tmp_path):
    bad = s2.copy(deep=True)
    bad["positions"][:] = np.inf
    with pytest.raises(InvalidParameterError, match="NaN or inf positions at every saved time.*nothing to draw"):
        bad.attn.animate(tmp_path / "t.gif")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where, match", [
    ("folder", "is a folder; pass a file path in it"),
    ("under_file", "which is a file, not a folder"),
    ("missing", "does not exist; create it first"),
    ("read_only", "is not writable"),
    ("dangling", r"is a symbolic link \(to 'missing/target\.gif'\); headflow never writes through a link"),
    ("loop", "is a symbolic link .*never writes through a link"),
])
def test_bad_output_paths_are_refused_before_any_frame(s2, tmp_path, monkeypatch, where, match):
    drawn = []
    monkeypatch.setattr(animation, "_screen", lambda *a: drawn.append(1) or (_ for _ in ()).throw(AssertionError))
    (tmp_path / "file.txt").write_text("mine\n")
    (tmp_path / "out.gif").mkdir()
    path = {"folder": tmp_path / "out.gif", "under_file": tmp_path / "file.txt" / "t.gif",
            "missing": tmp_path / "nowhere" / "t.gif", "read_only": tmp_path / "ro" / "t.gif"}.get(where)
    undo = lambda: None  # noqa: E731
    if where in ("dangling", "loop"):
        path = tmp_path / "link.gif"
        path.symlink_to("missing/target.gif" if where == "dangling" else path)
    if where == "read_only":
        path.parent.mkdir()
        undo = _make_read_only(path.parent)
    try:
        with pytest.raises(InvalidParameterError, match=f"'path' parameter of animate: .*{match}.*Nothing was drawn"):
            s2.attn.animate(path, dpi=20)
    finally:
        undo()
    assert drawn == [] and (tmp_path / "file.txt").read_text() == "mine\n" and not any((tmp_path / "out.gif").iterdir())


def test_too_many_frames_or_too_large_a_gif_is_refused(s2, tmp_path, monkeypatch):
    monkeypatch.setattr(animation, "MAX_FRAMES", 3)
    with pytest.raises(InvalidParameterError, match=r"'stride' parameter of animate: 5 saves at stride 1 make 5 "
                                                    r"frames, more than 3\. Pass stride=2"):
        metrics.animate(s2, tmp_path / "t.gif", dpi=20)
    metrics.animate(s2, tmp_path / "t.gif", dpi=20, stride=2)  # 3 frames: drawn
    monkeypatch.setattr(animation, "MAX_GIF_BYTES", 3 * 4 * 80**2 - 1)
    with pytest.raises(InvalidParameterError, match="'dpi' parameter of animate: 3 GIF frames of 80 pixels square"):
        metrics.animate(s2, tmp_path / "u.gif", dpi=20, stride=2)
    assert not (tmp_path / "u.gif").exists()


def test_animation_progress_follows_the_library_rule(s2, tmp_path, capsys, monkeypatch):
    """None: a bar once drawing has run AUTO_DELAY seconds (a quick animation stays silent)."""
    from metrics._runs import progress

    metrics.animate(s2, tmp_path / "a.gif", dpi=20)
    assert "animation" not in capsys.readouterr().err
    metrics.animate(s2, tmp_path / "b.gif", dpi=20, progress=True)
    assert "animation" in capsys.readouterr().err
    monkeypatch.setattr(progress, "AUTO_DELAY", 0.0)
    metrics.animate(s2, tmp_path / "c.gif", dpi=20)
    assert "5/5" in capsys.readouterr().err


def test_empty_names_and_a_time_out_of_range_say_what(s2):
    for names in ([], [""], "energy_multi"):
        with pytest.raises(InvalidParameterError, match="'names' parameter of plot_curves must be None or a seq"):
            metrics.plot_curves(s2, names)
    with pytest.raises(InvalidParameterError, match=r"time 100.0 of plot_sphere is outside the saved times"):
        metrics.plot_sphere(s2, 100.0)


def test_curves_of_runs_concatenated_along_a_new_dim_name_the_dim(s2):
    """A metric is evaluated on one cloud per time: a 'run' dim of positions is named, with .isel/.sel."""
    import xarray as xr

    runs = xr.concat([s2] * 3, dim="run")
    with pytest.raises(InvalidParameterError, match=r"metric\('n_clusters'\) needs the positions of one run.*"
                                                    r"run \(3\).*ds\.isel\(run=0\) or ds\.sel\(run=\.\.\.\)"):
        metrics.plot_curves(runs, ["n_clusters"])
    assert metrics.plot_curves(runs.isel(run=0), ["n_clusters"]) is not None
