"""Hostile model files are refused with their numbers and the bound, in bounded memory: zip bombs,
JSON nested thousands deep, crafted safetensors headers."""

import json
import os
import struct
import zipfile

import numpy as np
import pytest

from metrics import sentences
from particles.extend import MAX_NESTING, read_tensors
from particles.validation import InvalidParameterError

DEEP = 100_000


def _safetensors(header: dict, data: bytes = b"") -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def _export(**members) -> dict:
    tensor = np.ones((2, 2), "<f4")
    export = {"model.safetensors": _safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}},
                                                tensor.tobytes()),
              "tokenizer.json": "{}", "config.json": '{"num_attention_heads": 2}'}
    return {**export, **members}


def _zip(path, members: dict):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


# ---------------------------------------------------------------- model files


def test_an_intact_export_is_still_read(tmp_path):
    tensors, tokenizer, config = sentences.read_model_zip(_zip(tmp_path / "m.zip", _export()))
    assert tensors["w"].shape == (2, 2) and tokenizer == "{}" and config == {"num_attention_heads": 2}


@pytest.mark.parametrize("member", ["model.safetensors", "tokenizer.json"])
def test_a_zip_bomb_member_is_refused_with_its_ratio_before_it_is_inflated(tmp_path, member):
    """A few MB of zeros deflate about a thousandfold: the member was inflated whole (to a MemoryError at scale)."""
    path = _zip(tmp_path / "bomb.zip", _export(**{member: bytes(4 << 20)}))
    assert os.path.getsize(path) < 20_000
    with pytest.raises(InvalidParameterError, match=rf"its member '{member}' declares 4,194,304 bytes from [\d,]+ "
                                                    r"compressed bytes \(a ratio of [\d,]+\), beyond the ratio of "
                                                    r"100 .* a zip bomb"):
        sentences.read_model_zip(path)


def test_a_member_beyond_its_size_bound_is_refused_naming_the_bound(tmp_path, monkeypatch):
    from metrics._studies import model_files

    monkeypatch.setattr(model_files, "MAX_JSON_BYTES", 1000)
    path = _zip(tmp_path / "big.zip", _export(**{"tokenizer.json": json.dumps({"v": list(range(1000))})}))
    with pytest.raises(InvalidParameterError, match=r"its member 'tokenizer.json' declares [\d,]+ bytes, beyond the "
                                                    r"1,000 bytes headflow inflates in memory for it"):
        sentences.read_model_zip(path)


def test_a_member_that_inflates_past_its_declared_size_is_stopped_while_streamed(tmp_path, monkeypatch):
    """The declared size is the zip's word only: the bytes inflated so far are counted too."""
    from metrics._studies import model_files

    path = _zip(tmp_path / "m.zip", _export(**{"config.json": json.dumps({"v": list(range(3000))})}))
    calls = []
    real = model_files._check_inflation

    def lying(info, size, limit, where, verb):  # the first check sees a declared size of 10 bytes
        calls.append(verb)
        return real(info, 10 if verb == "declares" else size, 10_000, where, verb)

    monkeypatch.setattr(model_files, "_check_inflation", lying)
    with pytest.raises(InvalidParameterError, match=r"inflates to [\d,]+ bytes, beyond the 10,000 bytes"):
        sentences.read_model_zip(path)
    assert "inflates to" in calls


@pytest.mark.parametrize("member", ["config.json", "tokenizer.json"])
def test_json_nested_a_hundred_thousand_deep_is_refused_by_name(tmp_path, member):
    """It ended in a bare RecursionError."""
    deep = '{"a": ' * DEEP + "1" + "}" * DEEP
    for source in (_zip(tmp_path / "deep.zip", _export(**{member: deep})), tmp_path / "folder"):
        if source.suffix != ".zip":
            source.mkdir()
            for name, content in _export(**{member: deep}).items():
                (source / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(InvalidParameterError, match=rf"its {member} nests arrays or objects 100,000 levels deep, "
                                                        rf"beyond the {MAX_NESTING} levels headflow parses"):
            sentences.read_model_zip(source)


def test_brackets_in_json_strings_do_not_count_as_nesting(tmp_path):
    tokenizer = json.dumps({"vocab": {"[" * 100: 1, "[CLS]": 2, '\\"[[[': 3}})
    assert sentences.read_model_zip(_zip(tmp_path / "m.zip", _export(**{"tokenizer.json": tokenizer})))[1] == tokenizer


def test_a_tokenizer_nested_deep_is_refused_by_tokenize_too():
    with pytest.raises(InvalidParameterError, match="'tokenizer_json' parameter of tokenize nests arrays or objects "
                                                    "100,001 levels deep"):
        sentences.tokenize("{" + '"a": [' * DEEP + "]" * DEEP + "}", "text")


@pytest.mark.parametrize("shape, said", [
    ([1] * 100, "a shape of 100 dimensions, beyond the 32 headflow reads"),
    ([True, 1], r"the shape \[True, 1\], not a list of non-negative whole numbers"),
    ([0, 2**62], r"4.61e\+18 elements \(zero dimensions counted as one\), beyond the 2.81e\+14"),
    ([2.0, 2], "not a list of non-negative whole numbers"),
])
def test_crafted_safetensors_shapes_are_refused_before_any_allocation(shape, said):
    """They ended in bare numpy errors (too many dimensions, an array too big)."""
    blob = _safetensors({"a": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}, bytes(4))
    with pytest.raises(InvalidParameterError, match=said):
        read_tensors(blob)


def test_a_safetensors_header_nested_deep_is_named():
    header = b"[" * DEEP + b"]" * DEEP
    with pytest.raises(InvalidParameterError, match=r"its header nests arrays or objects 100,000 levels deep"):
        read_tensors(struct.pack("<Q", len(header)) + header)
