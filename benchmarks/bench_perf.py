"""Every table of the performance targets in one command (a fresh process per script, printed in order).

1. ``bench_sht.py --threads 1,2``: ducc0 against the Legendre tables (accuracy, time, memory) and the S^2
   solver against the zonal solver on a zonal problem;
2. ``bench_fastsum_split.py``: one S^2 softmax right-hand side at n = 10^6 (beta = 10, tol = 1e-8), step by
   step, on ducc0's NUFFT and on FINUFFT's, with the peak memory;
3. ``bench_threads.py``: one thread against two for the fast summation, the exact pass and the transforms;
4. ``bench_rhs.py --kind softmax --sizes 1024,4096``: the exact pass against its GEMM + exp floor;
5. ``bench_phase_diagram.py --quick``: the phase-diagram workload against the batched anchor.

Every ratio divides two timings of one process; each table states its thread limits and the load.
Run on an idle machine:  python benchmarks/bench_perf.py [--quick]   (about 5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = ap.parse_args()
    q = ["--quick"] if args.quick else []
    runs = [["bench_sht.py", "--threads", "1,2", "--repeat", "2", *q],
            ["bench_fastsum_split.py", *(["--n", "100000"] if args.quick else [])],
            ["bench_threads.py", "--repeat", "2", *q],
            ["bench_rhs.py", "--kind", "softmax", "--repeat", "3", "--sizes", "1024,4096"],
            ["bench_phase_diagram.py", "--quick"]]
    start = time.perf_counter()
    for cmd in runs:
        print(f"\n# python benchmarks/{' '.join(cmd)}\n", flush=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(HERE, cmd[0]), *cmd[1:]], check=True, cwd=os.path.dirname(HERE))
        print(f"\n({time.perf_counter() - t:.0f} s)", flush=True)
    print(f"\nall tables in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
