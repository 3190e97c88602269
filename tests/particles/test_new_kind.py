"""A new attention kind is one entry of the kind registry (issue 34): proved by adding one.

The test copies ``particles`` into a temporary folder, edits one file of the copy,
``_model/kinds.py``, by adding "softmax1" (the off-by-one softmax, weights
:math:`e^{s_{ij}}/(1 + \\sum_k e^{s_{ik}})`: softmax with an attention sink), and then, against the
copy, runs the kernel contract of ``tests/particles/test_kernel_contract.py`` (parametrised over
``particles.KINDS``, so it covers the new kind unchanged) and checks that ``MultiHead``,
``Ensemble`` and ``simulate`` take it. Files touched to add a kind: ``kinds.py`` (its entry); the
tests that cover it are already there. A kind whose output is one of the two rules the mean field
knows (``exp_rule``) reaches the mean-field solvers with no other edit: the second test adds one under
a new name and runs the finite-volume and spectral schemes and the growth rates on it.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: the whole edit: one registry entry (output rule from the exp pass, velocity scale, dense weights)
ENTRY = '''
    "softmax1": Kind("softmax1", "exp",
                     lambda p, Wt, n, c: (np.exp(-np.logaddexp(0.0, -p.logz))[..., None] * p.mean) @ Wt,
                     lambda n: 1.0,
                     lambda s: np.exp(s - np.logaddexp(0.0, logsumexp(s, axis=-1, keepdims=True)))),'''

CHECK = """
import numpy as np
import particles
from particles import Ensemble, MultiHead, sample_uniform, simulate

assert "softmax1" in particles.KINDS and "softmax1" not in particles.extend.MEAN_FIELD_KINDS
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


@pytest.mark.slow
def test_a_new_kind_is_one_registry_entry(tmp_path):
    shutil.copytree(ROOT / "particles", tmp_path / "particles", ignore=shutil.ignore_patterns("__pycache__"))
    for rel in ("tests/__init__.py", "tests/conftest.py", "tests/helpers.py", "tests/particles/__init__.py",
                "tests/particles/test_kernel_contract.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    kinds = tmp_path / "particles" / "_model" / "kinds.py"
    text = kinds.read_text()
    assert text.count("ATTENTION_KINDS = {") == 1
    kinds.write_text(text.replace("ATTENTION_KINDS = {", "ATTENTION_KINDS = {" + ENTRY))

    env = dict(os.environ, PYTHONPATH=str(tmp_path), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    contract = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "softmax1",
         "-W", "ignore::DeprecationWarning", "tests/particles/test_kernel_contract.py"],
        capture_output=True, text=True, cwd=tmp_path, env=env)
    assert contract.returncode == 0, contract.stdout[-3000:] + contract.stderr[-2000:]
    passed = int(contract.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 10  # the contract's kind-parametrised tests all ran on the new kind


#: a kind with the attention-mean rule under a name the mean field has never seen
MEAN_ENTRY = '''
    "mean_rule": Kind("mean_rule", "exp", lambda p, Wt, n, c: p.mean @ Wt, lambda n: 1.0,
                      lambda s: np.exp(s - logsumexp(s, axis=-1, keepdims=True)), exp_rule="mean"),'''

MEAN_CHECK = """
import pathlib

import numpy as np
import meanfield as mf
import particles
from particles import MultiHead

assert "mean_rule" in particles.extend.MEAN_FIELD_KINDS
assert pathlib.Path(mf.__file__).parents[1] == pathlib.Path(particles.__file__).parents[1]  # (the copies)
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
    for package in ("particles", "meanfield"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    kinds = tmp_path / "particles" / "_model" / "kinds.py"
    kinds.write_text(kinds.read_text().replace("ATTENTION_KINDS = {", "ATTENTION_KINDS = {" + MEAN_ENTRY))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", MEAN_CHECK], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
