"""More pinned cell names: the key paths tests/metrics/test_store_keys.py does not reach.

Recorded from stores written by headflow before the studies' settings were typed (one table per study,
cells receiving the settings object): the limit study on S^2 (its sliced directions in the key) with one
seed count per n, on S^1 with nested sampling, the chaos study from a density (key format 2 with the
density's probe values), and a phase diagram of one statistic given as a string, equiangular tokens and
several chunks. A change that renames them orphans the stores users have.
"""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest

import metrics
from particles import MultiHead


def _names(store) -> list[str]:
    return sorted(p.name for p in pathlib.Path(store).glob("cell_*.nc"))


S1 = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")

CASES = {
    "limit_s2_seeds_per_n": (
        lambda s: metrics.mean_field_limit_study(
            MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa"), lambda x: 1 + 0.5 * x[:, 2], n_values=(8, 16),
            n_seeds=(2, 1), t1=0.2, dt=0.1, n_saves=2, m_grid=64, n_projections=8, n_quantiles=256, store=s,
            progress=False),
        ["cell_49548e49a465428f.nc", "cell_c3a80c1f044dc3ae.nc", "cell_d6950ec6356fb628.nc"]),
    "limit_s1_nested": (
        lambda s: metrics.mean_field_limit_study(
            S1, metrics.density_of_angle(lambda th: 1 + 0.5 * np.cos(th)), n_values=(8, 16), n_seeds=2,
            sampling="nested", t1=0.2, dt=0.1, n_saves=2, m_grid=64, store=s, progress=False),
        ["cell_0a3a9cc54f1fa219.nc", "cell_64ddfdd6606064d0.nc", "cell_ae20756e1ecc74ee.nc",
         "cell_e6ec0120cc9f6ec3.nc"]),
    "chaos_density": (
        lambda s: metrics.chaos_horizon_study(S1, lambda x: 1 + 0.3 * x[:, 0], n_values=[20, 40], n_seeds=1, t1=1.0,
                                              n_saves=11, delta=0.5, dt=0.1, n_boot=10, store=s, progress=False),
        ["cell_0660c70d2683e9d4.nc", "cell_fde5808c43e5c397.nc"]),
    "phase_one_statistic_equiangular_chunks": (
        lambda s: metrics.phase_diagram([0.5, 1.0], n=4, d=6, kind="usa", t1=1.0, n_systems=6, chunk=4, n_saves=3,
                                        dt=0.25, statistic="n_clusters", init="equiangular", store=s, progress=False),
        ["cell_059e2e9de39e08e5.nc", "cell_2bfd60189659dfba.nc", "cell_43a6e24e6a242fe3.nc",
         "cell_79a5ffdb06b77529.nc"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cell_names_of_more_key_paths_are_pinned(case, tmp_path):
    run, expected = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(tmp_path)
    assert _names(tmp_path) == expected
