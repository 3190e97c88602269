"""The safetensors reader (numpy alone): every float width checkpoints ship, and every way a
file is damaged refused with a message naming the file or the tensor."""

import json

import numpy as np
import pytest

from particles import InvalidParameterError, load_attention
from particles.extend import read_tensors


def _file(tensors: dict, dtypes: dict | None = None, raw: dict | None = None) -> bytes:
    """Safetensors bytes written by hand (the format's spec): ``raw`` gives a tensor's bytes and
    shape directly (for bf16, which numpy cannot hold)."""
    header, chunks, offset = {}, [], 0
    items = {k: (np.ascontiguousarray(v).tobytes(), list(np.shape(v)), (dtypes or {}).get(k, "F32"))
             for k, v in tensors.items()}
    items.update(raw or {})
    for name, (data, shape, dtype) in items.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    return len(head).to_bytes(8, "little") + head + b"".join(chunks)


def _bf16(a: np.ndarray) -> bytes:
    """bf16 bytes of float32 values (truncation: the top 16 bits)."""
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()


def test_bf16_is_the_top_half_of_float32_exactly(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-38, 3e38, 0.0, -0.0], np.float32)  # all exact in bf16 ...
    exact = (values.view(np.uint32) & 0xFFFF0000).view(np.float32)  # ... up to the dropped bits
    data = _file({}, raw={"w": (_bf16(values), [7], "BF16")})
    got = read_tensors(data)["w"]
    assert got.dtype == np.float32 and got.tobytes() == exact.tobytes()
    (tmp_path / "m.safetensors").write_bytes(data)
    assert read_tensors(tmp_path / "m.safetensors")["w"].tobytes() == exact.tobytes()


@pytest.mark.parametrize("dtype, code", [(np.float16, "F16"), (np.float32, "F32"), (np.float64, "F64")])
def test_float_widths_match_the_safetensors_package(dtype, code):
    st = pytest.importorskip("safetensors.numpy")
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(dtype)
    ours = read_tensors(_file({"a": a}, {"a": code}))["a"]
    theirs = st.load(st.save({"a": a}))["a"]
    assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    assert np.array_equal(read_tensors(st.save({"a": a}))["a"], a)
    ours[0, 0] = 7  # writable, own memory (as the package's)
    assert ours.flags.owndata

def test_a_bf16_checkpoint_loads_like_its_float32_original():
    rng = np.random.default_rng(1)
    t = {"h.0.attn.c_attn.weight": rng.standard_normal((12, 36)),
         "h.0.attn.c_proj.weight": rng.standard_normal((12, 12))}
    t32 = {k: (v.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32) for k, v in t.items()}
    data = _file({}, raw={k: (_bf16(v), list(v.shape), "BF16") for k, v in t32.items()})
    w = load_attention(data, n_heads=3)
    ref = load_attention(t32, n_heads=3)
    assert np.array_equal(w.Wq, ref.Wq) and np.array_equal(w.Wo, ref.Wo)
    w16 = load_attention(_file({k: v.astype(np.float16) for k, v in t.items()},
                               dict.fromkeys(t, "F16")), n_heads=3)
    np.testing.assert_allclose(w16.Wq, load_attention(t, n_heads=3).Wq, rtol=1e-3, atol=1e-3)


GOOD = _file({"a": np.ones((2, 2), np.float32)})


@pytest.mark.parametrize("data, match", [
    (b"", "fewer than the 8 of the header length"),
    (GOOD[:5], "fewer than the 8"),
    (GOOD[:20], "the header claims"),
    (GOOD[:-3], r"tensor 'a' has data_offsets \[0, 16\] past the end of the 13 data bytes"),
    ((5).to_bytes(8, "little") + b"nojsn", "its header is not JSON"),
    ((2).to_bytes(8, "little") + b"[]", "JSON list, not an object"),
    (_file({}, raw={"a": (b"\0" * 4, [2], "F32")}), "needs 8 bytes; its data_offsets span 4"),
    (_file({}, raw={"a": (b"\0" * 2, [2], "F8_E4M3")}), r"dtype 'F8_E4M3', which headflow does not read.*float32"),
    (_file({}, raw={"a": (b"", [-1], "F32")}), "not a list of non-negative integers"),
])
def test_damaged_bytes_are_refused_naming_what_is_wrong(tmp_path, data, match):
    with pytest.raises(InvalidParameterError, match="the bytes given is not a readable safetensors file: .*" + match):
        read_tensors(data)
    path = tmp_path / "m.safetensors"
    path.write_bytes(data)
    where = repr(str(path))
    with pytest.raises(InvalidParameterError, match=where + " is not a readable safetensors file: .*" + match):
        load_attention(path, n_heads=1)


def test_a_folder_is_not_a_file(tmp_path):
    with pytest.raises(InvalidParameterError, match="is a folder; pass the path of the .safetensors file"):
        read_tensors(tmp_path)


@pytest.mark.parametrize("scale", [1e-200, 1.0, 1e200])
@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_norm_sphere_is_scale_free(scale, kind):
    from particles import norm_sphere

    a = np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -4.0]])
    np.testing.assert_allclose(norm_sphere(a * scale, kind=kind), norm_sphere(a, kind=kind), rtol=1e-14, atol=1e-15)
    with pytest.raises(InvalidParameterError, match="constant or zero"):
        norm_sphere(np.full((1, 3), 7.0 * scale), kind="layernorm")
