"""Hostile model files and configs are refused with their numbers and the bound, in bounded memory:
zip bombs, JSON and TOML nested thousands deep, crafted safetensors headers, /dev/zero and endless
pipes as configs, a million heads, output names the file system or netCDF cannot hold."""

import errno
import json
import os
import struct
import threading
import zipfile

import numpy as np
import pytest

from headflow import cli
from headflow._config import ConfigError, load_config
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


@pytest.mark.parametrize("zip64", [False, True])
def test_a_zip_of_too_many_entries_is_refused_before_its_directory_is_read(tmp_path, zip64):
    """zipfile holds a zip's whole directory in memory (about 500 bytes an entry, from 46 bytes in the file)."""
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name, content in _export().items():
            z.writestr(name, content)
        for i in range(10_001):
            z.writestr(f"pad/{i}", b"")
    if zip64:  # (the count of the classic end record is then 0xFFFF, and the zip64 record holds it)
        data = bytearray(path.read_bytes())
        end = data.rfind(b"PK\x05\x06")
        record = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, 10_004, 10_004,
                             *struct.unpack_from("<II", data, end + 12))
        locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, end, 1)
        data[end + 8:end + 12] = struct.pack("<HH", 0xFFFF, 0xFFFF)
        data[end:end] = record + locator
        path.write_bytes(bytes(data))
    with pytest.raises(InvalidParameterError, match=r"holds 10,004 entries, beyond the 10,000 headflow reads"):
        sentences.read_model_zip(path)


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
    ([True, 1], r"the shape \[True, 1\], not a list of non-negative integers"),
    ([0, 2**62], r"4.61e\+18 elements \(zero dimensions counted as one\), beyond the 2.81e\+14"),
    ([2.0, 2], "not a list of non-negative integers"),
])
def test_crafted_safetensors_shapes_are_refused_before_any_allocation(shape, said):
    """They ended in bare numpy errors (too many dimensions, an array too big)."""
    blob = _safetensors({"a": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}, bytes(4))
    with pytest.raises(InvalidParameterError, match=said):
        read_tensors(blob)


@pytest.mark.parametrize("dtype", [["F32"], {"F32": 1}])
def test_a_dtype_that_is_not_a_name_is_refused_by_name(dtype):
    """An unhashable dtype ended in a bare TypeError."""
    with pytest.raises(InvalidParameterError, match=r"tensor 'a' has dtype .*, which headflow does not read"):
        read_tensors(_safetensors({"a": {"dtype": dtype, "shape": [1], "data_offsets": [0, 4]}}, bytes(4)))


def test_a_safetensors_header_nested_deep_is_named():
    header = b"[" * DEEP + b"]" * DEEP
    with pytest.raises(InvalidParameterError, match=r"its header nests arrays or objects 100,000 levels deep"):
        read_tensors(struct.pack("<Q", len(header)) + header)


# ---------------------------------------------------------------- configs


def test_dev_zero_as_a_config_stops_at_the_bound():
    """It was read until a MemoryError at 3 GiB."""
    with pytest.raises(ConfigError, match=r"config file '/dev/zero' gives more than the 4,194,304 bytes headflow "
                                          r"reads from such a file \(it was read no further"):
        load_config("simulate", __import__("pathlib").Path("/dev/zero"))


def test_an_endless_pipe_as_a_config_stops_at_the_bound(tmp_path):
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    stop = threading.Event()

    def write():
        try:
            with open(fifo, "wb") as fh:
                while not stop.is_set():
                    fh.write(b"# endless\n" * 10_000)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        with pytest.raises(ConfigError, match="gives more than the 4,194,304 bytes"):
            load_config("simulate", fifo)
    finally:
        stop.set()
        writer.join(5)


def test_a_large_config_file_is_refused_with_its_size(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("[run]\nn = 8\n" + "# padding\n" * 500_000)
    with pytest.raises(ConfigError, match=r"config file '.*big.toml' holds 5,000,012 bytes, beyond the 4,194,304"):
        load_config("simulate", path)


@pytest.mark.parametrize("body", [
    "[model]\nlambdas = " + "[" * 5000 + "]" * 5000,
    "[model]\nM = " + "{a = " * 5000 + "1" + "}" * 5000,
    "[output." + ".".join(["a"] * 5000) + "]\nx = 1",
])
def test_toml_nested_thousands_deep_is_refused_by_name(tmp_path, body):
    """It ended in a RecursionError traceback (arrays, inline tables); dotted tables nest without recursion."""
    path = tmp_path / "deep.toml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=rf"nests tables or arrays more than {MAX_NESTING} levels deep"):
        load_config("simulate", path)


def test_the_deepest_valid_config_is_read():
    cfg = load_config("simulate", "[model]\nd = 2\nM = [[[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.0], [0.0, 0.5]]]")
    assert len(cfg["model"]["M"]) == 2


@pytest.mark.parametrize("command, body, key", [
    ("simulate", "[model]\nlambdas = [" + ", ".join(["1.0"] * 2000) + "]", r"\[model\] lambdas gives 2,000 heads"),
    ("simulate", "[model]\nd = 1\nM = [" + ", ".join(["[[1.0]]"] * 1500) + "]", r"\[model\] M gives 1,500 heads"),
    ("sweep", "[sweep]\ngrid = { n_heads = [1, 1000000] }", r"\[sweep\] grid.n_heads gives 1,000,000 heads"),
    ("sweep", "[sweep]\ngrid = { lambdas = [[1.0], [" + ", ".join(["1.0"] * 1100) + "]] }",
     r"\[sweep\] grid.lambdas gives 1,100 heads"),
])
def test_a_million_heads_is_refused_from_the_config_alone(tmp_path, capsys, monkeypatch, command, body, key):
    """It printed nothing for 40 s (a step was timed before any refusal): now refused before a model is built."""
    from headflow import _work

    monkeypatch.setattr(_work, "time_steps", lambda *a, **k: pytest.fail("a step was timed"))
    path = tmp_path / "heads.toml"
    path.write_text(body + f'\n[output]\npath = "{tmp_path / "out.nc"}"\n')
    assert cli.main([command, str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "beyond the 1,024 headflow runs from a config" in err and "Traceback" not in err
    assert __import__("re").search(key, err)


# ---------------------------------------------------------------- output names


def _run(tmp_path, capsys, out) -> str:
    cfg = tmp_path / "run.toml"
    cfg.write_text("[run]\nn = 4\nt1 = 0.1\ndt = 0.05\nn_saves = 2\n")
    assert cli.main(["simulate", str(cfg), "--out", out, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "wrote" not in err
    return err


def test_an_output_name_with_a_byte_that_is_not_utf8_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """It failed with a UnicodeEncodeError after the whole run."""
    monkeypatch.setattr("particles.simulate", lambda *a, **k: pytest.fail("the run started"))
    out = os.fsdecode(os.fsencode(str(tmp_path)) + b"/run\xff.nc")  # (as sys.argv holds such a name)
    err = _run(tmp_path, capsys, out)
    assert r"holds the byte(s) b'\xff', which are not UTF-8 text" in err
    assert not list(tmp_path.glob("run*.nc*"))


def test_an_output_name_too_long_for_the_file_system_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("particles.simulate", lambda *a, **k: pytest.fail("the run started"))
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    err = _run(tmp_path, capsys, str(tmp_path / ("r" * (limit - 3) + ".nc")))
    assert f"beyond the {limit} bytes a name may hold on this file system (PC_NAME_MAX" in err
    assert "'.part" in err  # (the name it is written under first is the one that does not fit)
    err = _run(tmp_path, capsys, str(tmp_path / ("d" * (limit + 1)) / "run.nc"))
    assert f"the folder '{'d' * (limit + 1)}' it would create is {limit + 1} bytes long" in err
    path_limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    folders = "/".join(["f" * 200] * (path_limit // 200 + 1))
    err = _run(tmp_path, capsys, str(tmp_path / folders / "run.nc"))
    assert f"bytes long, beyond the {path_limit} bytes a path may hold on this file system (PC_PATH_MAX" in err


def test_a_missing_parent_is_made_and_a_read_only_folder_refused_before_the_run(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "run.toml"
    cfg.write_text("[run]\nn = 4\nt1 = 0.1\ndt = 0.05\nn_saves = 2\n")
    assert cli.main(["simulate", str(cfg), "--out", str(tmp_path / "new" / "deeper" / "run.nc"),
                     "--no-progress"]) == 0
    assert (tmp_path / "new" / "deeper" / "run.nc").is_file()
    capsys.readouterr()
    import particles.extend

    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:  # (root writes into any folder: the folder answers as a read-only mount would)
        real = particles.extend.unwritable
        monkeypatch.setattr(particles.extend, "unwritable", lambda folder: OSError(errno.EROFS, os.strerror(
            errno.EROFS)) if os.path.samefile(folder, locked) else real(folder))
    locked.chmod(0o500)
    monkeypatch.setattr("particles.simulate", lambda *a, **k: pytest.fail("the run started"))
    try:
        err = _run(tmp_path, capsys, str(locked / "sub" / "run.nc"))
        assert f"the folder '{locked}' is not writable" in err and "the run was not started" in err
    finally:
        locked.chmod(0o700)
