"""Flagship study: metastable clusters of two attention heads on the circle, particles and mean field.

Two scalar USA heads with strengths (1, 0.5) at beta = 16 (score symmetry and value alignment: the
energy rises at the Theorem 11 rate) on S^1: uniform tokens gather in many clusters, then merge only on
much longer time scales. Over n = 64, 128, 256 and several seeds it records energy, attention entropy
and cluster counts (mean +- sd); it measures particles against the mean-field reference (W1 and energy as n
grows), and runs n = 200000 tokens with fast summation against the mean-field density.

The study is the installed module headflow.flagship (its docstring has the details), so that
`headflow flagship --out DIR` runs it after a plain `pip install`; this script runs that module.
It writes flagship.nc, flagship_meanfield.nc, flagship_large_n.nc, a table and five PNG figures.

Run:  python examples/flagship.py --out outputs      (about two minutes on one core)
"""

from __future__ import annotations

import pathlib
import sys

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from headflow.flagship import FULL, QUICK, figures, label, main, run, run_large_n, run_meanfield  # noqa: E402

__all__ = ["FULL", "QUICK", "figures", "label", "main", "run", "run_large_n", "run_meanfield"]

if __name__ == "__main__":
    main()
