"""Declared callables: :func:`declare` validates every call from the constraints of
:mod:`particles._core.params` (one per parameter) and the :class:`Relation` s between them, and
keeps the :class:`Declaration` on the function for the command line and the generated suite."""

from __future__ import annotations

import functools
import inspect

from .errors import InvalidParameterError
from .params import _show

__all__ = ["Relation", "Declaration", "declare", "declaration"]


class Relation:
    """A rule between parameters: ``test(**{name: value})`` must hold (on the checked values).

    ``breaks`` is a list of argument dicts (each valid alone) that break the rule, for the
    generated suite; the error names the first parameter and says ``message``.
    """

    def __init__(self, names, test, message: str, *, breaks=()):
        self.names, self.test, self.message = tuple(names), test, message
        self.breaks = [breaks] if isinstance(breaks, dict) else list(breaks)

    def check(self, values: dict, caller: str) -> None:
        if any(n not in values for n in self.names):  # a **kwargs name not given: nothing to relate
            return
        if not self.test(*(values[n] for n in self.names)):
            got = ", ".join(f"{n} = {_show(values[n])}" for n in self.names)
            raise InvalidParameterError(f"The {self.names[0]!r} parameter of {caller}: {self.message}; got {got}.")


class Declaration:
    """The constraints and relations of one callable's parameters."""

    def __init__(self, caller: str, constraints: dict, relations: list):
        self.caller, self.constraints, self.relations = caller, constraints, relations

    def validate(self, arguments: dict) -> dict:
        """Check and convert every declared argument, then the relations; returns the new dict."""
        out = dict(arguments)
        for name, constraint in self.constraints.items():
            if name in out:
                out[name] = constraint.check(out[name], name, self.caller)
        for rel in self.relations:
            rel.check(out, self.caller)
        return out


def declare(*, _caller: str | None = None, relations=(), **constraints):
    """Decorate a public callable with its parameters' constraints (validated at every call).

    A class is declared through its ``__init__`` (the class then carries the declaration); a name
    that is not a parameter is allowed when the callable takes ``**kwargs``, and checked when given
    there (``MultiHead.replace(**changes)`` declares the constructor's fields). A callable with a
    keyword ``check`` parameter called with ``check=False`` skips the validation: the caller
    vouches for arguments it validated itself (the solve loop's stages, a study's inner loops).
    """

    def wrap(fn):
        if isinstance(fn, type):
            fn.__init__ = declare(_caller=_caller or fn.__name__, relations=relations, **constraints)(fn.__init__)
            fn.__headflow_params__ = fn.__init__.__headflow_params__
            return fn
        sig = inspect.signature(fn)
        var_kw = next((p.name for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD), None)
        unknown = set(constraints) - set(sig.parameters)
        for rel in relations:
            unknown |= set(rel.names) - set(sig.parameters)
        if unknown and var_kw is None:  # a declaration that names no parameter is a bug of the declaration
            raise TypeError(f"declare: {fn.__qualname__} has no parameter(s) {sorted(unknown)}")
        qualname = fn.__qualname__.rsplit("<locals>.", 1)[-1].removesuffix(".__init__")
        decl = Declaration(_caller or qualname, constraints, list(relations))

        trusted = "check" in sig.parameters

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            if trusted and kwargs.get("check", True) is False:
                return fn(*args, **kwargs)
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise InvalidParameterError(f"{decl.caller}: {exc}.") from None
            bound.apply_defaults()
            # (a dataclass field's default_factory stands in the signature as a sentinel: its __init__ fills it)
            given = {k: v for k, v in bound.arguments.items() if type(v).__name__ != "_HAS_DEFAULT_FACTORY_CLASS"}
            extra = given.pop(var_kw, {}) if var_kw else {}
            for name, value in decl.validate({**given, **extra}).items():
                if name in extra:
                    bound.arguments[var_kw][name] = value
                elif name in given:
                    bound.arguments[name] = value
            return fn(*bound.args, **bound.kwargs)

        checked.__headflow_params__ = decl
        return checked

    return wrap


def declaration(fn) -> Declaration | None:
    """The :class:`Declaration` of a declared callable (bound methods included), else None."""
    return getattr(getattr(fn, "__func__", fn), "__headflow_params__", None)
