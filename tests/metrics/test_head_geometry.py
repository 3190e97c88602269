"""The head-geometry report: known geometries, dense cross-checks, invariances, netCDF."""

import numpy as np
import pytest
import scipy.linalg as sl
import xarray as xr

from metrics import head_geometry
from particles import AttentionWeights, InvalidParameterError, theory


def _random(rng, H=4, dh=3, d=10, layer=0):
    return AttentionWeights(*rng.standard_normal((3, H, dh, d)), Wo=rng.standard_normal((H, d, dh)), layer=layer)


def test_against_dense_matrices(rng):
    w = _random(rng)
    ds = head_geometry(w, n_tokens=8)
    M, W = w.score_matrices(), w.value_matrices()
    for p, (h, k) in enumerate(zip(ds.head_a.values, ds.head_b.values)):
        ref = np.sort(np.degrees(sl.subspace_angles(sl.orth(M[h]), sl.orth(M[k]))))
        np.testing.assert_allclose(ds.score_angle[0, p], ref, atol=1e-9)
        ref = np.sort(np.degrees(sl.subspace_angles(sl.orth(W[h]), sl.orth(W[k]))))
        np.testing.assert_allclose(ds.value_angle[0, p], ref, atol=1e-9)
        ref = np.sort(np.degrees(sl.subspace_angles(sl.orth(M[h].T), sl.orth(M[k].T))))
        np.testing.assert_allclose(ds.key_angle[0, p], ref, atol=1e-9)
        assert float(ds.cross_norm[0, p]) == pytest.approx(np.linalg.norm(M[h].T @ M[k], 2), rel=1e-12)
    for h in range(w.n_heads):
        m, v = M[h], W[h]
        assert float(ds.symmetry_defect[0, h]) == pytest.approx(np.linalg.norm(m - m.T) / np.linalg.norm(m), rel=1e-10)
        assert float(ds.value_misalignment[0, h]) == pytest.approx(np.linalg.norm(v - m) / np.linalg.norm(m), rel=1e-10)
        assert float(ds.delta_op[0, h]) == pytest.approx(np.linalg.norm(v - m, 2), rel=1e-12)
        cos = np.sum(v * m) / (np.linalg.norm(v) * np.linalg.norm(m))
        assert float(ds.value_alignment_cosine[0, h]) == pytest.approx(cos, rel=1e-10)
        ev = np.linalg.eigvals(m)
        ev = ev[np.argsort(-np.abs(ev))][:3]
        np.testing.assert_allclose(np.abs(ds.eigenvalue_real[0, h] + 1j * ds.eigenvalue_imag[0, h]), np.abs(ev),
                                   rtol=1e-9)
        np.testing.assert_allclose(ds.singular_value[0, h], np.linalg.svd(m, compute_uv=False)[:3], rtol=1e-12)
    assert float(ds.orthogonality_defect[0]) == pytest.approx(float(ds.cross_norm.max()), rel=1e-15)


def test_rotation_invariance(rng):
    """A common rotation of the token space (W_Q,K,V -> W O^T, W_O -> O W_O) changes nothing."""
    w = _random(rng)
    O = np.linalg.qr(rng.standard_normal((10, 10)))[0]
    r = AttentionWeights(w.Wq @ O.T, w.Wk @ O.T, w.Wv @ O.T, O @ w.Wo)
    a, b = head_geometry(w), head_geometry(r)
    for name in ("score_angle", "value_angle", "cross_norm", "symmetry_defect", "value_misalignment", "singular_value",
                 "delta_op", "isotropic_strength"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-9, atol=1e-9, err_msg=name)


def test_orthogonal_and_shared_heads():
    """Heads reading disjoint coordinate blocks: angles 90, no cross coupling; a repeated head: angle 0."""
    d = 6
    E = np.eye(d)
    Wq = np.stack([E[0:2], E[2:4], E[0:2]])
    w = AttentionWeights(Wq, Wq, Wq, Wq.transpose(0, 2, 1))
    ds = head_geometry(w)
    pair = {(int(a), int(b)): p for p, (a, b) in enumerate(zip(ds.head_a.values, ds.head_b.values))}
    np.testing.assert_allclose(ds.score_angle[0, pair[0, 1]], 90.0, atol=1e-12)
    assert float(ds.cross_norm[0, pair[0, 1]]) == 0.0
    np.testing.assert_allclose(ds.score_angle[0, pair[0, 2]], 0.0, atol=1e-6)
    assert float(ds.cross_ratio[0, pair[0, 2]]) == pytest.approx(1.0, rel=1e-12)
    # Wq = Wk: symmetric; W_O W_V = Wq^T Wq while M = Wq^T Wq / sqrt(2): aligned up to a positive scale
    np.testing.assert_allclose(ds.symmetry_defect, 0.0, atol=1e-15)
    np.testing.assert_allclose(ds.value_alignment_cosine, 1.0, rtol=1e-14)
    np.testing.assert_allclose(ds.value_misalignment, np.sqrt(2) - 1, rtol=1e-12)


def test_beta_star_where_theorem_19_applies():
    d, H, alpha, n = 5, 3, 0.7, 4
    s = (alpha * np.sqrt(d)) ** 0.5  # M = Wq^T Wk / sqrt(d_head) = alpha I with d_head = d
    Wq = np.stack([s * np.eye(d)] * H)
    w = AttentionWeights(Wq, Wq, np.stack([np.eye(d)] * H), np.stack([alpha * np.eye(d)] * H))
    ds = head_geometry(w, n_tokens=n)
    assert float(ds.beta_star[0]) == pytest.approx(theory.beta_star(H, n=n, alpha=alpha), rel=1e-12)
    assert "hold" in str(ds.beta_star_reason.values[0])
    w2 = AttentionWeights(Wq, Wq, np.stack([np.eye(d)] * H), np.stack([2 * alpha * np.eye(d)] * H))
    ds2 = head_geometry(w2, n_tokens=n)
    assert np.isnan(float(ds2.beta_star[0])) and "not value-aligned" in str(ds2.beta_star_reason.values[0])


def test_dataset_schema_and_netcdf(rng, tmp_path):
    ds = head_geometry([_random(rng, layer=0), _random(rng, layer=1)])
    assert ds.score_angle.dims == ("layer", "pair", "angle") and ds.sizes["pair"] == 6
    for name in list(ds.data_vars) + list(ds.coords):
        assert "long_name" in ds[name].attrs and "units" in ds[name].attrs, name
    assert ds.attrs["n_heads"] == 4 and ds.score_angle.dtype == np.float64
    ds.to_netcdf(tmp_path / "g.nc")
    with xr.open_dataset(tmp_path / "g.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_bad_input(rng):
    with pytest.raises(InvalidParameterError, match="non-empty list"):
        head_geometry([])
    with pytest.raises(InvalidParameterError, match="non-empty list"):
        head_geometry(3)
    with pytest.raises(InvalidParameterError, match=r"must share \(n_heads, d_head, d\)"):
        head_geometry([_random(rng), _random(rng, H=2)])


_RATIOS = ("score_angle", "key_angle", "value_angle", "cross_ratio", "self_energy_ratio", "symmetry_defect",
           "value_misalignment", "value_alignment_cosine", "scalar_defect")


@pytest.mark.parametrize("scale", [2.0**-560, 1e-170, 1e-40, 1e40, 1e75])
def test_ratios_are_scale_free_at_any_scale(rng, scale):
    """Weights x c: every ratio is that of the weights (no NaN from underflowing products); the
    norms scale as c^2 (M_h, W_h) or c^4 (products of two), where float64 holds them."""
    w = _random(rng)
    ref = head_geometry(w, n_tokens=8)
    big = AttentionWeights(w.Wq * scale, w.Wk * scale, w.Wv * scale, w.Wo * scale)
    ds = head_geometry(big, n_tokens=8)
    for name in _RATIOS:
        assert not ds[name].isnull().any(), name
        np.testing.assert_allclose(ds[name], ref[name], rtol=1e-9, atol=1e-9, err_msg=name)
    for name, power in (("singular_value", 2), ("self_norm", 4), ("orthogonality_defect", 4)):
        expected = ref[name].values * scale**(power // 2) * scale**(power // 2)
        np.testing.assert_allclose(ds[name], expected, rtol=1e-9, atol=0, err_msg=name)


def test_norms_beyond_float64_are_refused_not_inf(rng):
    w = _random(rng)
    huge = AttentionWeights(w.Wq * 1e160, w.Wk * 1e160, w.Wv * 1e160, w.Wo * 1e160)
    with pytest.raises(InvalidParameterError, match=r"reach \d.*e\+160.*exceeds float64.*power of two"):
        head_geometry(huge)


@pytest.mark.parametrize("field", ["Wq", "Wo", "all"])
def test_a_pruned_head_is_refused_naming_it(rng, field):
    w = _random(rng)
    arrays = {f: getattr(w, f).copy() for f in ("Wq", "Wk", "Wv", "Wo")}
    for f in (arrays if field == "all" else [field]):
        arrays[f][2] = 0.0
    with pytest.raises(InvalidParameterError, match=r"layer 0 has zero \(pruned\) heads \[2\]"):
        head_geometry(AttentionWeights(**arrays))


@pytest.mark.parametrize("vo", [1.0, 1e75])
def test_tiny_query_and_key_weights_are_not_called_pruned(rng, vo):
    """Wq, Wk x 1e-170 beside Wv, Wo x vo: M_h is 1e-340 of W_h, beyond float64, but no head is zero."""
    w = _random(rng)
    tiny = AttentionWeights(w.Wq * 1e-170, w.Wk * 1e-170, w.Wv * vo, w.Wo * vo)
    with pytest.raises(InvalidParameterError, match=r"Wq and Wk reach \d.*e-170.* heads \[0, 1, 2.* tiny, not zero"
                                                    ) as err:
        head_geometry(tiny)
    assert "pruned" not in str(err.value)
