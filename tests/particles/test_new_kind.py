"""A new attention kind is one object registered once (issues 34 and 55): proved by adding one.

The off-by-one softmax ("softmax1", weights :math:`e^{s_{ij}}/(1 + \\sum_k e^{s_{ik}})`: softmax with an
attention sink) is written as a subclass of ``particles.extend.ExponentialKind`` (its passes are the
exponential family's; it states its output, scale, dense weights and a refusal of the grid mean field)
and registered with ``particles.extend.register_kind`` in a fresh interpreter. Against it the kernel
contract of ``tests/particles/test_kernel_contract.py`` (parametrised over ``particles.KINDS``, so it
covers the new kind unchanged) runs, and ``MultiHead``, ``Ensemble`` and ``simulate`` take it. A kind whose
mean-field rule is one of the two the mean field knows reaches the mean-field solvers with no other edit:
the second test registers one under a new name and runs the finite-volume and spectral schemes and the
growth rates on it.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: the whole addition: one kind object, registered once
KIND = '''
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from particles.extend import ExponentialKind, Refusal, register_kind


@dataclass(frozen=True)
class Softmax1(ExponentialKind):
    name: str = "softmax1"
    mean_field = Refusal("softmax1 has no grid mean field: use scheme='lagrangian'")

    def output(self, p, Wt, n, c):
        return (np.exp(-np.logaddexp(0.0, -p.logz))[..., None] * p.mean) @ Wt

    def scale(self, n):
        return 1.0

    def dense(self, s):
        return np.exp(s - np.logaddexp(0.0, logsumexp(s, axis=-1, keepdims=True)))


register_kind(Softmax1())
'''

CHECK = """
import numpy as np
import softmax1_kind  # noqa: F401  (registers the kind)
import particles
from particles import Ensemble, MultiHead, sample_uniform, simulate

assert "softmax1" in particles.KINDS and "softmax1" not in particles.extend.MEAN_FIELD_KINDS
assert "softmax1" in particles.extend.LAGRANGIAN_KINDS
rng = np.random.default_rng(1)
x = sample_uniform(7, d=3, rng=rng)
model = MultiHead(rng.standard_normal((2, 3, 3)), beta=1.3, kind="softmax1")
w = model.weights(x)
assert np.all(w.sum(-1) < 1.0)  # the sink takes the rest of each row
# the stacked systems of an Ensemble: the kind's own rule on the batch axis, system by system
ens = Ensemble(model.M, model.W, beta=[1.3, 0.4], kind="softmax1")
v = ens.velocity(np.stack([x, x]))
np.testing.assert_allclose(v[0], model.velocity(x), rtol=1e-12, atol=1e-14)
np.testing.assert_allclose(v[1], model.replace(beta=0.4).velocity(x), rtol=1e-12, atol=1e-14)
traj = simulate(x, model, t1=0.5, dt=0.05, save=particles.SaveAt(ts=[0.0, 0.25, 0.5]))
assert traj.status == "finished" and np.allclose(np.linalg.norm(traj.x, axis=-1), 1.0)
print("ok")
"""


def _env(tmp_path):
    (tmp_path / "softmax1_kind.py").write_text(KIND)
    path = os.pathsep.join([str(tmp_path), str(ROOT)])
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


@pytest.mark.slow
def test_a_new_kind_is_one_registered_object(tmp_path):
    env = _env(tmp_path)
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    contract = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "softmax1_kind", "-k", "softmax1",
         "-W", "ignore::DeprecationWarning", "tests/particles/test_kernel_contract.py"],
        capture_output=True, text=True, cwd=ROOT, env=env)
    assert contract.returncode == 0, contract.stdout[-3000:] + contract.stderr[-2000:]
    passed = int(contract.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 10  # the contract's kind-parametrised tests all ran on the new kind


#: a kind with the attention-mean rule under a name the mean field has never seen
MEAN_CHECK = """
import dataclasses

import numpy as np

import meanfield as mf
import particles
from particles import MultiHead
from particles.extend import ATTENTION_KINDS, register_kind

# the softmax object under a new name: the mean field asks its rule, never its name
register_kind(dataclasses.replace(ATTENTION_KINDS['softmax'], name='mean_rule'))
assert "mean_rule" in particles.extend.MEAN_FIELD_KINDS
pts, areas = mf.circle_grid(64)
mu0 = mf.GridMeasure.from_density(pts, areas, lambda y: 1 + 0.5 * y[:, 0])
new, ref = (MultiHead.scalar([1.0, 0.5], d=2, beta=2.0, kind=k) for k in ("mean_rule", "softmax"))
for scheme, options in (("fv_circle", {}), ("spectral", {"L": 32})):
    a, b = (mf.wasserstein_ascent(mu0, m, t1=0.5, n_saves=3, scheme=scheme, **options) for m in (new, ref))
    np.testing.assert_allclose(a.mass, b.mass, rtol=0, atol=1e-13)
x = particles.sample_uniform(9, d=2, rng=0)
np.testing.assert_allclose(mf.measure_velocity(new, x), new.velocity(x), rtol=1e-12, atol=1e-14)
np.testing.assert_allclose(mf.growth_rates(new), mf.growth_rates(ref), rtol=1e-14)
print("ok")
"""


@pytest.mark.slow
def test_a_new_kind_of_a_known_rule_reaches_the_mean_field(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", MEAN_CHECK], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
