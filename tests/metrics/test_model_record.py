"""A model's record round-trips every constructor field: dataset attrs, netCDF, zarr, pickle, the
CLI config."""

import dataclasses
import pickle

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics
from headflow import cli
from headflow._config import MODEL_FIELDS, SCHEMAS, TYPES, load_config
from particles import KINDS, MultiHead, SaveAt, simulate

_UPDATE_GEOMETRY = {"standard": ["sphere", "flat"], "pre_ln": ["flat"], "post_ln": ["sphere"], "ngpt": ["sphere"]}


@st.composite
def models(draw):
    H = draw(st.integers(1, 3))
    d = draw(st.integers(2, 4))
    finite = st.floats(-2, 2, allow_nan=False, allow_infinity=False)
    M = np.array(draw(st.lists(finite, min_size=H * d * d, max_size=H * d * d))).reshape(H, d, d)
    W = None if draw(st.booleans()) else np.array(
        draw(st.lists(finite, min_size=H * d * d, max_size=H * d * d))).reshape(H, d, d)
    update = draw(st.sampled_from(sorted(_UPDATE_GEOMETRY)))
    causal = draw(st.booleans())
    return MultiHead(M, W, beta=draw(st.floats(0, 5)), kind=draw(st.sampled_from(sorted(KINDS))),
                     geometry=draw(st.sampled_from(_UPDATE_GEOMETRY[update])), update=update, causal=causal,
                     log_time_scale=draw(st.floats(-3, 3)), block_elements=draw(st.integers(1, 2**20)),
                     summation="exact" if causal else draw(st.sampled_from(["auto", "exact"])),
                     tol=draw(st.floats(1e-14, 1e-3)))


def _same(a: MultiHead, b: MultiHead):
    for f in dataclasses.fields(MultiHead):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb)
        else:
            assert va == vb and type(va) is type(vb), (f.name, va, vb)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models())
def test_every_field_round_trips_through_attrs_and_pickle(model):
    _same(metrics.model_from_attrs(metrics.model_attrs(model)), model)
    _same(MultiHead.from_attrs(model.to_attrs()), model)
    _same(pickle.loads(pickle.dumps(model)), model)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, np.ndarray):
        return _toml(value.tolist())
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))


def _model_section(model: MultiHead) -> str:
    """The [model] section of a CLI config that builds ``model``."""
    keys = {name: getattr(model, name) for name in MODEL_FIELDS}
    keys.update(d=model.d, M=model.M)
    if model.W is not None:
        keys["W"] = model.W
    return "[model]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in keys.items())


def test_cli_model_keys_are_the_model_fields():
    # a MultiHead field the CLI does not know would be dropped from every config-built model
    init = {f.name for f in dataclasses.fields(MultiHead) if f.init} - {"M", "W"}
    assert set(MODEL_FIELDS) == init
    for command in ("simulate", "study"):
        assert set(MODEL_FIELDS) <= set(SCHEMAS[command]["model"]) and set(MODEL_FIELDS) <= set(TYPES[command]["model"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models())
def test_every_field_round_trips_through_the_cli_config(model):
    cfg = load_config("simulate", _model_section(model))
    _same(cli.build_model(cfg["model"]), model)


@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
def test_causal_run_record_survives_the_file(tmp_path, rng, fmt):
    # regression: causal, update and block_elements were dropped, so ds.attn.model was another model
    model = MultiHead(rng.standard_normal((2, 3, 3)), beta=1.5, kind="softmax", causal=True, block_elements=4096,
                      summation="exact")
    x0 = rng.standard_normal((5, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    ds = metrics.trajectory_to_dataset(simulate(x0, model, t1=0.2, dt=0.05, save=SaveAt(every=2)), model)
    if fmt == "netcdf":
        ds.to_netcdf(tmp_path / "run.nc")
        back = xr.load_dataset(tmp_path / "run.nc")
    else:
        ds.to_zarr(tmp_path / "run.zarr", consolidated=False)  # not in the zarr v3 spec
        back = xr.open_zarr(tmp_path / "run.zarr", consolidated=False).load()
    rebuilt = back.attn.model
    _same(rebuilt, model)
    x = back.positions.values[-1]
    np.testing.assert_array_equal(rebuilt.velocity(x), model.velocity(x))


def test_replace_revalidates(rng):
    model = MultiHead(np.eye(3), beta=1.0)
    assert model.replace(beta=2.0).beta == 2.0 and model.beta == 1.0
    with pytest.raises(ValueError, match="'beta' parameter of MultiHead"):
        model.replace(beta=-1.0)


def test_public_sums_outputs_and_entropy_match_the_dense_weights(rng):
    model = MultiHead(rng.standard_normal((2, 3, 3)), beta=1.2, kind="softmax")
    x = rng.standard_normal((7, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    A = model.weights(x)
    np.testing.assert_allclose(model.outputs(x), np.einsum("hij,jd,hed->hie", A, x, model.W), atol=1e-13)
    np.testing.assert_allclose(model.entropy(x), -np.sum(A * np.log(A), axis=-1), atol=1e-12)
    w = rng.uniform(size=7)
    sums = model.sums(x, weights=w)
    Aw = A * w[None, None, :]
    np.testing.assert_allclose(np.exp(sums[0].logz), np.exp(1.2 * x @ model.M[0] @ x.T) @ w, rtol=1e-12)
    np.testing.assert_allclose(sums[1].mean, (Aw[1] / Aw[1].sum(-1, keepdims=True)) @ x, atol=1e-13)
    with pytest.raises(ValueError, match="weights of MultiHead.sums must be non-negative with shape"):
        model.sums(x, weights=-w)


def test_kind_parameters_enter_records_and_keys_only_off_their_defaults(tmp_path, rng):
    from metrics._runs.keys import model_key
    from particles import Sigmoid, Sinkhorn

    M = rng.standard_normal((2, 3, 3))
    assert model_key(MultiHead(M, kind=Sigmoid())) == model_key(MultiHead(M, kind="sigmoid"))
    assert not any(k.startswith("kind_") for k in model_key(MultiHead(M, kind=Sinkhorn())))
    biased = MultiHead(M, beta=1.5, kind=Sigmoid(bias=-2.0))
    assert model_key(biased)["kind_bias"] == -2.0 and model_key(biased) != model_key(MultiHead(M, beta=1.5,
                                                                                               kind="sigmoid"))
    x0 = rng.standard_normal((5, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    ds = metrics.trajectory_to_dataset(simulate(x0, biased, t1=0.2, dt=0.05), biased)
    ds.to_netcdf(tmp_path / "run.nc")
    with xr.open_dataset(tmp_path / "run.nc") as back:
        assert MultiHead.from_attrs(back.attrs).kind == Sigmoid(bias=-2.0)
