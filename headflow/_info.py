"""``headflow info``: the versions, threads and summation paths of this installation."""

from __future__ import annotations

import os


def info() -> dict:
    """``headflow info``: versions, thread counts and the available summation paths."""
    from metrics import dependency_versions, summation_paths
    from particles import num_threads

    threads = {"cpu_count": os.cpu_count(), "headflow_threads": num_threads()}
    for var in ("HEADFLOW_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        threads[var] = os.environ.get(var, "unset")
    try:
        from threadpoolctl import threadpool_info

        threads["pools"] = [f"{p.get('internal_api')} ({p.get('user_api')}): {p.get('num_threads')}"
                            for p in threadpool_info()]
    except ImportError:
        threads["pools"] = ["threadpoolctl not installed"]
    return {"versions": dependency_versions(), "threads": threads, "summation": summation_paths(check_import=True)}


def _print_info(data: dict) -> None:
    print("headflow", data["versions"]["headflow"])
    print("\nversions")
    for k, v in data["versions"].items():
        print(f"  {k:20s} {v}")
    print("\nthreads")
    for k, v in data["threads"].items():
        if k == "pools":
            for pool in v:
                print(f"  {'pool':20s} {pool}")
        else:
            print(f"  {k:20s} {v}")
    print("\nsummation paths")
    notes = {"exact": 'blocked exact pass, O(n^2) work, error bound 0 (summation="exact")',
             "finufft": 'NUFFT routes of summation="fast"/"auto", error bound tol (needs the finufft package)',
             "ducc0": 'faster NUFFT for those routes and the S^2 transforms (pip install "headflow[sht]")'}
    for k, ok in data["summation"].items():
        print(f"  {k:20s} {'available' if ok else 'NOT available'}   {notes.get(k, '')}")
