"""A kind is one object carrying its passes (issue 55): registration refuses a kind lacking a piece,
naming it; no pass is chosen by a name; a kind's parameters are recorded only when they differ
from their defaults."""

import ast
import pathlib
from dataclasses import dataclass

import numpy as np
import pytest

from particles import Ensemble, MultiHead, project_tangent, sample_uniform
from particles.extend import ATTENTION_KINDS, HeadSums, Kind, Refusal, register_kind
from particles.validation import InvalidParameterError

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: the modules that run a model's passes: each asks the kind object, never a name or a tag
PASS_MODULES = ["particles/_model/passes.py", "particles/_model/ensemble.py", "particles/_model/dense.py",
                "particles/_model/multihead.py", "particles/_model/energies.py"]


@dataclass(frozen=True)
class _Constant(Kind):
    """A kind whose pass returns a fixed mean (its parameter ``e``): the velocity can come from nowhere else."""

    name: str = "constant_test"
    e: float = 1.0
    fast = Refusal("no fast route: use the exact pass")
    mean_field = Refusal("no mean field: simulate the particles")

    def exact(self, model, x, sources, weights, transpose):
        return [HeadSums(mean=np.full(x.shape, self.e)) for _ in range(model.n_heads)]

    def ensemble(self, left, xs):
        return HeadSums(mean=np.full(xs.shape, self.e))

    def output(self, p, Wt, n, c):
        return p.mean @ Wt

    def scale(self, n):
        return 1.0

    def dense(self, s):
        return np.zeros_like(s)


@pytest.fixture
def constant_kind():
    kind = register_kind(_Constant())
    try:
        yield kind
    finally:
        del ATTENTION_KINDS[kind.name]


def test_registration_refuses_a_kind_lacking_a_pass_naming_it():
    @dataclass(frozen=True)
    class NoEnsemble(_Constant):
        name: str = "no_ensemble_test"
        ensemble = None

    with pytest.raises(InvalidParameterError, match=r"lacks ensemble\b"):
        register_kind(NoEnsemble())
    assert "no_ensemble_test" not in ATTENTION_KINDS

    @dataclass(frozen=True)
    class Bare(Kind):
        name: str = "bare_test"

    with pytest.raises(InvalidParameterError, match="lacks exact, ensemble, output, scale, dense, fast, mean_field"):
        register_kind(Bare())
    with pytest.raises(InvalidParameterError, match="registered already"):
        register_kind(ATTENTION_KINDS["softmax"])


def test_a_new_kind_runs_its_own_pass_not_a_tagged_one(constant_kind, rng):
    x = sample_uniform(6, d=3, rng=rng)
    W = rng.standard_normal((2, 3, 3))
    M = np.stack([np.eye(3)] * 2)
    model = MultiHead(M, W, beta=1.0, kind="constant_test")
    expected = project_tangent(x, np.full(x.shape, 1.0) @ W.sum(axis=0).T)
    np.testing.assert_allclose(model.velocity(x), expected, atol=1e-14)
    ens = Ensemble(M, W, beta=[1.0, 2.0], kind="constant_test")
    np.testing.assert_allclose(ens.velocity(np.stack([x, x]))[1], expected, atol=1e-14)
    # its parameter is a field: a kind object of another e runs with it, and is recorded
    other = MultiHead(M, W, beta=1.0, kind=_Constant(e=2.0))
    np.testing.assert_allclose(other.velocity(x), 2 * expected, atol=1e-14)
    assert other.to_attrs()["kind_e"] == 2.0 and "kind_e" not in model.to_attrs()
    assert MultiHead.from_attrs(other.to_attrs()).kind == _Constant(e=2.0)
    # the kind's refusals name the other route
    with pytest.raises(InvalidParameterError, match="use the exact pass"):
        MultiHead(np.eye(3), beta=1.0, kind="constant_test", summation="fast")


def test_a_kind_of_default_parameters_is_stored_as_its_name(constant_kind):
    model = MultiHead(np.eye(3), beta=1.0, kind=_Constant())
    assert model.kind == "constant_test" and "kind_e" not in model.to_attrs()


def _tag_comparisons(path: pathlib.Path) -> list[str]:
    """Comparisons with a string constant, and subscripts of a kind registry, in one module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                text = ast.unparse(node)
                if any(word in text for word in ("kind", "sums", "rule", "mean_field", "attention")):
                    out.append(f"{path.name}:{node.lineno}: {text}")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id.endswith("KINDS"):
            out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_pass_is_chosen_by_a_string_tag(tmp_path):
    assert [t for rel in PASS_MODULES for t in _tag_comparisons(ROOT / rel)] == []
    # the scan sees the form it forbids (the one of the earlier passes module)
    probe = tmp_path / "probe.py"
    probe.write_text('if KINDS[self.kind] == "exp":\n    pass\n')
    assert len(_tag_comparisons(probe)) == 2
