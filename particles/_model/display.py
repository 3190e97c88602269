"""Short displays of a model and of analysis results: a one-paragraph ``repr`` and an HTML table
for notebooks.

A model's matrices can hold d² H entries; the displays name what they are (scalar heads
:math:`M_h = W_h = \\lambda_h I`, or their shapes, symmetry and value alignment) and never print
the entries (``model.M`` and ``model.W`` hold them). Results holding arrays (radial-dominance
reports, Hessian spectra, critical points) display a summary the same way (:func:`fields_repr`,
:func:`fields_html`); their attributes hold the arrays.
"""

from __future__ import annotations

import html

import numpy as np

from .._core.numerics import scalar_heads

__all__ = ["heads_summary", "model_repr", "model_html", "fields_repr", "fields_html", "array_summary"]


def _scalar_strengths(model) -> np.ndarray | None:
    """λ_h when every head is M_h = W_h = λ_h I, else None (:func:`~particles._core.numerics.scalar_heads`)."""
    heads = scalar_heads(model.M, model.W)
    return heads[0] if model.aligned and heads is not None else None


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
    return [("heads", f"{heads} on {'S^' + str(model.d - 1) if model.geom.on_sphere else 'R^' + str(model.d)}"
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


def fields_repr(name: str, fields) -> str:
    """``Name(key=value, ...)`` of (key, text) pairs."""
    return f"{name}(" + ", ".join(f"{k}={v}" for k, v in fields) + ")"


def fields_html(name: str, fields, *, header=None) -> str:
    """An HTML table: a caption ``name``, one row per item; an item is (key, text) or, with a
    ``header`` of column names, (key, text, text, ...)."""
    cell = "<td style='text-align:left'>{}</td>"
    head = ("<tr>" + "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in header) + "</tr>"
            if header else "")
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                   + "".join(cell.format(html.escape(str(v))) for v in vals) + "</tr>" for k, *vals in fields)
    return f"<table><caption style='text-align:left'><b>{html.escape(name)}</b></caption>{head}{rows}</table>"


def array_summary(a) -> str:
    """``shape (n, d), range [lo, hi]`` of an array (real part range for complex arrays)."""
    a = np.asarray(a)
    if a.size == 0:
        return f"shape {a.shape}, empty"
    r = np.real(a)
    return f"shape {a.shape}, range [{np.nanmin(r):.4g}, {np.nanmax(r):.4g}]"


def model_html(model) -> str:
    """An HTML table of the model's fields (Jupyter's ``_repr_html_``)."""
    return fields_html(type(model).__name__, _fields(model))
