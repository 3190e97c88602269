"""How fast and how small a spectral reference that cannot finish is refused.

The zonal example of docs/guide/meanfield.md (density 1 + z/2 on S^2 as a ZonalMeasure, one USA
head at beta = 2), run with the automatic band limit to a t1 past the cap (default 2.5, the cap 4096
is passed near t = 2.05), and to a t1 it reaches (2.0): wall time, peak resident memory, where it
stopped, the largest band limit built. Run it on an idle machine, one thread:

    OMP_NUM_THREADS=1 python benchmarks/bench_spectral_refusal.py 2.5
    OMP_NUM_THREADS=1 python benchmarks/bench_spectral_refusal.py 2.0
"""

import argparse
import resource
import time

import meanfield as mf
import particles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("t1", type=float, nargs="?", default=2.5)
    t1 = parser.parse_args().t1
    model = particles.MultiHead.scalar([1.0], d=3, beta=2.0, kind="usa")
    mu0 = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    start = time.perf_counter()
    res = mf.wasserstein_ascent(mu0, model, t1=t1, n_saves=11, scheme="spectral", on_failure="return")
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux
    built = max([b for _, _, b in res.info["band_limits"]], default=res.info["L"])
    print(f"t1 = {t1}: {res.status} at t = {res.t[-1]:g} (last save), L = {res.info['L']}, largest L built "
          f"{built}, {seconds:.1f} s, peak RSS {peak:.2f} GB")
    if res.status == "failed":
        print(res.message)


if __name__ == "__main__":
    main()
