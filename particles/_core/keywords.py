"""Keyword-only parameters with a deprecation path: :func:`keyword_only` maps a call that still
passes them by position (the order of an earlier release) to keywords, with a ``DeprecationWarning``
naming the call to write (scipy's rule for the same change), or refuses it where the old order was
itself the trap (``refuse=True``: a sampler's ``d`` swapped with ``n``)."""

from __future__ import annotations

import functools
import inspect
import warnings

from .errors import InvalidParameterError

__all__ = ["keyword_only"]


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"<{type(value).__name__}>"


def keyword_only(*names: str, refuse: bool = False):
    """Decorate a callable whose parameters ``names`` became keyword-only; ``names`` lists them in the
    order earlier releases took them by position after the positional ones.

    A call passing them by position is mapped to those keywords with a ``DeprecationWarning`` that
    writes the call out with keywords (so a swap shows: ``beta_star(16, n=3, alpha=0.7)``), or
    refused with an :class:`InvalidParameterError` saying the same when ``refuse`` is true.
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        kinds = {p.name: p.kind for p in params}
        if any(kinds.get(n) is not inspect.Parameter.KEYWORD_ONLY for n in names):
            raise TypeError(f"keyword_only: {fn.__qualname__} must take {names} as keyword-only parameters")
        n_pos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        skip = 1 if params and params[0].name in ("self", "cls") else 0
        caller = fn.__qualname__.removesuffix(".__init__")

        @functools.wraps(fn)
        def shim(*args, **kwargs):
            if len(args) <= n_pos:
                return fn(*args, **kwargs)
            extra = args[n_pos:]
            if len(extra) > len(names):
                raise InvalidParameterError(
                    f"{caller} takes {n_pos - skip} positional argument(s) and the keyword-only {', '.join(names)}; "
                    f"got {len(args) - skip} positional arguments.")
            moved = dict(zip(names, extra))
            twice = sorted(set(moved) & set(kwargs))
            if twice:
                raise InvalidParameterError(f"{caller} got {', '.join(twice)} both by position and by keyword.")
            shown = [_shown(a) for a in args[skip:n_pos]] + [f"{k}={_shown(v)}" for k, v in moved.items()]
            call = f"{caller}({', '.join(shown)}, ...)" if kwargs else f"{caller}({', '.join(shown)})"
            if refuse:
                raise InvalidParameterError(
                    f"{caller} takes {', '.join(moved)} by keyword only (by position they are easily swapped); "
                    f"write {call} if that is what you meant.")
            warnings.warn(
                f"Passing {', '.join(moved)} of {caller} by position is deprecated (by position they are easily "
                f"swapped) and will be an error; write {call} if that is what you meant.",
                DeprecationWarning, stacklevel=2)
            return fn(*args[:n_pos], **moved, **kwargs)

        shim.__headflow_keyword_only__ = names
        return shim

    return wrap
