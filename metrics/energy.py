"""Energies and attention entropy as plain functions of a point cloud.

Thin wrappers over :class:`particles.MultiHead` (the energy belongs to the model layer);
they exist so that sweeps and the accessor can ask for them by name.
"""

from __future__ import annotations

import numpy as np

from particles import MultiHead

__all__ = ["energy", "head_energies", "log_head_energies", "mean_entropy", "leaders"]


def energy(x, model: MultiHead) -> float:
    r""":math:`E_{multi} = \sum_h \frac{1}{2\beta n^2}\sum_{ij} e^{\beta\langle x_i, M_h x_j\rangle}`."""
    return model.energy(x)


def head_energies(x, model: MultiHead) -> np.ndarray:
    r"""Per-head energies :math:`E_h`, shape (H,)."""
    return model.head_energies(x)


def log_head_energies(x, model: MultiHead) -> np.ndarray:
    r""":math:`\log E_h` via logsumexp, shape (H,); finite at any β > 0."""
    return model.log_head_energies(x)


def mean_entropy(x, model: MultiHead) -> np.ndarray:
    r"""Token-averaged attention entropy :math:`\frac1n\sum_i H^h_i`, shape (H,); at most log n."""
    return model.entropy(x).mean(axis=1)


def leaders(x, model: MultiHead, k: int = 1) -> np.ndarray:
    r"""Indices of the k tokens receiving the most attention, :math:`\sum_i p^h_{ij}`, per head: (H, k).

    Dense O(H n²): for moderate n.
    """
    s = model.beta * model.scores(x)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    received = p.sum(axis=1)
    return np.argsort(-received, axis=1)[:, :k]
