"""The abuse probes ("no request can exhaust the server"), shared by
``benchmarks/bench_abuse.py`` and ``tests/test_abuse.py``.

Every probe talks to 127.0.0.1 only, is bounded in count and time, and measures the server
process from outside (``psutil``): RSS, open file descriptors, ``/health`` latency while the
probe runs, and the status code each abusive request got.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import httpx


def rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def open_fds(pid: int) -> int:
    import psutil

    return psutil.Process(pid).num_fds()


def predict_body(target_bytes: int, n_features: int = 100) -> bytes:
    """A valid ``/predict`` JSON body of about ``target_bytes`` (rows of ``n_features``)."""
    row = b"[" + b",".join(b"0.123456" for _ in range(n_features)) + b"]"
    rows = max(1, target_bytes // (len(row) + 1))
    return b'{"X":[' + b",".join([row] * rows) + b"]}"


def v2_body(target_bytes: int, n_features: int = 100) -> bytes:
    """An Open Inference Protocol infer body of about ``target_bytes``."""
    rows = max(1, target_bytes // (9 * n_features))
    data = b",".join([b"0.123456"] * (rows * n_features))
    return (
        b'{"inputs":[{"name":"input-0","shape":[%d,%d],"datatype":"FP64","data":[' % (rows, n_features)
        + data
        + b"]}]}"
    )


def invocations_body(target_bytes: int, n_features: int = 100) -> bytes:
    """An MLflow ``instances`` scoring body of about ``target_bytes``."""
    return b'{"instances"' + predict_body(target_bytes, n_features)[4:]


def post_raw(
    port: int,
    path: str,
    body: bytes,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 60.0,
    method: str = "POST",
) -> int | None:
    """POST (or ``method``) ``body`` over a raw socket, stopping as soon as the server answers
    (as a client that reads while it sends would); the status code, or None if no answer came."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in {"Content-Type": "application/json", **(headers or {})}.items()]
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    answer = b""
    deadline = time.monotonic() + timeout
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        view, sent = memoryview(body), 0
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if sent < len(body) else [], [], 1.0)
            if readable:
                chunk = sock.recv(65536)
                answer += chunk
                if not chunk or b"\r\n" in answer:
                    break
            elif writable:
                sent += sock.send(view[sent : sent + 262144])
    except OSError:
        try:
            answer += sock.recv(65536)
        except OSError:
            pass
    finally:
        sock.close()
    if answer.startswith(b"HTTP/1.1 "):
        return int(answer[9:12])
    return None


_WATCH = """
import json, sys, threading, time
import httpx
url, interval, timeout = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
latencies, failures = [], 0
with httpx.Client(timeout=timeout) as client:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            ok = client.get(url + "/health").status_code == 200
        except httpx.HTTPError:
            ok = False
        latencies.append((time.perf_counter() - started) * 1000)
        failures += not ok
        stop.wait(interval)
print(json.dumps([latencies, failures]))
"""


@dataclass
class HealthWatch:
    """Polls ``GET /health`` every ``interval`` s in a thread; latencies in ms (a failed or
    timed-out request counts as its time spent, at least the timeout).  ``process``: poll from
    a child process instead, so that the probe's own client threads (and their GIL) do not
    delay the polls: what is measured is then the server's latency alone."""

    url: str
    interval: float = 0.02
    timeout: float = 10.0
    latencies_ms: list[float] = field(default_factory=list)
    failures: int = 0
    process: bool = False

    def __enter__(self) -> HealthWatch:
        if self.process:
            args = [sys.executable, "-c", _WATCH, self.url, str(self.interval), str(self.timeout)]
            self._child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            return self
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    ok = client.get(self.url + "/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies_ms.append((time.perf_counter() - started) * 1000)
                self.failures += not ok
                self._stop.wait(self.interval)

    def __exit__(self, *exc) -> None:
        if self.process:
            out, _ = self._child.communicate("stop")
            latencies, failures = json.loads(out)
            self.latencies_ms += latencies
            self.failures += failures
            return
        self._stop.set()
        self._thread.join()

    def p(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def body_attack(url: str, pid: int, path: str, body: bytes, n: int = 6, headers: dict | None = None) -> dict:
    """``n`` concurrent POSTs of ``body`` to ``path``: statuses, RSS growth (peak sampled every
    20 ms) and the ``/health`` latency while they run."""
    port = int(url.rsplit(":", 1)[1])
    statuses: list[int | None] = [None] * n
    before = rss_mb(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            done.wait(0.02)

    def one(i: int) -> None:
        statuses[i] = post_raw(port, path, body, headers=headers)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with HealthWatch(url) as health:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.2)
    done.set()
    sampler.join()
    return {
        "path": path,
        "bodies": n,
        "body_mb": round(len(body) / 1e6, 1),
        "statuses": statuses,
        "seconds": round(time.perf_counter() - started, 2),
        "rss_before_mb": round(before, 1),
        "rss_peak_growth_mb": round(peak[0] - before, 1),
        "rss_after_mb": round(rss_mb(pid), 1),
        "health_p50_ms": round(health.p(0.5), 1),
        "health_p99_ms": round(health.p(0.99), 1),
        "health_max_ms": round(max(health.latencies_ms, default=float("nan")), 1),
        "health_failures": health.failures,
    }


def idle_sockets(url: str, pid: int, n: int, *, partial_header: bool, limit_s: float) -> dict:
    """Open ``n`` sockets that send nothing (or half a request line) and never finish; report
    how many the server closed and when, ``/health`` latency meanwhile and the fds after."""
    port = int(url.rsplit(":", 1)[1])
    fds_before = open_fds(pid)
    socks = []
    with HealthWatch(url, interval=0.05) as health:
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                break
            if partial_header:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            s.setblocking(False)
            socks.append(s)
        opened = time.monotonic()
        fds_peak = open_fds(pid)
        open_left = set(socks)
        last_closed = None
        while open_left and time.monotonic() - opened < limit_s:
            ready = select.poll()
            for s in open_left:
                ready.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
            by_fd = {s.fileno(): s for s in open_left}
            for fd, _ in ready.poll(500):
                # an answer (408/400), EOF or a reset: the server let go of this socket
                open_left.discard(by_fd[fd])
                last_closed = time.monotonic() - opened
    for s in socks:
        s.close()
    time.sleep(1.0)
    return {
        "sockets": len(socks),
        "partial_header": partial_header,
        "closed_by_server": len(socks) - len(open_left),
        "all_closed_after_s": None if open_left else round(last_closed or 0.0, 1),
        "fds_before": fds_before,
        "fds_peak": fds_peak,
        "fds_after": open_fds(pid),
        "health_p99_ms": round(health.p(0.99), 1),
        "health_max_ms": round(max(health.latencies_ms, default=float("nan")), 1),
        "health_failures": health.failures,
    }
