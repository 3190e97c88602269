"""Energies and attention entropy as plain functions of a point cloud.

Thin wrappers over :class:`particles.MultiHead` (the energy belongs to the model layer);
they exist so that sweeps and the accessor can ask for them by name.
"""

from __future__ import annotations

import numpy as np

from particles import MultiHead
from particles.validation import check_instance, check_param

__all__ = ["energy", "head_energies", "log_head_energies", "mean_entropy", "leaders"]


def _model(model, caller):
    return check_instance(model, MultiHead, "model", caller,
                          hint="Build one with particles.MultiHead(M, W, beta=...), or metrics.model_from_attrs(ds.attrs).")


def energy(x, model: MultiHead) -> float:
    r""":math:`E_{multi} = \sum_h \frac{1}{2\beta n^2}\sum_{ij} e^{\beta\langle x_i, M_h x_j\rangle}`."""
    return _model(model, "energy").energy(x)


def head_energies(x, model: MultiHead) -> np.ndarray:
    r"""Per-head energies :math:`E_h`, shape (H,)."""
    return _model(model, "head_energies").head_energies(x)


def log_head_energies(x, model: MultiHead) -> np.ndarray:
    r""":math:`\log E_h` via logsumexp, shape (H,); finite at any β > 0."""
    return _model(model, "log_head_energies").log_head_energies(x)


def mean_entropy(x, model: MultiHead) -> np.ndarray:
    r"""Token-averaged attention entropy :math:`\frac1n\sum_i H^h_i`, shape (H,); at most log n."""
    return _model(model, "mean_entropy").entropy(x).mean(axis=1)


#: entries of one (block x n) logit tile of :func:`leaders` (32 MiB of float64)
LEADERS_BLOCK_ELEMENTS = 2**22


def leaders(x, model: MultiHead, k: int = 1) -> np.ndarray:
    r"""Indices of the k tokens receiving the most attention, :math:`\sum_i p^h_{ij}`, per head: (H, k).

    :math:`p^h_{ij} = \operatorname{softmax}_j(\beta\langle x_i, M_h x_j\rangle)`. The column
    sums are accumulated over row blocks of the logits, so memory is O(n · block), not
    O(n²); time is O(H n² d). Ties are broken by the lower index.

    Parameters
    ----------
    x : ndarray of shape (n, d), unit rows
    model : particles.MultiHead
    k : int in [1, n]
    """
    model = _model(model, "leaders")
    x = model.check_x(x)
    n = len(x)
    k = check_param(k, "k", "leaders", low=1, high=n, integer=True)
    B = max(1, LEADERS_BLOCK_ELEMENTS // n)
    out = np.empty((model.n_heads, k), dtype=np.int64)
    for h in range(model.n_heads):
        L = model.beta * (x @ model.M[h])  # s_ij = (x_i^T M) x_j
        received = np.zeros(n)
        for start in range(0, n, B):
            T = L[start: start + B] @ x.T
            T -= T.max(axis=1, keepdims=True)
            np.exp(T, out=T)
            T /= T.sum(axis=1, keepdims=True)
            received += T.sum(axis=0)
        out[h] = np.argsort(-received, kind="stable")[:k]
    return out
