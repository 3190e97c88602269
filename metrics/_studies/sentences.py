r"""The flow of a real sentence under a trained model's heads, as an ``xr.Dataset``.

From text to the sphere (BERT, e.g. MiniLM):

1. :func:`tokenize`: ids from the model's ``tokenizer.json`` (``tokenizers``, no torch).
2. :func:`bert_embeddings`: the model's own embedding sum
   :math:`e_i = E_{tok}[id_i] + E_{pos}[i] + E_{type}[type_i]`.
3. :func:`particles.norm_sphere`: the embedding LayerNorm's core, :math:`u_i = n(e_i)/\sqrt d`
   on :math:`S^{d-1}` (its γ and β are folded into layer 0 by
   ``load_attention(..., fold_norm=True)``).

:func:`sentence_flow` then runs the softmax heads on the sphere with β = d, the temperature at
which :math:`d\langle u_i, M_h u_j\rangle` are the layer's logits (biases dropped: see
:mod:`particles._model.pretrained`). Time is measured in layers: one unit moves a token by the
layer's head outputs relative to the token's norm. One layer runs as a
:class:`~particles.MultiHead` (RK4); a stack of L layers runs as one
:class:`~particles.TimeDependent` field whose weights are layer :math:`\lfloor t/\tau\rfloor` on
:math:`[k\tau, (k+1)\tau)`, integrated by Euler steps that land on every layer boundary (a
Runge–Kutta stage at a boundary would read the next layer's weights), which is exactly the
composition of the layers' Euler flows.

Each layer is measured against the network on the sentence (:mod:`metrics._data.fidelity`):
``network_cosine`` and ``network_norm_ratio`` (layer, bias) compare the sphere model's velocity
(``bias="drop"``) and the exact flat model's (``bias="augment"``) with the layer's own attention
output, projected on the sphere, on the flow's tokens at the start of each layer. The ``time``
coordinate is in layers (its ``convention`` attr).

Saved along the trajectory (diagnostics of :func:`particles.diagnose` under the layer acting at
t): ``log_energy`` (head), ``energy_multi``, ``entropy`` and ``mean_entropy`` (attention entropy),
``rd_margin`` and ``rd_margin_min`` (radial dominance, Condition 8), ``energy_rate``, ``kinetic``,
``rate_residual`` (the Theorem 11 residual) and ``rate_residual_relative`` (over
:math:`\max(|dE/dt|, \frac1n\sum\|\dot x\|^2)`), ``n_clusters`` and ``cluster_label``
(ε-connected components), ``mean_cosine`` (mean :math:`\langle x_i, x_j\rangle`, i ≠ j), and
``layer_index``. The tokens' strings are the ``token`` coordinate.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from particles import AttentionWeights, SaveAt, TimeDependent, diagnose, simulate
from particles.validation import (
    NONE,
    AnyOf,
    Boolean,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    Points,
    SequenceOf,
    check_param,
    declare,
)

from .._data.dataset import KIND_ATTR, trajectory_to_dataset
from .._data.fidelity import network_fidelity, sentence_points
from .._data.heads import LAYERS, TITLE
from .._observables.clustering import cluster_labels
from .._runs.progress import progress_bar
from .model_files import bert_embeddings, packaged_model_zip, read_model_zip, tokenize  # noqa: F401 (re-exported)

__all__ = ["sentence_flow", "tokenize", "bert_embeddings", "read_model_zip", "packaged_model_zip", "FLOW_DIAGNOSTICS"]

#: the diagnostics of particles.diagnose that sentence_flow saves
FLOW_DIAGNOSTICS = ("log_energy", "energy_multi", "energy_rate", "kinetic", "rate_residual", "rd_margin",
                    "rd_margin_min", "entropy")


_POSITIVE = Interval(0, None, closed="neither")


#: the most steps a sentence flow takes unless ``max_steps`` allows more: hours for a BERT-size layer
#: (12 heads, d = 384: a tenth of a second per RK4 step and more on one core), 5000 layers at dt = 0.05
MAX_FLOW_STEPS = 100_000
#: the most bytes a sentence flow's saved states may hold
MAX_FLOW_SAVE_BYTES = 2**31


def _flow_budget(T: float, step: float, n_times: int, shape: tuple, max_steps: int, caller: str,
                 by_saves: bool = False) -> int:
    """The step count of a flow, refused (naming the arguments to change) beyond ``max_steps`` or
    when its saves would hold more than :data:`MAX_FLOW_SAVE_BYTES`; ``by_saves``: the step is set by
    the save interval (shorter than dt)."""
    n_steps = round(T / step)
    if n_steps > max_steps:
        name, fix = ("saves_per_layer", "Lower saves_per_layer") if by_saves else ("dt", "Raise dt")
        raise InvalidParameterError(
            f"The {name!r} parameter of {caller}: the flow to t = {T:.6g} with steps of {step:.3g} takes "
            f"{n_steps:.3g} steps, more than max_steps = {max_steps}. {fix}, shorten t1 (or layer_time), or pass a "
            "larger max_steps if the run is meant to be that long.")
    n, d, H = shape
    n_bytes = 8 * n_times * (n * d + n * H + n + 4 * H + 16)
    if n_bytes > MAX_FLOW_SAVE_BYTES:
        raise InvalidParameterError(
            f"The 'saves_per_layer' parameter of {caller}: {n_times} saved states of {n} tokens in d = {d} would hold "
            f"{n_bytes / 1e9:.3g} GB (the limit is {MAX_FLOW_SAVE_BYTES / 1e9:.3g} GB). Lower saves_per_layer, or "
            "shorten t1 (or layer_time).")
    return n_steps


_TOKENS = AnyOf(NONE, SequenceOf(Instance(str, what="a str"), min_len=1,
                                 hint="Pass the token strings as a list, e.g. tokenize(...)[1]."))


@declare(layers=LAYERS, x0=Points(min_n=2, on_sphere=False),  # (its width, then its norms: sentence_points)
         tokens=_TOKENS, layer_time=_POSITIVE, t1=AnyOf(NONE, _POSITIVE), dt=_POSITIVE, saves_per_layer=Integer(1),
         eps=Interval(0, np.pi, closed="right"), beta=AnyOf(NONE, Interval(0, None)), max_steps=Integer(1),
         progress=AnyOf(NONE, Boolean()), title=TITLE)
def sentence_flow(layers, x0, *, tokens=None, layer_time: float = 1.0, t1: float | None = None, dt: float = 0.05,
                  saves_per_layer: int = 4, eps: float = 0.5, beta: float | None = None,
                  title: str = "headflow sentence flow", max_steps: int = MAX_FLOW_STEPS,
                  progress: bool | None = None) -> xr.Dataset:
    """Run tokens under one layer's heads or a stack of layers and save the diagnostics
    (module docstring).

    Parameters
    ----------
    layers : AttentionWeights or sequence of AttentionWeights
        One layer (a MultiHead, RK4, until ``t1``) or a stack (TimeDependent, Euler, until
        ``len(layers) * layer_time``).
    x0 : ndarray of shape (n, d), unit rows
        E.g. ``particles.norm_sphere(bert_embeddings(...))``.
    tokens : sequence of str, optional
        Token strings (the ``token`` coordinate).
    layer_time : float > 0
        Time each layer of a stack acts (the unit of saves for one layer).
    t1 : float, optional
        Final time of a one-layer run (default ``layer_time``); not for stacks.
    dt : float > 0
        Step; rounded down so that every layer and save interval holds whole steps.
    saves_per_layer : int >= 1
        Saved states per ``layer_time``.
    eps : float in (0, pi]
        Geodesic linking distance of the clusters.
    beta : float, optional
        Inverse temperature (default d, the norm sphere's; module docstring).
    max_steps : int
        The run is refused before it starts when it would take more steps (default
        :data:`MAX_FLOW_STEPS`), or when its saves would hold more than :data:`MAX_FLOW_SAVE_BYTES`.
    progress : bool, optional
        A tqdm bar over the saves: None (default) shows it once the run has taken 2 s (the rule of
        every study and sweep), True at once, False never.

    Returns
    -------
    xr.Dataset
        :func:`metrics.trajectory_to_dataset` layout (time, particle, component, head).
    """
    caller = "sentence_flow"
    stack = not isinstance(layers, AttentionWeights)
    ws = list(layers) if stack else [layers]
    d = ws[0].d
    if any(w.d != d for w in ws):
        raise InvalidParameterError(f"layers of {caller} must share the width d = {d}.")
    x0 = sentence_points(x0, d, caller)
    tau = check_param(layer_time, "layer_time", caller, low=0.0, low_open=True)
    if stack and t1 is not None:
        raise InvalidParameterError(f"t1 = {t1:g} of {caller} is for one layer; a stack of {len(ws)} layers runs "
                                    f"len(layers) * layer_time = {len(ws) * tau:g}: leave t1 out (layer_time sets each "
                                    "layer's time), or pass one layer (layers[k]) to run it for t1.")
    T = len(ws) * tau if stack else check_param(tau if t1 is None else t1, "t1", caller, low=0.0, low_open=True)
    n_saves = check_param(saves_per_layer, "saves_per_layer", caller, low=1, integer=True)
    eps = check_param(eps, "eps", caller, low=0.0, high=np.pi, low_open=True)
    beta = float(d) if beta is None else check_param(beta, "beta", caller, low=0.0)
    dt = check_param(dt, "dt", caller, low=0.0, low_open=True)
    if dt > T:
        raise InvalidParameterError(f"dt = {dt:g} of {caller} is longer than the whole flow (t1 = {T:g}): pass "
                                    f"dt <= {T:g} (e.g. dt = {T / 20:g}) or a later t1.")
    per = max(1, math.ceil(tau / n_saves / dt - 1e-9))
    step = tau / n_saves / per  # whole steps per save interval, so per layer
    n_times = int(round(T / tau * n_saves)) + 1
    n_steps = _flow_budget(T, step, n_times, (x0.shape[0], d, ws[0].n_heads), max_steps, caller, tau / n_saves < dt)
    if tokens is not None and len(tokens) != x0.shape[0]:
        raise InvalidParameterError(f"tokens of {caller} must name the {x0.shape[0]} tokens; got {len(tokens)}.")
    models = [_heads(w, beta) for w in ws]

    def layer_at(t):
        # layer k acts on [k tau, (k+1) tau); the 1e-6 absorbs round-off in the landed times
        return min(int(math.floor(t / tau + 1e-6)), len(models) - 1)

    save_fn = _flow_saver(models, layer_at, eps)

    if stack:
        field = TimeDependent(lambda t: (models[layer_at(t)].M, models[layer_at(t)].W), models[0])
        method = "euler"
    else:
        field, method = models[0], "rk4"
    ts = np.linspace(0.0, T, n_times)
    # a d x d matmul per head and token block: BLAS threads only contend on small n (head_geometry)
    bar = progress_bar(progress, total=n_times, desc="sentence flow", unit="save")
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            traj = simulate(x0, field, t1=T, dt=step, method=method, save=SaveAt(ts=ts, fn=_counted(save_fn, bar)),
                            max_steps=n_steps + 8, progress=False)
    finally:
        if bar is not None:
            bar.close()
    w0 = ws[0]
    config = {"n_layers": len(ws), "stack": int(stack), "layer_time": tau, "t1": T, "dt": step, "method": method,
              "beta": beta, "kind": "softmax", "geometry": "sphere", "bias": "drop", "eps": eps,
              "architecture": w0.architecture, "norm": w0.norm, "layers": " ".join(str(w.layer) for w in ws),
              "n_heads": w0.n_heads, "d_head": w0.d_head, "d": d, "n_tokens": x0.shape[0]}
    ds = trajectory_to_dataset(traj, title=title, config=config, attrs=config)
    ds = _label_flow(ds, tokens, tau)
    # each layer against the network's own attention output, on the flow's tokens as the layer starts
    starts = [traj.x[int(np.argmin(np.abs(ts - k * tau)))] for k in range(len(ws))]
    return ds.merge(network_fidelity(ws, starts, beta))


def _heads(w: AttentionWeights, beta: float):
    """The layer's softmax MultiHead; a layer whose M_h or W_h overflow float64 is refused naming it."""
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(w.score_matrices()).all() and np.isfinite(w.value_matrices()).all()
    if not finite:
        big = max(float(np.abs(getattr(w, f)).max()) for f in ("Wq", "Wk", "Wv", "Wo"))
        raise InvalidParameterError(
            f"The 'layers' parameter of sentence_flow: layer {w.layer}'s weights reach {big:.3g}, so its score or "
            "value matrices (products of two weights) exceed float64. These are not a trained model's weights: "
            "check how they were loaded (a dtype or scale error).")
    return w.to_multihead(beta=beta, kind="softmax", summation="exact")


def _counted(save_fn, bar):
    """``save_fn`` that also advances the progress bar (if any) by one save."""
    if bar is None:
        return save_fn

    def counted(t, x):
        out = save_fn(t, x)
        bar.update(1)
        return out

    return counted


def _flow_saver(models, layer_at, eps):
    """The save function of a sentence flow: the diagnostics of the acting layer, the clusters and the
    mean cosine of the tokens."""

    def save_fn(t, x):
        k = layer_at(t)
        out = diagnose(models[k], x, include=FLOW_DIAGNOSTICS)
        out["mean_entropy"] = out["entropy"].mean(axis=1)
        scale = max(abs(out["energy_rate"]), out["kinetic"], np.finfo(float).tiny)
        out["rate_residual_relative"] = out["rate_residual"] / scale if np.isfinite(scale) else np.nan
        labels = cluster_labels(x, eps=eps)
        out["cluster_label"], out["n_clusters"] = labels, labels.max() + 1
        G = x @ x.T
        out["mean_cosine"] = (G.sum() - np.trace(G)) / (len(x) * (len(x) - 1))
        out["layer_index"] = k
        return out

    return save_fn


#: the sentence flow's own variables: long name and trailing dims
_FLOW_VARIABLES = {"mean_entropy": ("mean attention entropy over tokens (nats)", ("head",)),
                   "rate_residual_relative": ("Theorem 11 residual over max(|dE/dt|, kinetic)", ()),
                   "cluster_label": ("cluster of each token (eps-connected components)", ("particle",)),
                   "n_clusters": ("number of clusters (eps-connected components)", ()),
                   "mean_cosine": ("mean pairwise cosine <x_i, x_j>, i != j", ()),
                   "layer_index": ("layer whose heads act at this time", ())}


def _label_flow(ds: xr.Dataset, tokens, tau: float) -> xr.Dataset:
    """Name the flow's own variables, its time (in layers) and the tokens (a ``token`` coordinate when given)."""
    ds.attrs[KIND_ATTR] = "sentence_flow"
    ds["time"].attrs.update(
        long_name="time in layers" if tau == 1 else f"time in layers of duration layer_time = {tau:g}",
        layer_time=tau,
        convention=f"layer k acts on [k tau, (k+1) tau), tau = layer_time = {tau:g}: one unit of time moves a token "
                   "by the layer's head outputs relative to the token's norm; a stack is the composition of the "
                   "layers' Euler flows")
    for name, (long_name, dims) in _FLOW_VARIABLES.items():
        ds[name] = xr.Variable(("time",) + dims, ds[name].values, {"long_name": long_name, "units": "1"})
    if tokens is not None:
        ds = ds.assign_coords(token=("particle", np.asarray(list(tokens), dtype=str),
                                     {"long_name": "token string", "units": ""}))
    return ds
