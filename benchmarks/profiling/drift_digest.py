"""The DriftMonitor of this tree against the baseline's, bit for bit, on random streams cut randomly."""

import hashlib
import json
import sys

import numpy as np

from svmstream.solvers.drift import DriftMonitor

rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
out = []
for _trial in range(30):
    n = 20000
    p = np.where(np.arange(n) < rng.integers(2000, 15000), rng.uniform(0.02, 0.3), rng.uniform(0.05, 0.6))
    bits = rng.random(n) < p
    m = DriftMonitor()
    fired = []
    lo = 0
    while lo < n:
        hi = min(n, lo + int(rng.integers(1, 3000)))
        fired += (m.update(bits[lo:hi]) + lo).tolist()
        lo = hi
    a, meta = m.get_state()
    out.append([fired, meta["width"], meta["total"], meta["n_detections"], a["window"].tobytes().hex()])
print(json.dumps(out).__hash__(), len(json.dumps(out)))

print(hashlib.sha256(json.dumps(out).encode()).hexdigest())
