"""Examples run end to end (quick sizes) and their outputs are complete and consistent."""

import numpy as np
import pytest
import xarray as xr


def test_flagship_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from examples import flagship

    ds = flagship.main(["--out", str(tmp_path), "--quick"])
    back = xr.open_dataset(tmp_path / "flagship.nc")
    xr.testing.assert_identical(back.load(), ds)
    assert (tmp_path / "flagship_energy_entropy_clusters.png").stat().st_size > 10_000
    assert not list(tmp_path.glob("*.part"))
    # Theorem 11 along the run: energy non-decreasing, identity to round-off
    E = ds.energy_multi.values
    assert np.all(np.diff(E, axis=1) >= -1e-12 * E[:, -1:])
    assert float(np.abs(ds.rate_residual).max() / ds.kinetic.max()) < 1e-12
    assert ds.mean_entropy.max() <= np.log(ds.n_particles.max()) + 1e-12


@pytest.mark.slow
def test_flagship_full(tmp_path):
    from examples import flagship

    ds = flagship.main(["--out", str(tmp_path)])
    final = ds.isel(time=-1)
    np.testing.assert_allclose(final.mean_entropy.isel(head=0), np.log(ds.n_particles), rtol=1e-6)
