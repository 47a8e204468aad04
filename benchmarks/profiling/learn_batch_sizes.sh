#!/bin/bash
TREE=$1; SET=$2; PORT=$((19000 + RANDOM % 1000)); cd $TREE; SNAP=$(mktemp -d)
SVMSTREAM_CREATE_DEFAULT_MODEL=false SVMSTREAM_LOG_LEVEL=warning .venv/bin/python -m svmstream.app.cli.main serve --host 127.0.0.1 --port $PORT --snapshot-dir $SNAP > /dev/null 2>&1 &
SP=$!
for i in $(seq 100); do curl -s 127.0.0.1:$PORT/health >/dev/null && break; sleep 0.3; done
.venv/bin/python - $PORT "$SET" $SP <<'PY'
import sys, json, time, orjson, httpx, numpy as np, psutil, os
from sklearn.datasets import load_svmlight_file
port, hyp, pid = int(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
X, y = load_svmlight_file("/work/shared/data/ijcnn1.bz2", n_features=22); X = X.toarray(); y = y.astype(int)
proc = psutil.Process(pid); cpu = lambda: sum(proc.cpu_times()[:2])
c = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
for rnd in range(2):
  for bs in (250, 1000, 2500):
    name = f"m{bs}r{rnd}"
    assert c.put(f"/models/{name}", json=hyp).status_code == 201
    bodies = [orjson.dumps({"model": name, "x": X[i:i+bs].tolist(), "y": y[i:i+bs].tolist()}) for i in range(0, 40000, bs)]
    c0 = cpu()
    for b in bodies:
        r = c.post("/learn", content=b, headers={"content-type": "application/json"}); assert r.status_code == 200, r.text
    d = cpu() - c0
    print(f"batch {bs}: server CPU {d:.2f} s, {1e6*d/40000:.2f} us/ex, {1e3*d/len(bodies):.2f} ms/request, load {os.getloadavg()[0]:.1f}", flush=True)
PY
kill $SP; wait $SP 2>/dev/null; rm -rf $SNAP
