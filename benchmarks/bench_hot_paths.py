"""Hot paths under pytest-benchmark: a history of saved runs, compared before a merge.

One thread (``threadpool_limits(1)`` and ``particles.set_num_threads(1)``), fixed inputs; each benchmark
asserts that its result is finite, so a broken path fails instead of timing an error. Not part of the
test suite (``benchmarks/`` is outside ``testpaths``): run it explicitly.

    python -m pytest benchmarks/bench_hot_paths.py --benchmark-autosave          # on main: save a run
    python -m pytest benchmarks/bench_hot_paths.py --benchmark-compare \\
        --benchmark-compare-fail=median:10%                                       # on a branch: compare

The runs are saved under ``.benchmarks/`` (one folder per machine and Python); the comparison fails when a
path's median is more than 10 % slower than in the last saved run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import meanfield as mf
import particles
from meanfield._spectral.sphere import Sphere
from particles import Ensemble, MultiHead, sample_uniform

pytest.importorskip("pytest_benchmark")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with threadpool_limits(1):
        particles.set_num_threads(1)
        yield
        particles.set_num_threads(None)


def _points(n, d, seed=0):
    return sample_uniform(n, d=d, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("n, d", [(1024, 3), (4096, 3), (1024, 64)])
def test_exact_velocity(benchmark, n, d):
    x, model = _points(n, d), MultiHead.scalar([1.0, 0.5], d=d, beta=4.0, kind="softmax", summation="exact")
    assert np.all(np.isfinite(benchmark(model.velocity, x)))


@pytest.mark.parametrize("d", [2, 3])
def test_fast_velocity(benchmark, d):
    x = _points(100_000, d)
    model = MultiHead.scalar([1.0], d=d, beta=10.0, kind="softmax", summation="fast", tol=1e-8)
    assert np.all(np.isfinite(benchmark(model.velocity, x)))


def test_ensemble_phase_diagram_chunk(benchmark):
    x = np.stack([_points(32, 2, seed) for seed in range(256)])
    ens = Ensemble(np.eye(2), beta=np.linspace(0.1, 9.0, 256))
    assert np.all(np.isfinite(benchmark(ens.velocity, x)))


@pytest.mark.parametrize("L", [256, 1024])
def test_sphere_transform_pair(benchmark, L):
    sht = mf.sphere_harmonic_transform(L, L + 2 + math.ceil((L + 2) / 2))
    rng = np.random.default_rng(0)
    C = np.tril(rng.standard_normal((L + 1, L + 1)) + 1j * rng.standard_normal((L + 1, L + 1)))
    assert np.all(np.isfinite(benchmark(lambda: sht.analysis(sht.synthesis(C)))))


@pytest.mark.parametrize("axial", [False, True])
def test_sphere_spectral_rhs(benchmark, axial):
    L = 128 if not axial else 1024
    disc = Sphere(MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax"), L, axial=axial)
    c = np.zeros((L + 1, 1 if axial else L + 1), complex)
    c[:40, 0] = 0.5 ** np.arange(40)
    if not axial:
        c[1:40, 1] = 0.3 * 0.5 ** np.arange(1, 40)
    assert np.all(np.isfinite(benchmark(disc.rhs, c)))
