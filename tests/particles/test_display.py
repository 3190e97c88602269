"""A model displays what its heads are, never its matrix entries (notebook-friendly)."""

import numpy as np

import particles


def test_scalar_heads_are_named_by_their_strengths():
    m = particles.MultiHead.scalar([1.0, 0.5], d=4, beta=2.0, kind="softmax")
    text = repr(m)
    assert text.startswith("MultiHead(2 heads on S^3 (d = 4), kind='softmax', beta=2,")
    assert "lambda = [1, 0.5]" in text and "array" not in text and len(text) < 250


def test_general_heads_show_shape_symmetry_and_alignment_not_entries():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((3, 5, 5))
    M[0, 0, 1] = 0.123456789
    m = particles.MultiHead(M, W=np.stack([np.eye(5)] * 3), beta=1.0, kind="usa", geometry="flat")
    text = repr(m)
    assert "M of shape (3, 5, 5) (non-symmetric), W != M" in text and "on R^5" in text
    assert "0.123456" not in text and "0.123456" not in m._repr_html_()
    sym = particles.MultiHead(M + M.transpose(0, 2, 1), beta=1.0)
    assert "(symmetric), W = M (value-aligned)" in repr(sym)
    # a head that is lambda I but with W != M is not called scalar
    assert "scalar" not in repr(particles.MultiHead(np.eye(3), W=2 * np.eye(3)))


def test_html_table_lists_every_field():
    html = particles.MultiHead.scalar([1.0], d=3, causal=True)._repr_html_()
    for field in ("heads", "kind", "beta", "matrices", "log_time_scale", "summation", "causal", "update"):
        assert f">{field}</th>" in html
    assert html.startswith("<table>") and html.endswith("</table>")
