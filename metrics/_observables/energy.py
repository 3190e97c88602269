"""Energies and attention entropy as plain functions of a point cloud.

Thin wrappers over :class:`particles.MultiHead` (the energy belongs to the model layer);
they exist so that sweeps and the accessor can ask for them by name.
"""

from __future__ import annotations

import numpy as np

from particles import MultiHead
from particles.summation import exp_sums
from particles.validation import Integer, Model, Points, Relation, declare, fits_model

__all__ = ["energy", "head_energies", "log_head_energies", "mean_entropy", "leaders"]


# a point cloud and the model it is measured under (the model's geometry says whether rows are unit vectors)
_CLOUD = dict(x=Points(on_sphere=False, min_d=1),
              model=Model(hint="Build one with particles.MultiHead(M, W, beta=...), "
                               "or metrics.model_from_attrs(ds.attrs)."))
_FITS = fits_model("x")


@declare(**_CLOUD, relations=[_FITS])
def energy(x, model: MultiHead) -> float:
    r""":math:`E_{multi} = \sum_h \frac{1}{2\beta n^2}\sum_{ij} e^{\beta\langle x_i, M_h x_j\rangle}`."""
    return model.energy(x)


@declare(**_CLOUD, relations=[_FITS])
def head_energies(x, model: MultiHead) -> np.ndarray:
    r"""Per-head energies :math:`E_h`, shape (H,)."""
    return model.head_energies(x)


@declare(**_CLOUD, relations=[_FITS])
def log_head_energies(x, model: MultiHead) -> np.ndarray:
    r""":math:`\log E_h` via logsumexp, shape (H,); finite at any β > 0."""
    return model.log_head_energies(x)


@declare(**_CLOUD, relations=[_FITS])
def mean_entropy(x, model: MultiHead) -> np.ndarray:
    r"""Token-averaged attention entropy :math:`\frac1n\sum_i H^h_i`, shape (H,); at most log n."""
    return model.entropy(x).mean(axis=1)


@declare(**_CLOUD, k=Integer(1), relations=[_FITS, Relation(("k", "x"), lambda k, x: k <= len(x),
                                                            "must be at most the number of tokens", breaks={"k": 99})])
def leaders(x, model: MultiHead, k: int = 1) -> np.ndarray:
    r"""Indices of the k tokens receiving the most attention, :math:`\sum_i p^h_{ij}`, per head: (H, k).

    :math:`p^h_{ij} = \operatorname{softmax}_j(\beta\langle x_i, M_h x_j\rangle)`. Two passes of
    the summation layer per head (the row partition functions :math:`Z_i`, then the transposed
    sum :math:`\sum_i e^{\beta\langle x_i, M_h x_j\rangle}/Z_i`), so memory is O(n · block) and
    large n takes the fast route. Ties are broken by the lower index.

    Parameters
    ----------
    x : ndarray of shape (n, d), unit rows
    model : particles.MultiHead
    k : int in [1, n]
    """
    out = np.empty((model.n_heads, k), dtype=np.int64)
    opts = dict(summation=model.summation, tol=model.tol, on_sphere=model.geom.on_sphere,
                block_elements=model.block_elements)
    for h in range(model.n_heads):
        BM = model.beta * model.M[h][None]
        logz = exp_sums(BM, x, x, None, same_points=True, **opts)[0].logz
        # received_j = Σ_i e^{β<x_i, M x_j>} / Z_i: the transposed sum with source weights 1/Z_i,
        # scaled by e^{min log Z} so that the weights stay in (0, 1]
        w = np.exp(logz.min() - logz)
        received = exp_sums(BM.transpose(0, 2, 1), x, x, w, **opts)[0].logz
        out[h] = np.argsort(-received, kind="stable")[:k]
    return out
