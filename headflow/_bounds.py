"""The bounds a config is read within, so that a hostile file is refused in bounded memory and time,
before a model is built or a step timed (each refusal names the number found and the bound):

- its bytes: at most :data:`MAX_CONFIG_BYTES` are read, in one bounded read, so ``/dev/zero`` or an
  endless pipe stops there;
- its nesting: tables and arrays at most :data:`particles.extend.MAX_NESTING` deep (tomllib recurses
  once per level of arrays and inline tables, and ended in a RecursionError traceback);
- its heads: at most :data:`MAX_HEADS` (``[model] lambdas`` or ``M``, ``[sweep] grid.n_heads`` or
  ``grid.lambdas``), counted on the parsed TOML before its values are checked one by one.

Each function takes the error class to raise (:class:`headflow._config.ConfigError`).
"""

from __future__ import annotations

__all__ = ["MAX_CONFIG_BYTES", "MAX_HEADS", "read_config", "check_depth", "check_heads"]

#: the most bytes of a config file that are read (4 MiB, which tomllib parses in a few seconds; M and W of 8
#: heads of d = 100 take about 3 MB)
MAX_CONFIG_BYTES = 2**22
#: the most heads a config gives (transformers have at most about a hundred per layer): each head's pass costs
#: tens of microseconds per evaluation, so a million heads would take about a minute per evaluation
MAX_HEADS = 1024


def read_config(path, command: str, error) -> bytes:
    """The bytes of a config file, at most :data:`MAX_CONFIG_BYTES`; OSError propagates."""
    from particles.extend import read_bounded
    from particles.validation import InvalidParameterError

    try:
        return read_bounded(path, MAX_CONFIG_BYTES, f"config file {str(path)!r}", "a config is a few lines of TOML: "
                            f"start from `headflow {command} --example`")
    except InvalidParameterError as exc:
        raise error(str(exc)) from None


def _depth(value, bound: int) -> int:
    """How deep tables and arrays nest in ``value``, counted without recursion and no further than ``bound + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level <= bound:
                stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_depth(raw, command: str, error) -> None:
    """Refuse a parsed config nested deeper than :data:`particles.extend.MAX_NESTING` (``raw`` None: so deep
    that the parser gave up)."""
    from particles.extend import MAX_NESTING

    if raw is None or _depth(raw, MAX_NESTING) > MAX_NESTING:
        raise error(f"the config nests tables or arrays more than {MAX_NESTING} levels deep (the deepest a config "
                    "needs, a list of M matrices, is 5): a damaged or generated file. Start from "
                    f"`headflow {command} --example`.")


def _count(value, heads) -> int:
    """The heads of one raw config value (``heads`` of it); 0 for a value of another type (its key's check
    names it)."""
    try:
        return int(heads(value))
    except (TypeError, ValueError, IndexError, KeyError):
        return 0


def check_heads(raw: dict, error) -> None:
    """Refuse a parsed config that gives more than :data:`MAX_HEADS` heads, from the numbers alone."""
    model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
    sweep = raw.get("sweep") if isinstance(raw.get("sweep"), dict) else {}
    grid = sweep.get("grid") if isinstance(sweep.get("grid"), dict) else {}
    counts = {
        "[model] lambdas": _count(model.get("lambdas"), len),
        "[model] M": _count(model.get("M"), lambda M: len(M) if isinstance(M[0][0], list) else 1),
        "[sweep] grid.n_heads": _count(grid.get("n_heads"), lambda v: max(n for n in v if isinstance(n, int))),
        "[sweep] grid.lambdas": _count(grid.get("lambdas"), lambda v: max(len(h) for h in v if isinstance(h, list))),
    }
    key = max(counts, key=counts.get)
    if counts[key] > MAX_HEADS:
        raise error(f"{key} gives {counts[key]:,} heads, beyond the {MAX_HEADS:,} headflow runs from a config: each "
                    "head's pass costs tens of microseconds per evaluation, so these would take about "
                    f"{counts[key] * 5e-5:,.0f} s per evaluation. Give at most {MAX_HEADS:,} heads. Nothing was run.")
