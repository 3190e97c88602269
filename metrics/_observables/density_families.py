r"""Densities from a config: a named family with parameters (:class:`FamilyDensity`) or an arithmetic
expression of the coordinates parsed with ``ast`` (:class:`ExpressionDensity`; never ``eval``).
Both follow the density convention of :mod:`metrics._observables.density`: ``density_fn(points)``, points (m, d).
"""

from __future__ import annotations

import numpy as np

from particles.extend import LOG_OVERFLOW
from particles.validation import Instance, Integer, Interval, InvalidParameterError, Options, declare

__all__ = ["ExpressionDensity", "FamilyDensity"]


_FUNCTIONS = {name: getattr(np, name) for name in ("sin", "cos", "tan", "exp", "log", "sqrt", "abs", "tanh", "sinh",
                                                   "cosh", "arcsin", "arccos", "arctan", "minimum", "maximum")}
_CONSTANTS = {"pi": np.pi, "e": np.e}
_MAX_EXPRESSION = 1000


@declare(text=Instance(str, test=lambda t: bool(t.strip()) and len(t) <= _MAX_EXPRESSION,
                       what=f"a non-empty expression of x1..xd, at most {_MAX_EXPRESSION} characters",
                       bad=("", "   ", "1 +" * _MAX_EXPRESSION, 3, None)), d=Integer(2))
class ExpressionDensity:
    r"""``density_fn(points)`` given by an arithmetic expression of the coordinates ``x1 … xd``.

    The text is parsed with :mod:`ast` and evaluated by walking the tree over numpy arrays: only
    numbers, the names ``x1 … xd``, ``pi`` and ``e``, the operators ``+ - * / **`` and the
    functions ``sin cos tan exp log sqrt abs tanh sinh cosh arcsin arccos arctan minimum
    maximum`` are accepted; anything else (attributes, subscripts, comprehensions, other names)
    is an error naming it. The text is never handed to ``eval``. Numbers are float64, so
    ``9**9**9`` overflows to inf (and the density check rejects it) instead of running forever.

    Examples
    --------
    >>> import numpy as np
    >>> rho = ExpressionDensity("1 + 0.5 * x3", d=3)
    >>> rho(np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    array([1.5, 1. ])
    >>> ExpressionDensity("__import__('os')", d=3)
    Traceback (most recent call last):
    ...
    particles.validation.InvalidParameterError: expression "__import__('os')": the function '__import__' is not ...
    """

    def __init__(self, text: str, d: int):
        self.text, self.d = text, int(d)
        self._tree = self._parse()

    def _fail(self, what: str):
        names = ", ".join(f"x{i + 1}" for i in range(self.d))
        raise InvalidParameterError(
            f"expression {self.text!r}: {what}; use numbers, {names}, pi, e, + - * / ** and the functions "
            f"{', '.join(_FUNCTIONS)}.")

    def _parse(self):
        import ast

        try:
            tree = ast.parse(self.text.strip(), mode="eval")
        except SyntaxError as exc:
            self._fail(f"not an arithmetic expression ({exc.msg})")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
                    name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                    self._fail(f"the function {name!r} is not allowed")
                if node.keywords:
                    self._fail(f"keyword arguments to {node.func.id}() are not allowed")
            elif isinstance(node, ast.Name):
                if not (node.id in _CONSTANTS or node.id in _FUNCTIONS or self._coordinate(node.id) is not None):
                    self._fail(f"unknown name {node.id!r}")
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                    self._fail(f"the constant {node.value!r} is not a number")
            elif not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load, ast.Add, ast.Sub, ast.Mult,
                                       ast.Div, ast.Pow, ast.UAdd, ast.USub)):
                self._fail(f"{type(node).__name__} ({ast.unparse(node) if isinstance(node, ast.expr) else ''}) "
                           "is not allowed")
        return tree.body

    def _coordinate(self, name: str):
        if name.startswith("x") and name[1:].isdigit() and 1 <= int(name[1:]) <= self.d:
            return int(name[1:]) - 1
        return None

    def _eval(self, node, x):
        import ast
        import operator

        if isinstance(node, ast.Constant):
            return np.float64(node.value)
        if isinstance(node, ast.Name):
            k = self._coordinate(node.id)
            return x[:, k] if k is not None else np.float64(_CONSTANTS[node.id])
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, x)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
                   ast.Pow: operator.pow}
            return ops[type(node.op)](self._eval(node.left, x), self._eval(node.right, x))
        return _FUNCTIONS[node.func.id](*(self._eval(a, x) for a in node.args))

    def __call__(self, points):
        x = np.asarray(points, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise InvalidParameterError(f"expression {self.text!r} is a density on S^{self.d - 1}: points must have "
                                        f"shape (m, {self.d}); got {x.shape}.")
        with np.errstate(all="ignore"):  # overflow or a domain error gives inf/nan, which check_density_fn reports
            v = self._eval(self._tree, x)
        return np.broadcast_to(np.asarray(v, dtype=np.float64), (len(x),)).copy()

    def __getstate__(self):
        return {"text": self.text, "d": self.d}

    def __setstate__(self, state):
        self.__init__(state["text"], state["d"])

    def __repr__(self):
        return f"ExpressionDensity({self.text!r}, d={self.d})"


_FAMILIES = {"uniform": (), "cosine": ("amplitude", "mode"), "von_mises": ("concentration",)}


@declare(family=Options(*_FAMILIES), d=Integer(2), amplitude=Interval(0, 1, closed="left"), mode=Integer(0),
         concentration=Interval(0, LOG_OVERFLOW, hint=f"exp({LOG_OVERFLOW:g}) is near the float64 limit."))
class FamilyDensity:
    r"""A named density family on :math:`S^{d-1}`, as ``density_fn(points)``; ``x_1`` is the
    coordinate along the first axis, :math:`x_1 = \cos\theta` on :math:`S^1`.

    - ``"uniform"``: 1;
    - ``"cosine"``: :math:`1 + a\,T_k(x_1) = 1 + a\cos(k\,\angle(x, e_1))` (``amplitude`` a in
      [0, 1), ``mode`` k ≥ 0 an integer; on :math:`S^1`, :math:`1 + a\cos k\theta`);
    - ``"von_mises"``: :math:`e^{\kappa (x_1 - 1)}` (von Mises–Fisher about :math:`e_1`,
      ``concentration`` κ ≥ 0).

    >>> import numpy as np
    >>> rho = FamilyDensity("cosine", 2, amplitude=0.5, mode=2)
    >>> th = np.array([0.0, np.pi / 2])
    >>> np.allclose(rho(np.stack([np.cos(th), np.sin(th)], 1)), 1 + 0.5 * np.cos(2 * th))
    True
    """

    FAMILIES = _FAMILIES

    def __init__(self, family: str, d: int, **params):
        missing = set(self.FAMILIES[family]) - set(params)
        extra = set(params) - set(self.FAMILIES[family])
        if missing or extra:
            raise InvalidParameterError(f"the {family!r} density takes the parameters {list(self.FAMILIES[family])}; "
                                        f"missing {sorted(missing)}, unexpected {sorted(extra)}.")
        self.family, self.d, self.params = family, d, params

    def __call__(self, points):
        x = np.asarray(points, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise InvalidParameterError(f"the {self.family!r} density is on S^{self.d - 1}: points must have shape "
                                        f"(m, {self.d}); got {x.shape}.")
        x1 = np.clip(x[:, 0], -1.0, 1.0)
        if self.family == "uniform":
            return np.ones(len(x))
        if self.family == "cosine":
            return 1.0 + self.params["amplitude"] * np.cos(self.params["mode"] * np.arccos(x1))
        return np.exp(self.params["concentration"] * (x1 - 1.0))

    def __repr__(self):
        args = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"FamilyDensity({self.family!r}, {self.d}{args})"
