r"""The safetensors format, read with numpy alone: every float width checkpoints ship, bf16 included.

A safetensors file is an 8-byte little-endian header length :math:`N`, :math:`N` bytes of JSON
(``{name: {"dtype", "shape", "data_offsets": [begin, end]}}``, plus an optional
``__metadata__``), then the tensors' bytes, little-endian, C order. numpy has no bfloat16, so
the ``safetensors`` package cannot hand one to numpy; here a bf16 value (the top 16 bits of a
float32: sign, 8 exponent bits, 7 mantissa bits) becomes that float32 exactly by a 16-bit
shift. fp16 and fp32 are numpy types; 8-bit floats are refused with the conversion to make.
Every way a file can be damaged (empty, truncated, a header that is not JSON, offsets outside
the data, a size that disagrees with the shape) is an :class:`InvalidParameterError` naming
the file and, where one is at fault, the tensor.

A hostile header is refused before anything is allocated: a header longer than the format's
100,000,000 bytes, JSON nested deeper than :data:`particles.extend.MAX_NESTING` levels, a
shape of more than :data:`MAX_DIMS` dimensions, a dimension that is not a whole number (``true``
included), or more than :data:`MAX_ELEMENTS` elements (its zero dimensions counted as one: numpy
cannot make a (0, 2**62) array either). Every entry is checked before the first tensor is copied
out, so reading a file holds at most the file (memory-mapped) and its tensors.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from .._core.errors import InvalidParameterError
from .._core.files import MAX_NESTING, nesting

__all__ = ["parse_safetensors", "DTYPES"]

#: safetensors dtype -> numpy dtype (little-endian); "BF16" is read as uint16 and shifted into float32
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
_MAX_HEADER = 100_000_000  # the format's own limit on the JSON header
#: the most dimensions of a tensor's shape (numpy 1's own limit; checkpoints' tensors have at most 5)
MAX_DIMS = 32
#: the most elements of one tensor, its zero dimensions counted as one (2**48: 256 T elements, far beyond any
#: checkpoint's tensor, and far below the 2**63 bytes numpy can address)
MAX_ELEMENTS = 2**48
_CONVERT = ("convert it to float16, bfloat16 or float32 first (in torch: "
            "`safetensors.torch.save_file({k: v.float() for k, v in tensors.items()}, path)`)")


#: first bytes of files taken for safetensors by mistake, and what to do with them
_MAGIC = ((b"PK\x03\x04", "a zip archive: a PyTorch checkpoint (torch.save, e.g. pytorch_model.bin) or a model "
                          "export; convert a checkpoint with safetensors.torch.save_file(torch.load(path), "
                          "'model.safetensors'), read an export with metrics.sentences.read_model_zip"),
          (b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip, or gzip.decompress of its bytes)"),
          (b"version https://git-lfs", "a Git LFS pointer, not the tensors: fetch them (git lfs pull in the clone) or "
                                       "download the file itself"),
          *((tag, "a web page (HTML), not the tensors: the download saved a page; download the file itself")
            for tag in (b"<!DOCTYPE", b"<!doctype", b"<html")))


def _bad(where: str, what: str) -> InvalidParameterError:
    return InvalidParameterError(f"source of read_tensors: {where} is not a readable safetensors file: {what}.")


def _header(buf, where: str) -> tuple[dict, int]:
    """The JSON header and the offset where the tensors' bytes begin."""
    if len(buf) < 8:
        raise _bad(where, f"it holds {len(buf)} bytes, fewer than the 8 of the header length (empty or truncated "
                          "file; download or save it again)")
    n = int(np.frombuffer(buf[:8], "<u8")[0])
    # (first bytes that can also begin a safetensors file: they name the file's kind only once its header fails)
    kind = next((f"it is {k}" for magic, k in _MAGIC if bytes(buf[:len(magic)]) == magic), None)
    if n > min(_MAX_HEADER, len(buf) - 8):
        raise _bad(where, kind or f"the header claims {n} bytes but the file holds {len(buf) - 8} after the length "
                                  "(truncated, or not a safetensors file)")
    try:
        text = bytes(buf[8:8 + n]).decode("utf-8")
        depth = nesting(text)  # (a header is one flat object: deep arrays are damage, refused before json recurses)
        if depth > MAX_NESTING:
            raise _bad(where, kind or f"its header nests arrays or objects {depth:,} levels deep, beyond the "
                                      f"{MAX_NESTING} headflow parses (a damaged header; download or save the file "
                                      "again)")
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(where, kind or f"its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _bad(where, f"its header is a JSON {type(header).__name__}, not an object of tensors")
    return header, 8 + n


def _check_shape(name: str, shape, where: str) -> None:
    """A shape numpy can make: a list of at most :data:`MAX_DIMS` whole numbers >= 0 (no bool), with at most
    :data:`MAX_ELEMENTS` elements (zero dimensions counted as one)."""
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                              for s in shape):
        raise _bad(where, f"tensor {name!r} has the shape {shape!r}, not a list of non-negative integers (a "
                          "damaged header)")
    if len(shape) > MAX_DIMS:
        raise _bad(where, f"tensor {name!r} has a shape of {len(shape)} dimensions, beyond the {MAX_DIMS} headflow "
                          "reads (a damaged header)")
    elements = math.prod(max(s, 1) for s in shape)
    if elements > MAX_ELEMENTS:
        raise _bad(where, f"tensor {name!r} has the shape {shape!r}: {elements:.3g} elements (zero dimensions "
                          f"counted as one), beyond the {MAX_ELEMENTS:.3g} headflow reads (a damaged header)")


def _entry(name: str, spec, where: str, data_len: int) -> tuple[str, tuple, int, int]:
    """(numpy dtype, shape, begin, end) of one header entry, each field checked."""
    if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= set(spec):
        raise _bad(where, f"tensor {name!r} has no dtype, shape and data_offsets in the header")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise _bad(where, f"tensor {name!r} has dtype {dtype!r}, which headflow does not read (it reads "
                          f"{', '.join(DTYPES)}); {_CONVERT}")
    _check_shape(name, shape, where)
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise _bad(where, f"tensor {name!r} has data_offsets {offsets!r}, not a pair [begin, end] of whole byte "
                          "offsets (a damaged header)")
    if not 0 <= offsets[0] <= offsets[1]:
        raise _bad(where, f"tensor {name!r} has data_offsets {offsets!r}: begin must be >= 0 and <= end (a damaged "
                          "header)")
    if offsets[1] > data_len:
        raise _bad(where, f"tensor {name!r} has data_offsets {offsets!r} past the end of the {data_len} data bytes "
                          "(a truncated file: download or save it again)")
    size = math.prod(shape) * np.dtype(DTYPES[dtype]).itemsize
    if offsets[1] - offsets[0] != size:
        raise _bad(where, f"tensor {name!r} of shape {tuple(shape)} and dtype {dtype} needs {size} bytes; its "
                          f"data_offsets span {offsets[1] - offsets[0]}")
    return dtype, tuple(shape), offsets[0], offsets[1]


def parse_safetensors(buf, where: str) -> dict:
    """The tensors of safetensors bytes ``buf`` (bytes, or a memory map of a file) as numpy arrays
    (bf16 as float32, the rest in their own dtype); ``where`` names the source in errors."""
    header, start = _header(buf, where)
    data = memoryview(buf)[start:]
    entries = {name: _entry(name, spec, where, len(data)) for name, spec in header.items() if name != "__metadata__"}
    spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items())
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:  # two tensors would read the same bytes: the header is damaged
            raise _bad(where, f"tensors {first!r} and {second!r} have overlapping data_offsets (a damaged header)")
    out = {}  # (every entry is checked before the first tensor is copied out)
    for name, (dtype, shape, begin, end) in entries.items():
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":  # the 16 bits are the top half of a float32: shift them back into place
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        # own, writable arrays (as the safetensors package returns): no view keeps the buffer or the file open
        out[name] = arr if dtype == "BF16" else arr.copy()
    return out


def read_file(path) -> dict:
    """:func:`parse_safetensors` of a file (memory-mapped while the tensors are copied out)."""
    where = repr(os.fspath(path))
    try:
        if os.path.getsize(path) == 0:
            return parse_safetensors(b"", where)
        buf = np.memmap(path, dtype=np.uint8, mode="r")
    except OSError as exc:
        raise _bad(where, f"it cannot be read ({exc.strerror or exc})") from None
    return parse_safetensors(buf, where)
