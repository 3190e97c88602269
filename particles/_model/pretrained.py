r"""A trained attention sublayer as a :class:`~particles.MultiHead`: projections, biases, norms.

The layer (BERT, GPT-2 and Llama alike; :mod:`particles._model.architectures` reads their
tensors). H heads of width :math:`d_{head}` act on tokens :math:`a_i\in\mathbb R^d`:

.. math::
   q^h_i = W_{Q,h}a_i + b_{Q,h},\quad k^h_j = W_{K,h}a_j + b_{K,h},\quad
   \ell^h_{ij} = \frac{\langle q^h_i, k^h_j\rangle}{\sqrt{d_{head}}},\\
   o_i = \sum_h W_{O,h}\sum_j \operatorname{softmax}_j(\ell^h_{i\cdot})\,(W_{V,h}a_j + b_{V,h}) + b_O ,

with :math:`W_{Q,h}, W_{K,h}, W_{V,h}` of shape :math:`(d_{head}, d)` and :math:`W_{O,h}` the
:math:`(d, d_{head})` block of the output projection (grouped-query heads share K and V).

As a MultiHead (:meth:`AttentionWeights.to_multihead`), softmax kind, β = 1:

.. math:: M_h = \frac{W_{Q,h}^\top W_{K,h}}{\sqrt{d_{head}}},\qquad W_h = W_{O,h}W_{V,h}

(the same model as :math:`M_h = W_{Q,h}^\top W_{K,h}` at :math:`\beta = 1/\sqrt{d_{head}}`).

Biases, explicitly:

- ``bias="drop"``: every bias is dropped. The key bias adds to the logits only terms constant
  in j (:math:`\langle W_{Q,h}a_i + b_{Q,h}, b_{K,h}\rangle`), which softmax ignores; the
  query bias adds the j-dependent logit :math:`\langle W_{K,h}^\top b_{Q,h}, a_j\rangle`, and
  the value bias and :math:`b_O` shift every output by a constant: these three are lost.
- ``bias="augment"``: exact, in flat space. Tokens get a constant coordinate,
  :math:`\tilde a = (a, 1)\in\mathbb R^{d+1}`, and

  .. math::
     \tilde M_h = \frac{1}{\sqrt{d_{head}}}\begin{pmatrix}W_{Q,h}^\top W_{K,h} & W_{Q,h}^\top b_{K,h}\\
     b_{Q,h}^\top W_{K,h} & b_{Q,h}^\top b_{K,h}\end{pmatrix},\qquad
     \tilde W_h = \begin{pmatrix}W_{O,h}W_{V,h} & W_{O,h}b_{V,h} + b_O/H\\ 0 & 0\end{pmatrix},

  so :math:`\langle\tilde a_i,\tilde M_h\tilde a_j\rangle = \ell^h_{ij}` and, the softmax weights
  summing to one, the flat velocity is :math:`(o_i, 0)`: one Euler step of size 1 is the
  residual update :math:`a_i + o_i` of the layer, to round-off.

Norms (:meth:`AttentionWeights.fold_norm`): a LayerNorm :math:`\gamma\odot n(x) + \beta_{LN}`
with :math:`n(x) = (x - \bar x)/\sigma(x)` (or an RMSNorm :math:`\gamma\odot x/\mathrm{rms}(x)`)
in front of the attention is folded into it: :math:`W_{Q,h}\to W_{Q,h}\operatorname{diag}\gamma`,
:math:`b_{Q,h}\to b_{Q,h} + W_{Q,h}\beta_{LN}` (same for K and V). The folded layer reads
:math:`n(x)`, whose norm is :math:`\sqrt d` exactly: **the norm's sphere is the model's sphere**.
:func:`norm_sphere` returns :math:`u = n(x)/\sqrt d\in S^{d-1}`, on which the logits are
:math:`d\,\langle u_i, M_h u_j\rangle`, i.e. the MultiHead with β = d (biases dropped). The
residual stream, the MLP and the LayerNorm after a post-LN block (BERT) are not part of the
attention dynamics and are not represented.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .._core.arrays import check_real_array
from .._core.declarations import declare
from .._core.errors import InvalidParameterError
from .._core.params import Options
from .._core.params_data import Array
from .._core.sphere import FLAT, GEOMETRIES
from .._core.validation import check_choice
from .multihead import MultiHead

__all__ = ["AttentionWeights", "norm_sphere", "BIAS_MODES", "NORMS"]

#: how :meth:`AttentionWeights.to_multihead` treats the biases
BIAS_MODES = {"drop": "biases dropped (d x d heads)", "augment": "exact, tokens (a, 1) in R^(d+1), flat geometry"}
#: the pre-attention norms :meth:`AttentionWeights.fold_norm` and :func:`norm_sphere` know
NORMS = ("layernorm", "rmsnorm")


def _normalise(a: np.ndarray, kind: str, eps: float) -> np.ndarray:
    if kind == "layernorm":
        c = a - a.mean(axis=-1, keepdims=True)
        return c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + eps)
    return a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)


@declare(a=Array(2, what="an array of token vectors of shape (n, d)"), kind=Options(*NORMS))
def norm_sphere(a, kind: str = "layernorm") -> np.ndarray:
    r"""Tokens on the norm's sphere: :math:`u_i = n(a_i)/\|n(a_i)\|` with :math:`n` the norm's
    core (``"layernorm"``: centre and divide by the standard deviation; ``"rmsnorm"``: divide
    by the root mean square), i.e. :math:`n(a_i)/\sqrt d` up to the norm's ε.

    Parameters
    ----------
    a : array_like of shape (n, d)
        Token vectors before the norm (e.g. a model's summed embeddings).
    kind : {"layernorm", "rmsnorm"}

    Returns
    -------
    ndarray of shape (n, d), unit rows

    Examples
    --------
    >>> u = norm_sphere([[1.0, 2.0, 6.0]])
    >>> bool(np.isclose(np.linalg.norm(u), 1.0)), bool(np.isclose(u.sum(), 0.0))
    (True, True)
    """
    a = check_real_array(a, "a", "norm_sphere", ndim=2, expected="an array of token vectors of shape (n, d)")
    check_choice(kind, "kind", NORMS, "norm_sphere")
    # u is invariant under a positive scale of a row: bring each row to max |a_ij| = 1 first, so that
    # the variance of rows of 1e200 neither overflows nor that of rows of 1e-200 underflows
    big = np.abs(a).max(axis=1, keepdims=True)
    u = _normalise(a / np.where(big > 0, big, 1.0), kind, 0.0 if kind == "rmsnorm" else 1e-300)
    norm = np.linalg.norm(u, axis=1, keepdims=True)
    if not np.all(norm > 0):
        i = int(np.argmin(norm[:, 0]))
        raise InvalidParameterError(f"The 'a' parameter of norm_sphere has a row ({i}) that the {kind} maps to 0 "
                                    "(constant or zero): it has no point on the sphere; drop that token.")
    return u / norm


@dataclass(frozen=True, eq=False)
class AttentionWeights:
    r"""The per-head projections and biases of one attention sublayer (module docstring).

    Parameters
    ----------
    Wq, Wk, Wv : array_like of shape (H, d_head, d)
        Query, key and value projections of every head (grouped-query heads repeated).
    Wo : array_like of shape (H, d, d_head)
        Head h's block of the output projection.
    bq, bk, bv : array_like of shape (H, d_head), optional
        Projection biases (default 0).
    bo : array_like of shape (d,), optional
        Output bias (default 0).
    causal : bool
        Token i attends to tokens j <= i (GPT-2, Llama).
    architecture : str
        Where the weights came from (informative: ``"bert"``, ``"gpt2"``, ``"llama"``, ...).
    layer : int
        Layer index in its model (informative).
    norm : str
        The norm folded in by :meth:`fold_norm` (``"none"`` if none).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w = AttentionWeights(*rng.standard_normal((3, 2, 4, 8)), Wo=rng.standard_normal((2, 8, 4)))
    >>> w.score_matrices().shape, w.to_multihead(bias="augment", geometry="flat").d
    ((2, 8, 8), 9)
    """

    Wq: np.ndarray
    Wk: np.ndarray
    Wv: np.ndarray
    Wo: np.ndarray
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None
    causal: bool = False
    architecture: str = "custom"
    layer: int = 0
    norm: str = "none"

    def __post_init__(self):
        c = "AttentionWeights"
        Wq = check_real_array(self.Wq, "Wq", c, ndim=3, expected="an array of shape (H, d_head, d)")
        H, dh, d = Wq.shape
        out = {"Wq": Wq}
        for name, shape in (("Wk", (H, dh, d)), ("Wv", (H, dh, d)), ("Wo", (H, d, dh))):
            out[name] = _shaped(getattr(self, name), name, shape)
        for name, shape in (("bq", (H, dh)), ("bk", (H, dh)), ("bv", (H, dh)), ("bo", (d,))):
            value = getattr(self, name)
            out[name] = np.zeros(shape) if value is None else _shaped(value, name, shape)
        if not isinstance(self.causal, (bool, np.bool_)):
            raise InvalidParameterError(f"The 'causal' parameter of {c} must be True or False; got {self.causal!r}.")
        for name, value in out.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "causal", bool(self.causal))

    # ------------------------------------------------------------------ facts
    @property
    def n_heads(self) -> int:
        return self.Wq.shape[0]

    @property
    def d_head(self) -> int:
        return self.Wq.shape[1]

    @property
    def d(self) -> int:
        """Width of the token vectors (the ambient dimension of the heads)."""
        return self.Wq.shape[2]

    @property
    def has_bias(self) -> bool:
        return any(np.any(getattr(self, b)) for b in ("bq", "bk", "bv", "bo"))

    def score_matrices(self) -> np.ndarray:
        r""":math:`M_h = W_{Q,h}^\top W_{K,h}/\sqrt{d_{head}}`, shape (H, d, d), rank <= d_head."""
        return np.einsum("hki,hkj->hij", self.Wq, self.Wk) / np.sqrt(self.d_head)

    def value_matrices(self) -> np.ndarray:
        r""":math:`W_h = W_{O,h}W_{V,h}`, shape (H, d, d), rank <= d_head."""
        return np.einsum("hik,hkj->hij", self.Wo, self.Wv)

    def augmented(self) -> tuple[np.ndarray, np.ndarray]:
        r"""The exact (H, d+1, d+1) score and value matrices of the homogeneous tokens (a, 1)
        (module docstring, ``bias="augment"``)."""
        H, d = self.n_heads, self.d
        s = 1.0 / np.sqrt(self.d_head)
        M = np.zeros((H, d + 1, d + 1))
        W = np.zeros((H, d + 1, d + 1))
        M[:, :d, :d] = self.score_matrices()
        M[:, :d, d] = s * np.einsum("hki,hk->hi", self.Wq, self.bk)
        M[:, d, :d] = s * np.einsum("hk,hkj->hj", self.bq, self.Wk)
        M[:, d, d] = s * np.einsum("hk,hk->h", self.bq, self.bk)
        W[:, :d, :d] = self.value_matrices()
        W[:, :d, d] = np.einsum("hik,hk->hi", self.Wo, self.bv) + self.bo / H
        return M, W

    # ------------------------------------------------------------------ transforms
    def fold_norm(self, scale, shift=None, *, kind: str = "layernorm") -> AttentionWeights:
        r"""The layer with a norm :math:`\gamma\odot n(x) + \beta_{LN}` in front folded in
        (module docstring): it reads :math:`n(x)` instead of the norm's output.

        Parameters
        ----------
        scale : array_like of shape (d,)
            γ (the norm's ``weight``).
        shift : array_like of shape (d,), optional
            :math:`\beta_{LN}` (the LayerNorm's ``bias``; RMSNorm has none).
        kind : {"layernorm", "rmsnorm"}
        """
        c = "AttentionWeights.fold_norm"
        check_choice(kind, "kind", NORMS, c)
        g = _shaped(scale, "scale", (self.d,), c)
        b = np.zeros(self.d) if shift is None else _shaped(shift, "shift", (self.d,), c)
        new = {}
        for P, bias in (("Wq", "bq"), ("Wk", "bk"), ("Wv", "bv")):
            W = getattr(self, P)
            new[P] = W * g
            new[bias] = getattr(self, bias) + W @ b
        return dataclasses.replace(self, norm=kind, **new)

    def to_multihead(self, *, bias: str = "drop", beta: float = 1.0, kind: str = "softmax",
                     geometry: str = "sphere", **options) -> MultiHead:
        r"""The heads as a :class:`~particles.MultiHead` (module docstring).

        Parameters
        ----------
        bias : {"drop", "augment"}
            ``"augment"`` is exact and needs ``geometry="flat"``, tokens ``(a, 1)``.
        beta : float
            1 reproduces the layer's logits on its own tokens; ``d`` on the tokens of
            :func:`norm_sphere` (with the norm folded in).
        kind, geometry, **options
            Passed to :class:`~particles.MultiHead`; ``causal`` defaults to the layer's.
        """
        check_choice(bias, "bias", BIAS_MODES, "AttentionWeights.to_multihead")
        if bias == "augment" and GEOMETRIES.get(geometry, FLAT).on_sphere:  # (an unknown one: MultiHead says)
            raise InvalidParameterError(
                "bias='augment' of AttentionWeights.to_multihead adds the constant coordinate 1 to every token, which "
                f"is not on the sphere: pass geometry='flat' (got {geometry!r}), or bias='drop' for the sphere."
            )
        M, W = self.augmented() if bias == "augment" else (self.score_matrices(), self.value_matrices())
        options.setdefault("causal", self.causal)
        return MultiHead(M, W, beta=beta, kind=kind, geometry=geometry, **options)


def _shaped(value, name: str, shape: tuple, caller: str = "AttentionWeights") -> np.ndarray:
    arr = check_real_array(value, name, caller, expected=f"a real array of shape {shape}")
    if arr.shape != shape:
        raise InvalidParameterError(
            f"{name} of {caller} must have shape {shape} (H, d_head and d as in Wq of shape (H, d_head, d)); "
            f"got shape {arr.shape}."
        )
    return arr
