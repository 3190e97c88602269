"""Figures and animations of every Dataset kind (metrics.plotting, metrics.animation, ds.attn.plot*):
each is rendered to a file and the file is checked (size, frames, non-blank pixels), and what is
drawn is checked against the data (angles, projections, the t*(beta) curve, the collapse shift)."""

import pathlib

import matplotlib
import numpy as np
import pytest
import xarray as xr

import metrics
import particles
from metrics._figures import animation
from metrics._figures.plotting import axis_label
from particles.validation import InvalidParameterError

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402


def _trajectory(n, d, n_saves, t1=3.0):
    model = particles.MultiHead.scalar([1.0], d=d, beta=4.0, kind="softmax")
    x0 = particles.sample_uniform(n, d=d, rng=np.random.default_rng(1))
    traj = particles.simulate(x0, model, t1=t1, dt=0.05, save=particles.SaveAt(ts=np.linspace(0, t1, n_saves)))
    return metrics.trajectory_to_dataset(traj, model)


@pytest.fixture(scope="module")
def s1():
    return _trajectory(24, 2, 7)


@pytest.fixture(scope="module")
def s2():
    return _trajectory(30, 3, 6)


@pytest.fixture(scope="module")
def phase():
    return metrics.phase_diagram(np.linspace(0.5, 8.0, 4), n=8, d=8, kind="softmax", t1=6.0, n_systems=4, chunk=4,
                                 n_saves=7, method="rk4", dt=0.5, seed=0)


@pytest.fixture(scope="module")
def chaos():
    model = particles.MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    return metrics.chaos_horizon_study(model, n_values=[64, 256], n_seeds=2, t1=8.0, n_saves=41, delta=(0.3,),
                                       l_max=3, dt=0.1, n_boot=20)


def _save(ax, path: pathlib.Path) -> pathlib.Path:
    fig = np.ravel(ax)[0].figure
    fig.savefig(path, dpi=60)
    plt.close(fig)
    return path


def _ink(path: pathlib.Path) -> float:
    """Fraction of pixels that are not (near) white."""
    img = np.asarray(Image.open(path).convert("L"), dtype=float)
    return float((img < 240).mean())


def _check_png(path: pathlib.Path) -> None:
    assert path.stat().st_size > 5_000
    assert _ink(path) > 0.02  # something was drawn, not a blank canvas


def _labels(ax) -> list[str]:
    return [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]


def test_angles_on_the_circle_are_the_tokens_angles(s1, tmp_path):
    ax = s1.attn.plot_angles()
    xy = ax.collections[0].get_offsets()
    pos = s1.positions.values
    np.testing.assert_allclose(np.asarray(xy)[:, 1], np.arctan2(pos[..., 1], pos[..., 0]).ravel(), atol=1e-12)
    np.testing.assert_allclose(np.asarray(xy)[:, 0], np.repeat(s1.time.values, 24))
    assert ax.get_xlabel() == "time"  # units "1" are not printed
    _check_png(_save(ax, tmp_path / "angles.png"))
    assert s1.attn.plot().collections  # the default figure of an S^1 trajectory is the angles
    plt.close("all")


def test_sphere_projection_and_far_side(s2, tmp_path):
    frame = animation._view(25.0, -60.0)
    np.testing.assert_allclose(frame @ frame.T, np.eye(3), atol=1e-12)  # right, up, viewer: orthonormal
    assert np.linalg.det(frame) == pytest.approx(1.0)  # right-handed: the view is not mirrored
    x = s2.positions.values[-1]
    xy, colours, sizes = animation._screen(x, animation.token_colours(s2.positions.values[0]), frame, "fixed")
    depth = np.sort(x @ frame[2])
    np.testing.assert_allclose(np.sort(np.hypot(*xy.T) ** 2 + depth**2), np.sort(np.ones(len(x))), atol=1e-12)
    assert np.all(np.diff(np.asarray(sizes)[np.argsort(depth)]) >= 0)  # far tokens first and smaller
    assert np.all((colours[:, 3] == 1.0) == (depth >= 0))  # far side faint
    ax = s2.attn.plot_sphere(1.8)
    assert ax.get_title().endswith("t = 1.8")
    _check_png(_save(ax, tmp_path / "sphere.png"))
    with pytest.raises(InvalidParameterError, match="not a saved time"):
        s2.attn.plot_sphere(1.7)


def test_curves_of_a_trajectory_and_a_sweep(s2, tmp_path):
    axes = s2.attn.plot_curves()
    assert [ax.get_title() for ax in axes] == ["energy_multi", "mean_entropy", "n_clusters"]
    assert [ax.get_ylabel().replace("\n", " ") for ax in axes] == [  # long names, as the figures guide says
        metrics.METRICS[name].long_name for name in ("energy_multi", "mean_entropy", "n_clusters")]
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), s2.attn.energy().values)
    assert not any("[1]" in label for ax in axes for label in _labels(ax))
    counts = axes[2].get_yticks()
    np.testing.assert_array_equal(counts, np.round(counts))  # a cluster count gets integer ticks
    _check_png(_save(axes, tmp_path / "curves.png"))
    sweep = metrics.run_sweep({"n_particles": [4, 6]}, n_seeds=3, t1=0.2, dt=0.05, n_saves=3,
                              metrics=("n_clusters", "energy_multi"))
    axes = sweep.attn.plot()
    ax = axes[0]
    assert len(ax.lines) == 2 and len(ax.collections) == 2  # one line and one ± sd band per n_particles
    np.testing.assert_allclose(ax.lines[1].get_ydata(), sweep.energy_multi.isel(n_particles=1).mean("seed"))
    assert "seed mean ± sd" in ax.get_ylabel().replace("\n", " ")
    _check_png(_save(axes, tmp_path / "sweep.png"))
    with pytest.raises(InvalidParameterError, match="neither a variable"):
        metrics.plot_curves(sweep, ["w1"])


def test_phase_diagram_with_the_equiangular_curve(phase, tmp_path):
    ax = phase.attn.plot()
    curve = ax.lines[0]
    keep = phase.theory_time.values <= float(phase.time[-1])
    assert 0 < keep.sum() < keep.size  # the curve leaves the saved times at large beta: only the inside is drawn
    np.testing.assert_allclose(curve.get_xdata(), phase.beta.values[keep])
    np.testing.assert_allclose(curve.get_ydata(), phase.theory_time.values[keep])
    assert ax.get_xlabel() == "inverse temperature" and ax.get_ylabel() == "time"
    # the figure says where the curve runs off the chart: from the first beta whose t* exceeds T
    b0, t_end = phase.beta.values[~keep].min(), float(phase.time[-1])
    assert np.all(phase.theory_time.values[phase.beta.values >= b0] > t_end)
    _check_png(_save(ax, tmp_path / "phase.png"))
    assert [t.get_text() for t in ax.texts] == [f"t*(β) > T = {t_end:g} for β ≥ {b0:g}"]
    assert not metrics.plot_phase_diagram(phase.sel(beta=phase.beta[keep])).texts  # all inside: no note
    with pytest.raises(InvalidParameterError, match="'statistic'"):
        metrics.plot_phase_diagram(phase, "w1")
    bare = metrics.plot_phase_diagram(phase.drop_vars("theory_time"))  # a model with no equiangular law
    assert not bare.lines and bare.get_legend() is None
    with pytest.raises(InvalidParameterError, match="'ds'.*success"):
        metrics.plot_phase_diagram(phase.drop_vars("success"))


def test_chaos_collapse_and_horizon(chaos, tmp_path):
    ax = chaos.attn.plot()
    s = float(chaos.sigma_star)
    for line, n in zip(ax.lines, chaos.n_particles.values):
        np.testing.assert_allclose(line.get_xdata(), chaos.time.values - np.log(n) / (2 * s))
    _check_png(_save(ax, tmp_path / "collapse.png"))
    growth = ax.lines[-1]  # the linear theory's e^{sigma* s}: slope sigma* on the log axis
    np.testing.assert_allclose(np.diff(np.log(growth.get_ydata())) / np.diff(growth.get_xdata()), s)
    ax = chaos.attn.plot_chaos_horizon()
    slope = float(chaos.slope.isel(delta=0))
    assert f"{slope:.3f}" in ax.get_title()
    fit = next(line for line in ax.lines if line.get_label().startswith("fit: slope"))
    np.testing.assert_allclose(np.diff(fit.get_ydata()) / np.diff(fit.get_xdata()), slope)
    td = chaos.t_delta.isel(delta=0)  # equal seed counts: the line passes through the mean of the seed means
    np.testing.assert_allclose(fit.get_ydata().mean(), float(td.mean("seed").mean()))
    np.testing.assert_allclose(fit.get_xdata(), np.log(chaos.n_particles.values))
    _check_png(_save(ax, tmp_path / "horizon.png"))
    with pytest.raises(InvalidParameterError, match="thresholds"):
        chaos.attn.plot_chaos_horizon(0.05)
    stable = chaos.assign(sigma_star=-0.1)
    with pytest.raises(InvalidParameterError, match="collapse=False"):
        metrics.plot_chaos_collapse(stable)
    plt.close(metrics.plot_chaos_collapse(stable, collapse=False).figure)


@pytest.mark.parametrize("fixture, stride, frames", [("s1", 1, 7), ("s2", 2, 3)])
def test_animation_gif_has_one_frame_per_save(fixture, stride, frames, request, tmp_path):
    ds = request.getfixturevalue(fixture)
    out = ds.attn.animate(tmp_path / "tokens.gif", stride=stride, dpi=40)
    assert out == tmp_path / "tokens.gif" and out.stat().st_size > 2_000
    with Image.open(out) as gif:
        assert gif.n_frames == frames and gif.size == (160, 160)
        gif.seek(frames - 1)
        assert (np.asarray(gif.convert("L")) < 240).mean() > 0.02


def test_animation_format_by_suffix(s2, tmp_path, monkeypatch):
    monkeypatch.setattr(animation.shutil, "which", lambda name: None)  # no ffmpeg on PATH
    with pytest.raises(InvalidParameterError, match="needs ffmpeg on PATH"):
        metrics.animate(s2, tmp_path / "tokens.mp4")
    assert not animation.ffmpeg_available()
    with pytest.raises(InvalidParameterError, match="'path'.*ending in .mp4 .* or .gif"):
        metrics.animate(s2, tmp_path / "tokens.avi")
    assert not list(tmp_path.iterdir())  # nothing written


def test_tokens_need_a_circle_or_a_sphere():
    ds = _trajectory(5, 4, 2, t1=0.2)
    with pytest.raises(InvalidParameterError, match="S\\^3 \\(d = 4\\)"):
        metrics.plot_sphere(ds)
    with pytest.raises(InvalidParameterError, match="'ds'.*positions"):
        metrics.animate(ds.drop_vars("positions"), "x.gif")


def test_axis_labels_leave_out_dimensionless_units():
    assert axis_label({"long_name": "inverse temperature", "units": "1"}) == "inverse temperature"
    assert axis_label({"long_name": "distance", "units": "rad"}) == "distance [rad]"


def test_twelve_curves_repeat_no_colour_and_style():
    """tab10 has ten colours: the 11th and 12th heads are dashed, not the 1st and 2nd again."""
    t = np.linspace(0, 1, 5)
    da = xr.DataArray(np.arange(60.0).reshape(12, 5) % 7 + 1, dims=("head", "time"),
                      coords={"head": np.arange(12), "time": t}, name="mean_entropy")
    axes = metrics.plot_curves(xr.Dataset({"mean_entropy": da}), ["mean_entropy"])
    styles = [(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in axes[0].lines]
    assert len(styles) == 12 and len(set(styles)) == 12
    plt.close("all")


def test_a_log_panel_draws_the_seed_range_not_a_negative_band():
    """Energies over decades with a seed spread larger than the mean: mean - sd < 0 cannot be drawn
    on the log axis (the band fell to the panel's bottom edge); the band is the seeds' range."""
    t = np.linspace(0, 1, 4)
    values = np.array([[0.1, 1.0, 10.0, 100.0], [40.0, 400.0, 4e3, 4e4], [0.2, 2.0, 20.0, 200.0]])  # (seed, time)
    da = xr.DataArray(values, dims=("seed", "time"), coords={"seed": [0, 1, 2], "time": t}, name="energy_multi")
    assert np.all(da.mean("seed") - da.std("seed") < 0)
    ax = metrics.plot_curves(xr.Dataset({"energy_multi": da}), ["energy_multi"])[0]
    assert ax.get_yscale() == "log"
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    np.testing.assert_allclose([band.min(), band.max()], [values.min(), values.max()])
    assert "seed mean, range" in ax.get_ylabel().replace("\n", " ")
    plt.close("all")


def test_the_phase_legend_shows_the_white_curve(phase):
    ax = phase.attn.plot()
    face = matplotlib.colors.to_rgb(ax.get_legend().get_frame().get_facecolor())
    assert max(face) < 0.5  # a dark box: the white dashed t*(beta) sample is visible in it
    plt.close("all")


def test_a_head_geometry_has_its_figure_a_box_per_layer(rng):
    """ds.attn.plot() of a head geometry (no time axis): one panel per variable of GEOMETRY_PANELS, a box per
    layer whose median line is the median of that layer's values (all heads, or all pairs and angles)."""
    from metrics._figures.geometry_plot import GEOMETRY_PANELS

    layers = [particles.AttentionWeights(*rng.standard_normal((3, 3, 4, 12)), Wo=rng.standard_normal((3, 12, 4)),
                                         layer=k) for k in range(2)]
    geo = metrics.head_geometry(layers)
    axes = geo.attn.plot()
    try:
        assert [ax.get_title() for ax in axes] == list(GEOMETRY_PANELS)
        for ax, name in zip(axes, GEOMETRY_PANELS):
            medians = [line.get_ydata()[0] for line in ax.lines if line.get_color() == "C1"]  # boxplot's medians
            np.testing.assert_allclose(medians, [np.median(geo[name].isel(layer=k).values) for k in range(2)])
            assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1"]
        one = metrics.plot_head_geometry(geo, ["cross_ratio"])
        assert len(one) == 1 and one[0].get_title() == "cross_ratio"
    finally:
        plt.close("all")
    with pytest.raises(InvalidParameterError, match=r"'names' parameter of plot_head_geometry lists 'beta_star_reason'"
                                                    r", which is not a numeric variable of the Dataset over layers"):
        metrics.plot_head_geometry(geo, ["beta_star_reason"])
    with pytest.raises(InvalidParameterError, match=r"The 'ds' parameter of plot_head_geometry must be an "
                                                    r"xarray.Dataset with 'layer', 'head'"):
        metrics.plot_head_geometry(xr.Dataset({"x": ("time", [1.0])}))


def test_plot_of_a_dataset_headflow_did_not_make_says_so():
    """ds.attn.plot() of a foreign Dataset without a time dim names what plot() draws and what to do, not
    plot_curves' need of a time dim."""
    foreign = xr.Dataset({"a": ("x", np.arange(3.0))})
    with pytest.raises(InvalidParameterError, match=r"Dataset headflow made .* has none and no time dim .*ds\['a'\]"):
        foreign.attn.plot()


def test_tokens_off_the_sphere_are_not_drawn_on_it(tmp_path):
    """A flat run's tokens are refused by plot_sphere and animate, naming the geometry (the message named
    cluster_labels' x), and ds.attn.plot() draws its curves."""
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax", geometry="flat")
    x0 = particles.sample_uniform(5, d=3, rng=np.random.default_rng(0))
    traj = particles.simulate(x0, model, t1=2.0, dt=0.1, save=particles.SaveAt(ts=[0.0, 1.0, 2.0]))
    ds = metrics.trajectory_to_dataset(traj, model)
    for draw in (ds.attn.plot_sphere, lambda: ds.attn.animate(tmp_path / "flat.gif")):
        with pytest.raises(InvalidParameterError, match=r"off it \(geometry = 'flat'\): their norms differ"):
            draw()
    assert not (tmp_path / "flat.gif").exists()
    with pytest.raises(InvalidParameterError, match=r"no positions on the sphere \(a flat run's are not\)"):
        ds.attn.plot()  # its curves: none stored, and the metrics are the sphere's
    with pytest.raises(InvalidParameterError, match=r"nor, with positions on the sphere, a metric"):
        ds.attn.plot_curves(["n_clusters"])
    unit = ds.assign(positions=ds.positions / np.sqrt((ds.positions**2).sum("component")))  # the fix it gives
    assert unit.attn.plot_sphere() is not None
    plt.close("all")

