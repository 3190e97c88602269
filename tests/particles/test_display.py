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


def test_radial_dominance_report_displays_a_summary_not_its_arrays():
    # issue 37: a report over 41 saves of 40 tokens printed ~200 lines of boolean arrays
    model = particles.MultiHead.scalar([1.0, 1.0], d=4, beta=0.5, kind="softmax")
    x0 = particles.sample_uniform(40, d=4, rng=0)
    traj = particles.simulate(x0, model, t1=2.0, dt=0.1, save=particles.SaveAt(ts=np.linspace(0, 2, 41)))
    rep = particles.radial_dominance(model, traj)
    text = repr(rep)
    assert "\n" not in text and len(text) < 300 and "array" not in text
    assert text.startswith("RDReport(41 saves, t in [0, 2], 2 heads, 40 tokens;")
    for c in particles.RD_CANDIDATES:
        expect = "holds throughout" if rep.holds_throughout[c] else f"fails first at t = {rep.first_failure[c]:.4g}"
        assert f"{c}: {expect}" in text
    html = rep._repr_html_()
    assert html.count("<tr>") == 1 + len(particles.RD_CANDIDATES)  # header + one row per candidate
    least = f"{rep.fraction('pointwise').min():.3g}"
    assert f">pointwise</th><td style='text-align:left'>{rep.holds_throughout['pointwise']}</td>" in html
    assert f">{least}</td></tr>" in html


def test_critical_point_and_spectrum_display_summaries():
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa")
    x0 = particles.normalize(np.array([[1.0, 0.0, 0.0]] * 3) + 0.01 * np.arange(9).reshape(3, 3))
    cp = particles.find_critical_point(model, x0)
    text = repr(cp)
    assert text.startswith("CriticalPoint(x=shape (3, 3)") and f"n_iter={cp.n_iter}" in text and "\n" not in text
    assert f"index {cp.spectrum.index}, nullity {cp.spectrum.nullity}" in text
    spec = repr(cp.spectrum)
    lo, hi = cp.spectrum.eigenvalues[[0, -1]]
    assert spec.startswith("HessianSpectrum(eigenvalues=shape (6,)") and f"[{lo:.4g}, {hi:.4g}]" in spec
    assert ">grad_norm</th>" in cp.spectrum._repr_html_() and ">converged</th>" in cp._repr_html_()
