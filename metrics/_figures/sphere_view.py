r"""Drawing tokens on the sphere (module docstring of :mod:`metrics._figures.animation`): the view, the
shaded disk, the tokens' screen positions, colours and marker areas, and a title that fits."""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles.validation import InvalidParameterError

_LIGHT = np.array([-0.45, 0.6, 0.66])  # screen coordinates (right, up, towards the viewer)


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def token_colours(pos0: np.ndarray):
    """One RGBA colour per token from its azimuth at the first save (a cyclic, saturated colour map)."""
    from matplotlib import colormaps

    phi = np.arctan2(pos0[:, 1], pos0[:, 0])
    return colormaps["hsv"]((phi + np.pi) / (2 * np.pi))


def _view(elev: float, azim: float) -> np.ndarray:
    """Rows: the screen's right, up and towards-the-viewer unit vectors."""
    e, a = np.radians(elev), np.radians(azim)
    v = np.array([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)])
    right = np.array([-np.sin(a), np.cos(a), 0.0])
    return np.stack([right, np.cross(v, right), v])


def _shaded_disk(ax, resolution: int = 256) -> None:
    """The unit sphere seen from anywhere: a Lambert-shaded disk (light above-left) with its rim."""
    s = np.linspace(-1, 1, resolution)
    u, w = np.meshgrid(s, s)
    z2 = 1 - u**2 - w**2
    normal = np.stack([u, w, np.sqrt(np.clip(z2, 0, None))], axis=-1)
    light = _LIGHT / np.linalg.norm(_LIGHT)
    shade = 0.35 + 0.6 * np.clip(normal @ light, 0, None)
    ax.imshow(np.ma.masked_where(z2 < 0, shade), cmap="Greys_r", vmin=0, vmax=1.2, extent=(-1, 1, -1, 1),
              origin="lower", interpolation="bilinear", zorder=0)
    ax.add_patch(_pyplot().Circle((0, 0), 1, fill=False, lw=0.8, color="0.3"))


def _great_circles(ax, frame: np.ndarray) -> None:
    """The equator and the meridian facing the viewer, faint, dashed on the far side."""
    s = np.linspace(0, 2 * np.pi, 241)
    for curve in (np.stack([np.cos(s), np.sin(s), 0 * s], 1), np.stack([np.cos(s), 0 * s, np.sin(s)], 1)):
        p = curve @ frame.T
        front = np.where(p[:, 2] >= 0, p[:, 1], np.nan)
        back = np.where(p[:, 2] < 0, p[:, 1], np.nan)
        ax.plot(p[:, 0], front, lw=0.5, color="0.45", zorder=1)
        ax.plot(p[:, 0], back, lw=0.4, ls=":", color="0.55", zorder=1)


def _background(ax, d: int, frame) -> None:
    if d == 3:
        _shaded_disk(ax)
        _great_circles(ax, frame)
    else:
        ax.add_patch(_pyplot().Circle((0, 0), 1, fill=False, lw=1.0, color="0.4"))
    ax.set(xlim=(-1.08, 1.08), ylim=(-1.08, 1.08), aspect="equal")
    ax.set_axis_off()


#: geodesic distance (rad) within which tokens are one marker whose area grows with their number
MARKER_EPS = 0.05
#: marker area (points^2) of a lone token in front, behind, and the largest area of a cluster's marker
_AREA, _AREA_BEHIND, _AREA_MAX = 18.0, 8.0, 2500.0


def _masses(x: np.ndarray, marker: str) -> np.ndarray:
    """Tokens in each token's cluster (``marker="mass"``: geodesic eps :data:`MARKER_EPS`), else ones."""
    if marker != "mass":
        return np.ones(len(x))
    from .._observables.clustering import cluster_labels

    labels = cluster_labels(x, eps=MARKER_EPS)
    return np.bincount(labels)[labels].astype(float)


def _screen(x: np.ndarray, colours: np.ndarray, frame, marker: str = "mass") -> tuple:
    """Screen positions, colours and marker areas of tokens x (n, d), far ones first (drawn underneath);
    with ``marker="mass"`` a marker's area grows with the number of tokens of its cluster."""
    mass = _masses(x, marker)
    if x.shape[1] == 2:
        return x, colours, np.minimum(16.0 * mass, _AREA_MAX)
    p = x @ frame.T
    order = np.argsort(p[:, 2])
    c = colours[order].copy()
    front = p[order, 2] >= 0
    c[:, 3] = np.where(front, 1.0, 0.25)
    return p[order, :2], c, np.minimum(np.where(front, _AREA, _AREA_BEHIND) * mass[order], _AREA_MAX)


def _frame_title(ds, k: int, title: str | None = None) -> str:
    n, d = ds.sizes["particle"], ds.sizes["component"]
    line = f"{n} tokens on $S^{{{d - 1}}}$, t = {float(ds['time'][k]):.4g}"
    return line if not title else f"{title}\n{line}"


def _auto_view(pos: np.ndarray, elev, azim) -> tuple[float, float]:
    """The viewing angles: the given ones, else facing the tokens' mean direction at the last save
    (a collapsed state is seen face on, not on the limb), else elevation 25, azimuth -60."""
    if elev is not None and azim is not None:
        return float(elev), float(azim)
    m = pos[-1].mean(axis=0)
    if pos.shape[-1] != 3 or np.linalg.norm(m) < 0.2:
        return (25.0 if elev is None else float(elev)), (-60.0 if azim is None else float(azim))
    m = m / np.linalg.norm(m)
    auto_elev, auto_azim = np.degrees(np.arcsin(np.clip(m[2], -1, 1))), np.degrees(np.arctan2(m[1], m[0]))
    return (auto_elev if elev is None else float(elev)), (auto_azim if azim is None else float(azim))


def _fit_title(fig, ax, text: str, longest: str | None = None):
    """Set the title at the largest font size (<= 9 pt) at which its longest line fits the figure's
    width, and place the axes below it (the figure holds the sphere alone)."""
    width, height = (v * 72.0 for v in fig.get_size_inches())
    lines = (longest or text).split("\n")
    chars = max(len(line.replace("$", "").replace("{", "").replace("}", "")) for line in lines)
    size = float(np.clip(0.92 * width / (0.6 * max(chars, 1)), 4.0, 9.0))
    top = (len(lines) * 1.3 * size + 8.0) / height
    margin = 0.02
    ax.set_position([margin, margin, 1 - 2 * margin, max(0.3, 1 - top - 2 * margin)])
    return ax.set_title(text, fontsize=size)


def _positions(ds: xr.Dataset, caller: str, dims=(2, 3)) -> np.ndarray:
    pos = ds["positions"].transpose("time", "particle", "component").values
    bad = np.flatnonzero(~np.isfinite(pos).all(axis=(1, 2)))
    if bad.size == len(pos):
        raise InvalidParameterError(f"The 'ds' parameter of {caller} has NaN or inf positions at every saved time: "
                                    "the run failed from the start (see ds.attrs['status']); there is nothing to draw.")
    if bad.size:
        times = ", ".join(f"{float(t):g}" for t in ds["time"].values[bad[:5]]) + (", ..." if bad.size > 5 else "")
        raise InvalidParameterError(
            f"The 'ds' parameter of {caller} has NaN or inf positions at {bad.size} saved time(s) ({times}; the run "
            f"failed there, see ds.attrs['status']): nothing is drawn from them. Select the finite saves, e.g. "
            f"ds.isel(time=slice(0, {int(bad[0])})).")
    d = pos.shape[-1]
    off = float(np.max(np.abs(np.linalg.norm(pos, axis=-1) - 1.0)))
    if d in dims and off > 1e-6:  # (a flat run: its tokens are not on a sphere to draw)
        geometry = f" (geometry = {ds.attrs['geometry']!r})" if "geometry" in ds.attrs else ""
        raise InvalidParameterError(
            f"{caller} draws tokens on the unit sphere S^{d - 1}; this run's tokens are off it{geometry}: their norms "
            f"differ from 1 by up to {off:.2g}. Plot its metrics against time with ds.attn.plot_curves(), or draw "
            "the directions of a copy: ds.assign(positions=ds.positions / np.sqrt((ds.positions ** 2).sum("
            "'component'))).")
    if d not in dims:
        raise InvalidParameterError(
            f"{caller} draws tokens on " + " or ".join(f"S^{k - 1}" for k in dims) + f"; the dataset's tokens are on "
            f"S^{d - 1} (d = {d}). Project them first (e.g. onto two or three coordinates, normalised), or plot "
            "metrics against time with metrics.plot_curves.")
    return pos
