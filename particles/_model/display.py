"""Short displays of a model: a one-paragraph ``repr`` and an HTML table for notebooks.

A model's matrices can hold d² H entries; the displays name what they are (scalar heads
:math:`M_h = W_h = \\lambda_h I`, or their shapes, symmetry and value alignment) and never print
the entries (``model.M`` and ``model.W`` hold them).
"""

from __future__ import annotations

import html

import numpy as np

__all__ = ["heads_summary", "model_repr", "model_html"]


def _scalar_strengths(model) -> np.ndarray | None:
    """λ_h when every head is M_h = W_h = λ_h I, else None (the ensemble's own test of a head)."""
    from .ensemble import _scalar  # (ensemble imports multihead, which imports this module)

    lam = [_scalar(m) for m in model.M]
    return np.array(lam) if model.aligned and None not in lam else None


def heads_summary(model) -> str:
    """What the heads are, in words: scalar strengths, or shapes with symmetry and alignment."""
    lam = _scalar_strengths(model)
    if lam is not None:
        return f"scalar heads M_h = W_h = lambda_h I, lambda = [{', '.join(f'{v:.6g}' for v in lam)}]"
    sym = "symmetric" if model.symmetric else "non-symmetric"
    val = "W = M (value-aligned)" if model.aligned else "W != M"
    return f"M of shape {model.M.shape} ({sym}), {val}"


def _fields(model) -> list[tuple[str, str]]:
    heads = f"{model.n_heads} head{'s' if model.n_heads > 1 else ''}"
    return [("heads", f"{heads} on {'S^' + str(model.d - 1) if model.geometry == 'sphere' else 'R^' + str(model.d)}"
                      f" (d = {model.d})"),
            ("kind", model.kind), ("beta", f"{model.beta:g}"), ("matrices", heads_summary(model)),
            ("log_time_scale", f"{model.log_time_scale:g}"), ("summation", f"{model.summation} (tol {model.tol:g})"),
            ("causal", str(bool(model.causal))), ("update", model.update)]


def model_repr(model) -> str:
    """``MultiHead(2 heads on S^2 (d = 3), kind='usa', beta=2, scalar heads ..., ...)``."""
    f = dict(_fields(model))
    extras = "".join(f", {k}={f[k]}" for k, default in (("causal", "False"), ("update", "standard")) if f[k] != default)
    return (f"{type(model).__name__}({f['heads']}, kind={model.kind!r}, beta={f['beta']}, {f['matrices']}, "
            f"log_time_scale={f['log_time_scale']}, summation={model.summation!r}{extras})")


def model_html(model) -> str:
    """An HTML table of the model's fields (Jupyter's ``_repr_html_``)."""
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(v)}</td></tr>" for k, v in _fields(model))
    return f"<table><caption style='text-align:left'><b>{type(model).__name__}</b></caption>{rows}</table>"
