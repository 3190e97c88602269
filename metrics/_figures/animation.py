r"""The tokens themselves: angles over time on :math:`S^1`, a shaded sphere on :math:`S^2`, animations.

The sphere is drawn in orthographic projection from the viewing direction
:math:`v = (\cos e\cos a, \cos e\sin a, \sin e)` (elevation ``elev`` e, azimuth ``azim`` a, in
degrees): a token :math:`x` lands at :math:`(\langle x, r\rangle, \langle x, u\rangle)` on the
screen (``r``, ``u`` the screen's right and up vectors), in front when :math:`\langle x, v\rangle > 0`
(full colour) and behind otherwise (faint). The disk is Lambert-shaded from a light above-left.
Tokens keep one colour each (from their first saved azimuth), so an animation can be followed.
matplotlib is imported on first use only.
"""

from __future__ import annotations

import os
import pathlib
import shutil

import numpy as np
import xarray as xr

from particles.validation import (
    NONE,
    AnyOf,
    Boolean,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    Options,
    declare,
)

from .._data.dataset import time_index
from .._runs.integrity import atomic_write, symlink_problem
from .._runs.progress import progress_bar
from .plotting import AX, label_axes
from .sphere_view import (  # noqa: F401  (MARKER_EPS, _AREA_MAX, _view, _screen: the drawing, tested here)
    _AREA_MAX,
    MARKER_EPS,
    _auto_view,
    _background,
    _fit_title,
    _frame_title,
    _positions,
    _screen,
    _view,
    token_colours,
)

__all__ = ["plot_angles", "plot_sphere", "animate", "MAX_FRAMES", "MAX_GIF_BYTES"]

_DS = Instance(xr.Dataset, test=lambda ds: "positions" in ds.data_vars,
               what="an xarray.Dataset with a 'positions' variable (time, particle, component)",
               hint="Save the positions: metrics.trajectory_to_dataset(simulate(..., save=SaveAt(ts=..., x=True)), "
                    "model), or `headflow simulate` with [run] positions = true (the default).")
_ANGLE = Interval(-360, 360, hint="An angle in degrees.")


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def _time_label(ds: xr.Dataset) -> str:
    from .plotting import axis_label

    return axis_label(ds["time"], "time")


@declare(ds=_DS, ax=AX, log_time=Boolean())
def plot_angles(ds: xr.Dataset, *, ax=None, log_time: bool = False):
    r"""Tokens on :math:`S^1` as angles :math:`\theta_i(t) = \operatorname{atan2}(x_{i,2}, x_{i,1})`
    against time: clusters are the horizontal bands, merges where bands join.

    Parameters
    ----------
    ds : Dataset with ``positions`` (time, particle, component) on :math:`S^1`
    ax : matplotlib Axes, optional
    log_time : bool
        Logarithmic time axis (saves at t <= 0 are left out), for metastable plateaus.

    Returns
    -------
    matplotlib.axes.Axes
    """
    pos = _positions(ds, "plot_angles", dims=(2,))
    t = ds["time"].values
    keep = t > 0 if log_time else np.ones(t.shape, bool)
    if ax is None:
        _, ax = _pyplot().subplots(figsize=(7, 4), layout="constrained")
    theta = np.arctan2(pos[keep, :, 1], pos[keep, :, 0])
    colours = token_colours(pos[0])
    n = pos.shape[1]
    ax.scatter(np.repeat(t[keep], n), theta.ravel(), s=2, c=np.tile(colours, (int(keep.sum()), 1)), lw=0)
    ax.set(ylim=(-np.pi, np.pi), xscale="log" if log_time else "linear")
    label_axes(ax, title=f"{n} tokens on $S^1$", xlabel=_time_label(ds), ylabel="token angle θ_i [rad]")
    return ax


_VIEW = AnyOf(NONE, _ANGLE)
_TITLE = AnyOf(NONE, Instance(str, what="a title line (str)"))
_MARKER = Options("mass", "fixed")


@declare(ds=_DS, time=AnyOf(NONE, Interval(None, None)), ax=AX, elev=_VIEW, azim=_VIEW, title=_TITLE, marker=_MARKER)
def plot_sphere(ds: xr.Dataset, time: float | None = None, *, ax=None, elev: float | None = None,
                azim: float | None = None, title: str | None = None, marker: str = "mass"):
    r"""The tokens at one saved time: on the unit circle (:math:`S^1`) or on a shaded sphere
    (:math:`S^2`, orthographic view from elevation ``elev`` and azimuth ``azim`` in degrees;
    tokens on the far side are faint).

    Parameters
    ----------
    ds : Dataset with ``positions`` (time, particle, component), d = 2 or 3
    time : float, optional
        A saved time, selected by value (default: the last save).
    ax : matplotlib Axes, optional
    elev, azim : float, optional
        Viewing direction in degrees (default: facing the tokens' mean direction at the last save
        when they have one, else 25 and -60).
    title : str, optional
        A first title line (e.g. the model); the second says the tokens, the sphere and the time.
    marker : {"mass", "fixed"}
        ``"mass"``: tokens within :data:`MARKER_EPS` of each other share a marker whose area is
        proportional to their number (a collapsed cluster is one large dot); ``"fixed"``: one size.

    Returns
    -------
    matplotlib.axes.Axes
    """
    pos = _positions(ds, "plot_sphere")
    k = pos.shape[0] - 1 if time is None else time_index(ds, time, "plot_sphere")
    own = ax is None
    if own:
        _, ax = _pyplot().subplots(figsize=(4.2, 4.2))
    frame = _view(*_auto_view(pos, elev, azim))
    _background(ax, pos.shape[-1], frame)
    xy, c, s = _screen(pos[k], token_colours(pos[0]), frame, marker)
    ax.scatter(xy[:, 0], xy[:, 1], s=s, c=c, lw=0.3, edgecolors="k", zorder=2)
    text = _frame_title(ds, k, title)
    _fit_title(ax.figure, ax, text) if own else label_axes(ax, title=text)
    return ax


def _writer(path: pathlib.Path, fps: int):
    """Pillow for .gif; ffmpeg for .mp4 (an error naming the fix if it is not on PATH)."""
    from matplotlib import animation

    if path.suffix.lower() == ".gif":  # PillowWriter's own finish, with the mark (a rerun replaces only such files)
        gif = animation.PillowWriter(fps=fps)
        gif.finish = lambda: gif._frames[0].save(gif.outfile, save_all=True, append_images=gif._frames[1:],
                                                 duration=int(1000 / fps), loop=0, comment=MARK)
        return gif
    if shutil.which("ffmpeg") is None or not animation.writers.is_available("ffmpeg"):
        raise InvalidParameterError(
            f"The 'path' parameter of animate asks for an MP4 ({path.name}), which needs ffmpeg on PATH, and there is "
            "none: install ffmpeg (e.g. `apt install ffmpeg` or `conda install ffmpeg`), or write a GIF through Pillow "
            "(a path ending in .gif).")
    return animation.FFMpegWriter(fps=fps, codec="h264", extra_args=["-pix_fmt", "yuv420p"],
                                  metadata={"comment": MARK.decode()})


def ffmpeg_available() -> bool:
    """Whether :func:`animate` can write an MP4 (ffmpeg on PATH)."""
    from matplotlib import animation

    return shutil.which("ffmpeg") is not None and animation.writers.is_available("ffmpeg")


_PATH = Instance((str, os.PathLike), test=lambda p: pathlib.Path(p).suffix.lower() in (".mp4", ".gif"),
                 what="a file path ending in .mp4 (needs ffmpeg) or .gif (Pillow)", bad=("tokens.avi",),
                 hint="Pick the suffix: '.mp4' if ffmpeg is on PATH, else '.gif'.")


def sphere_frames(ds: xr.Dataset, *, size: float = 4.0, stride: int = 1, elev=None, azim=None, title=None,
                  marker: str = "mass"):
    """The figure of :func:`animate` and an iterator that draws its frames one after the other (yielding
    each frame's save index); the title's font and the axes are sized once, for the longest title."""
    pos = _positions(ds, "animate")
    plt = _pyplot()
    fig = plt.figure(figsize=(size, size))
    ax = fig.add_axes([0, 0, 1, 1])
    frame = _view(*_auto_view(pos, elev, azim))
    _background(ax, pos.shape[-1], frame)
    colours = token_colours(pos[0])
    dots = ax.scatter(np.zeros(pos.shape[1]), np.zeros(pos.shape[1]), lw=0.3, edgecolors="k", zorder=2)
    ks = range(0, pos.shape[0], stride)
    texts = [_frame_title(ds, k, title) for k in ks]
    heading = _fit_title(fig, ax, texts[0], longest=max(texts, key=len))

    def frames():
        for k, text in zip(ks, texts):
            xy, c, s = _screen(pos[k], colours, frame, marker)
            dots.set_offsets(xy)
            dots.set_facecolors(c)
            dots.set_sizes(s)
            heading.set_text(text)
            yield k

    return fig, frames()


#: the most frames an animation draws (about 7 minutes at 12 fps); raise ``stride`` beyond
MAX_FRAMES = 5000
#: the most bytes of frames a GIF may hold (Pillow keeps every frame in memory until the end)
MAX_GIF_BYTES = 2**31


#: the comment animate writes into its GIFs (and MP4 metadata): only a file carrying it is replaced, not a
#: user's own GIF or MP4
MARK = b"headflow animation"


def _output_problem(path: pathlib.Path) -> str:
    """Why an animation cannot be written at ``path`` (checked before any frame is drawn), or ''."""
    from particles.extend import unwritable

    if path.is_symlink():  # the library's and the command line's one link rule
        return symlink_problem(path)
    if path.is_dir():
        return f"{str(path)!r} is a folder; pass a file path in it, e.g. {str(path / ('tokens' + path.suffix))!r}"
    if path.is_file() and MARK not in path.read_bytes():  # (a GIF's comment extension, an MP4's metadata box)
        return (f"{str(path)!r} exists and is not an animation headflow wrote; animate replaces only its own "
                "animations (they carry its mark), never a file of yours. Move the file away or pass another path")
    folder = path.parent
    if not folder.exists():
        anchor = next((p for p in folder.parents if p.exists()), pathlib.Path("."))
        if not anchor.is_dir():
            return f"{str(path)!r} passes through {str(anchor)!r}, which is a file, not a folder"
        return f"the folder {str(folder)!r} does not exist; create it first (pathlib.Path(...).mkdir(parents=True))"
    if not folder.is_dir():
        return f"{str(path)!r} passes through {str(folder)!r}, which is a file, not a folder"
    exc = unwritable(folder)
    return "" if exc is None else f"the folder {str(folder)!r} is not writable ({exc.strerror or exc})"


def _frame_budget(n_times: int, stride: int, gif: bool, size: float, dpi: int) -> int:
    """The number of frames, refused beyond :data:`MAX_FRAMES` (or :data:`MAX_GIF_BYTES` for a GIF)."""
    n_frames = -(-n_times // stride)
    if n_frames > MAX_FRAMES:
        raise InvalidParameterError(
            f"The 'stride' parameter of animate: {n_times} saves at stride {stride} make {n_frames} frames, more than "
            f"{MAX_FRAMES}. Pass stride={-(-n_times // MAX_FRAMES)} or more (or select times: ds.isel(time=...)).")
    n_bytes = n_frames * 4 * round(size * dpi) ** 2
    if gif and n_bytes > MAX_GIF_BYTES:
        raise InvalidParameterError(
            f"The 'dpi' parameter of animate: {n_frames} GIF frames of {round(size * dpi)} pixels square hold "
            f"{n_bytes / 1e9:.3g} GB in memory until the file is written (the limit is {MAX_GIF_BYTES / 1e9:.3g} GB). "
            "Lower dpi or size, raise stride, or write an MP4 (frames are streamed to ffmpeg).")
    return n_frames


@declare(ds=_DS, path=_PATH,
         fps=Integer(1, 120), stride=Integer(1), dpi=Integer(20, 600), size=Interval(1, 20),
         elev=_VIEW, azim=_VIEW, title=_TITLE, marker=_MARKER, progress=AnyOf(NONE, Boolean()))
def animate(ds: xr.Dataset, path, *, fps: int = 12, stride: int = 1, dpi: int = 80, size: float = 4.0,
            elev: float | None = None, azim: float | None = None, title: str | None = None,
            marker: str = "mass", progress: bool | None = None) -> pathlib.Path:
    r"""Write an animation of the tokens, one frame per saved time (every ``stride``-th), as
    :func:`plot_sphere` draws them: on the circle (:math:`S^1`) or on the shaded sphere (:math:`S^2`).

    The format follows the suffix of ``path``: ``.mp4`` through ffmpeg (an error if ffmpeg is
    not on PATH: :func:`ffmpeg_available` says), ``.gif`` through Pillow.

    Parameters
    ----------
    ds : Dataset with ``positions`` (time, particle, component), d = 2 or 3
    path : str or path-like
    fps : int
        Frames per second.
    stride : int
        Draw every ``stride``-th save.
    dpi, size : int, float
        Resolution and the figure's side in inches (the frame is ``size * dpi`` pixels square).
    elev, azim : float, optional
        Viewing direction on :math:`S^2`, in degrees (default: facing the tokens' mean direction at
        the last save when they have one, else 25 and -60).
    title : str, optional
        A first title line (e.g. the model); the second gives the tokens, the sphere and the time.
    marker : {"mass", "fixed"}
        Marker areas proportional to the tokens of each cluster (:func:`plot_sphere`), or one size.
    progress : bool, optional
        A tqdm bar over the frames: None (default) shows it once drawing has taken 2 s, True at
        once, False never.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    InvalidParameterError
        Before any frame is drawn: NaN or inf positions, an output path that is a folder, under a
        file, in a missing or read-only folder, more than :data:`MAX_FRAMES` frames, or a GIF
        whose frames would hold more than :data:`MAX_GIF_BYTES`.

    Examples
    --------
    >>> import numpy as np, particles, metrics, tempfile, pathlib
    >>> model = particles.MultiHead.scalar([1.0], d=3, beta=2.0, kind="softmax")
    >>> x0 = particles.sample_uniform(20, d=3, rng=np.random.default_rng(0))
    >>> traj = particles.simulate(x0, model, t1=1.0, dt=0.1, save=particles.SaveAt(ts=np.linspace(0, 1, 4)))
    >>> ds = metrics.trajectory_to_dataset(traj, model)
    >>> out = metrics.animate(ds, pathlib.Path(tempfile.mkdtemp()) / "tokens.gif", dpi=40)
    >>> out.suffix, out.stat().st_size > 0
    ('.gif', True)
    """
    _positions(ds, "animate")  # finite tokens on S^1 or S^2, before the path is touched or a frame drawn
    path = pathlib.Path(path)
    problem = _output_problem(path)
    if problem:
        raise InvalidParameterError(f"The 'path' parameter of animate: {problem}. Nothing was drawn.")
    n_frames = _frame_budget(ds.sizes["time"], stride, path.suffix.lower() == ".gif", size, dpi)
    writer = _writer(path, fps)
    fig, frames = sphere_frames(ds, size=size, stride=stride, elev=elev, azim=azim, title=title, marker=marker)
    bar = progress_bar(progress, total=n_frames, desc="animation", unit="frame")

    def write(tmp):  # (to a part file beside it, flushed and renamed: a full disk never leaves half an animation)
        with writer.saving(fig, str(tmp), dpi):
            for _ in frames:
                bar is None or bar.update(1)
                writer.grab_frame()

    try:
        atomic_write(path, write, keep_suffix=True)
    finally:
        bar is None or bar.close()
        _pyplot().close(fig)
    return path
