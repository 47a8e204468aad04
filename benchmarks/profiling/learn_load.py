"""Feed /learn with ijcnn1 batches of 1000; args: port settings-json n_batches"""

import json
import sys
import time

import httpx
from sklearn.datasets import load_svmlight_file

port, settings, n_batches = int(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
X, y = load_svmlight_file("/work/shared/data/ijcnn1.bz2", n_features=22)
X = X.toarray()
c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
r = c.put("/models/m", json=settings)
print(r.status_code, r.text[:200])
bodies = []
for i in range(0, min(len(y), 1000 * n_batches), 1000):
    bodies.append(
        json.dumps(
            {"model": "m", "x": X[i : i + 1000].tolist(), "y": y[i : i + 1000].astype(int).tolist()}
        ).encode()
    )
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 1
t0 = time.time()
for b in bodies * reps:
    r = c.post("/learn", content=b, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
print("batches", len(bodies), "wall", time.time() - t0)
