"""Figures fit for a paper: every text of every figure helper, and of the animation's frames, lies
inside its figure at a small, the default and a large size; S^2 is math text; markers are sized by
cluster mass; counts are integers."""

import matplotlib
import numpy as np
import pytest

import metrics
import particles
from metrics._figures import animation

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SIZES = [(3.3, 2.6), (5.5, 4.0), (11.0, 7.0)]  # inches per panel: a paper's column, the default, a slide


def _trajectory(n, d, n_saves, t1=3.0, beta=4.0):
    model = particles.MultiHead.scalar([1.0], d=d, beta=beta, kind="softmax")
    x0 = particles.sample_uniform(n, d=d, rng=np.random.default_rng(1))
    traj = particles.simulate(x0, model, t1=t1, dt=0.05, save=particles.SaveAt(ts=np.linspace(0, t1, n_saves)))
    return metrics.trajectory_to_dataset(traj, model)


@pytest.fixture(scope="module")
def datasets():
    model = particles.MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    return {
        "s1": _trajectory(24, 2, 7),
        "s2": _trajectory(100, 3, 6, t1=8.0, beta=9.0),
        "phase": metrics.phase_diagram(np.linspace(0.5, 8.0, 4), n=8, d=8, kind="softmax", t1=6.0, n_systems=4,
                                       chunk=4, n_saves=7, method="rk4", dt=0.5, seed=0),
        "chaos": metrics.chaos_horizon_study(model, n_values=[64, 256], n_seeds=2, t1=8.0, n_saves=41,
                                             delta=(0.3,), l_max=3, dt=0.1, n_boot=20),
        "study": metrics.mean_field_limit_study(particles.MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax"),
                                                lambda y: 1 + 0.5 * y[:, 0], n_values=(16, 64), n_seeds=2,
                                                t1=0.2, n_saves=2, dt=0.05),
        "geometry": metrics.head_geometry([particles.AttentionWeights(
            *np.random.default_rng(2).standard_normal((3, 4, 8, 32)), Wo=np.random.default_rng(3).standard_normal(
                (4, 32, 8)), layer=k) for k in range(6)]),
    }


HELPERS = {  # name: (dataset, panels, draw(ds, axes))
    "plot_curves": ("s2", 2, lambda ds, axes: ds.attn.plot_curves(["energy_multi", "n_clusters"], axes=axes)),
    "plot_angles": ("s1", 1, lambda ds, axes: ds.attn.plot_angles(ax=axes[0])),
    "plot_sphere": ("s2", 1, lambda ds, axes: ds.attn.plot_sphere(ax=axes[0], title="softmax heads, beta = 9")),
    "plot_sphere_s1": ("s1", 1, lambda ds, axes: ds.attn.plot_sphere(ax=axes[0])),
    "plot_phase_diagram": ("phase", 1, lambda ds, axes: ds.attn.plot(ax=axes[0])),
    "plot_chaos_collapse": ("chaos", 1, lambda ds, axes: ds.attn.plot_chaos_collapse(ax=axes[0])),
    "plot_chaos_horizon": ("chaos", 1, lambda ds, axes: ds.attn.plot_chaos_horizon(ax=axes[0])),
    "plot_limit_study": ("study", 1, lambda ds, axes: ds.attn.plot(ax=axes[0])),
    "study_curves": ("study", 1, lambda ds, axes: ds.attn.plot_curves(["w1"], axes=axes)),
    "plot_head_geometry": ("geometry", 4, lambda ds, axes: ds.attn.plot(axes=axes)),
}
DEFAULT = {  # name: draw(ds) on the helper's own figure
    "plot_curves": ("s2", lambda ds: ds.attn.plot_curves()),
    "plot_angles": ("s1", lambda ds: ds.attn.plot_angles()),
    "plot_sphere": ("s2", lambda ds: ds.attn.plot_sphere()),
    "plot_phase_diagram": ("phase", lambda ds: ds.attn.plot()),
    "plot_chaos_collapse": ("chaos", lambda ds: ds.attn.plot_chaos_collapse()),
    "plot_chaos_horizon": ("chaos", lambda ds: ds.attn.plot_chaos_horizon()),
    "plot_limit_study": ("study", lambda ds: ds.attn.plot()),
    "plot_head_geometry": ("geometry", lambda ds: ds.attn.plot()),
}


def _drawn_texts(fig) -> list:
    """The texts a draw of ``fig`` shows: titles, axis labels, the tick labels of the ticks drawn (not
    those matplotlib keeps beyond the view limits), legends, annotations and figure texts."""
    texts = list(fig.texts)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        if not ax.axison:  # axes drawn without axis lines, ticks or labels (the sphere)
            continue
        texts += [ax.xaxis.label, ax.yaxis.label]
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():  # the ticks this draw places
                texts += [label for label in (tick.label1, tick.label2) if label.get_visible()]
            texts.append(axis.offsetText)
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def outside(fig) -> list:
    """The texts of ``fig`` (titles, labels, tick labels, legends) whose bounding box leaves the figure."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    out = []
    for text in _drawn_texts(fig):
        bb = text.get_window_extent(renderer)
        if bb.x0 < box.x0 - 0.5 or bb.y0 < box.y0 - 0.5 or bb.x1 > box.x1 + 0.5 or bb.y1 > box.y1 + 0.5:
            out.append((text.get_text(), tuple(np.round(bb.extents, 1)), tuple(box.extents)))
    return out


@pytest.mark.parametrize("size", SIZES, ids=["small", "default", "large"])
@pytest.mark.parametrize("helper", sorted(HELPERS))
def test_every_text_is_inside_the_figure(datasets, helper, size):
    key, panels, draw = HELPERS[helper]
    fig, axes = plt.subplots(1, panels, figsize=(size[0] * panels, size[1]), layout="constrained", squeeze=False)
    try:
        draw(datasets[key], list(axes[0]))
        assert outside(fig) == []
    finally:
        plt.close(fig)


@pytest.mark.parametrize("helper", sorted(DEFAULT))
def test_every_text_of_the_default_figures_is_inside(datasets, helper):
    key, draw = DEFAULT[helper]
    fig = np.ravel(draw(datasets[key]))[0].figure
    try:
        assert outside(fig) == []
    finally:
        plt.close(fig)


@pytest.mark.parametrize("size", [150 / 80, 320 / 80, 600 / 80], ids=["150px", "320px", "600px"])
def test_every_frame_of_the_animation_fits(datasets, size):
    ds = datasets["s2"]
    fig, frames = animation.sphere_frames(ds, size=size, title="softmax, beta = 9, 100 tokens")
    try:
        for k in frames:
            assert outside(fig) == [], k
    finally:
        plt.close(fig)


def test_sphere_speaks_math_and_sizes_markers_by_cluster_mass(datasets):
    """A collapsed state: the tokens of a cluster share one marker whose area grows with their number,
    seen face on (not on the limb); the title writes S^2 as math text."""
    ds = datasets["s2"]
    ax = ds.attn.plot_sphere()
    try:
        assert "$S^{2}$" in ax.get_title() and "^" not in ax.get_title().replace("$S^{2}$", "")
        sizes = ax.collections[-1].get_sizes()
        labels = metrics.cluster_labels(ds.positions.isel(time=-1).values, eps=animation.MARKER_EPS)
        biggest = np.bincount(labels).max()
        assert biggest > 10 and sizes.max() >= min(10 * sizes.min(), animation._AREA_MAX)
        xy = ax.collections[-1].get_offsets()
        assert np.hypot(*np.asarray(xy).T).min() < 0.5  # the largest cluster faces the viewer
    finally:
        plt.close(ax.figure)
    ax = ds.attn.plot_sphere(marker="fixed", elev=25, azim=-60)
    try:
        assert len(set(np.round(ax.collections[-1].get_sizes(), 6))) <= 2  # front and back only
    finally:
        plt.close(ax.figure)


def test_curve_labels_come_from_long_name_and_units_and_counts_are_integers(datasets):
    ds = datasets["s2"]
    assert ds.attn.n_clusters().dtype.kind == "i"
    axes = ds.attn.plot_curves(["energy_multi", "n_clusters"])
    try:
        assert axes[0].get_ylabel().replace("\n", " ") == metrics.METRICS["energy_multi"].long_name
        assert axes[1].get_ylabel().replace("\n", " ").startswith("number of clusters")
    finally:
        plt.close(axes[0].figure)


def test_animate_takes_title_marker_and_view(datasets, tmp_path):
    out = metrics.animate(datasets["s2"], tmp_path / "tokens.gif", dpi=40, size=3.0, title="softmax, beta = 9",
                          marker="fixed", elev=10.0, azim=30.0)
    assert out.stat().st_size > 0
    fig, frames = animation.sphere_frames(datasets["s2"], title="softmax, beta = 9")
    try:
        next(frames)
        assert fig.axes[0].get_title().startswith("softmax, beta = 9\n100 tokens on $S^{2}$")
    finally:
        plt.close(fig)
