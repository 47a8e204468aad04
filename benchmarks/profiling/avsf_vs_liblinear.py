"""AVSF (``dual_cd``, selection avsf) against scikit-learn ``LinearSVC(dual=True)``: same C and
tol, alternately in one process, CPU seconds.

Run from the tree: ``PYTHONPATH=. python benchmarks/profiling/avsf_vs_liblinear.py a9a 100 0.001 3``.
"""

import os
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

from benchmarks import datasets
from benchmarks.bench_linear import SEED, run_sklearn
from svmstream.solvers.linear._cd import as_cd_input, dual_cd

name, C, eps, rounds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
X, y, _, _ = datasets.load(name)
X = sp.csr_matrix(X)
y = np.where(y > 0, 1.0, -1.0)
X32 = X.copy()
X32.indices = X32.indices.astype(np.int32)
X32.indptr = X32.indptr.astype(np.int32)
inp = as_cd_input(X)
dual_cd(inp, y, C=C, tol=eps, max_iter=3, selection="avsf", seed=SEED)  # numba's cache
ratios = []
for r in range(rounds):
    load = os.getloadavg()[0]
    started = time.process_time()
    res = dual_cd(inp, y, C=C, tol=eps, max_iter=10**9, selection="avsf", seed=SEED, max_steps=6 * 10**9)
    ours = time.process_time() - started
    sk = run_sklearn(X32, y, C, eps, 10**7)
    ratios.append(ours / sk["cpu_seconds"])
    print(
        f"round {r + 1} load {load:.1f}: avsf cpu {ours:.2f} s (steps {res.n_steps:,}, converged "
        f"{res.converged}, dual {res.dual:.8g}); LinearSVC cpu {sk['cpu_seconds']:.2f} s "
        f"(dual {sk.get('dual')}); avsf/LinearSVC {ratios[-1]:.3f}",
        flush=True,
    )
print("median avsf/LinearSVC CPU", statistics.median(ratios))
