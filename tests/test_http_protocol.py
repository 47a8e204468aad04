"""``svmstream serve``'s HTTP protocol (``app/cli/http_protocol.py``): a response with a
Content-Length leaves in one write (status line, headers and body together), through a real
server on raw sockets; HEAD answers, ``100 Continue``, ``Connection: close`` and streams
behave as with uvicorn's own protocol."""

from __future__ import annotations

import json
import select
import socket

import pytest

from svmstream.app.cli.http_protocol import _HoldHeaders


def _request(method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "host: test",
        *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items()),
    ]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _first_read(sock: socket.socket) -> bytes:
    """What one recv() returns as soon as the socket is readable."""
    assert select.select([sock], [], [], 10)[0], "no answer"
    return sock.recv(1 << 20)


def _split(raw: bytes) -> tuple[bytes, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status.encode(), {k.lower(): v for k, v in (line.split(": ", 1) for line in lines)}, body


@pytest.fixture
def server(start_server):
    return start_server(env={"SVMSTREAM_DEFAULT_WARMUP": "0", "SVMSTREAM_DEFAULT_N_SAMPLES": "100"})


def test_answers_with_a_length_leave_in_one_write(server):
    rows = [[0.1 * i, -0.2 * i] for i in range(40)]
    learn = json.dumps({"X": rows, "y": [1 if i % 2 else -1 for i in range(40)]}).encode()
    predict = json.dumps({"X": rows[:1]}).encode()
    with _connect(server) as sock:
        for method, path, body in (
            ("POST", "/learn", learn),
            ("GET", "/health", b""),
            ("POST", "/predict", predict),
        ):
            for _ in range(20):  # keep-alive: one connection, many answers
                sock.sendall(_request(method, path, body, content_type="application/json"))
                status, headers, got = _split(_first_read(sock))
                assert status == b"HTTP/1.1 200 OK", (path, status)
                assert len(got) == int(headers["content-length"]), path  # all of it in the first read
                json.loads(got)


def test_head_answers_continue_and_close_still_work(server):
    with _connect(server) as sock:  # HEAD: uvicorn writes no body, so nothing may be held
        sock.sendall(_request("HEAD", "/health"))
        status, headers, body = _split(_first_read(sock))
        assert status.startswith(b"HTTP/1.1 ") and body == b"" and "content-type" in headers
    with _connect(server) as sock:  # Expect: 100-continue -- the interim answer comes at once
        body = json.dumps({"X": [[0.0, 0.0]]}).encode()
        head = _request("POST", "/predict", body, content_type="application/json", expect="100-continue")
        sock.sendall(head[: -len(body)])
        assert _first_read(sock) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        status, headers, got = _split(_first_read(sock))  # 409: nothing learned yet
        assert status == b"HTTP/1.1 409 Conflict" and len(got) == int(headers["content-length"])
    with _connect(server) as sock:  # Connection: close -- the answer, then the end of the stream
        sock.sendall(_request("GET", "/health", connection="close"))
        raw = b""
        while chunk := sock.recv(1 << 16):
            raw += chunk
        status, headers, got = _split(raw)
        assert status == b"HTTP/1.1 200 OK" and headers["connection"] == "close"
        assert len(got) == int(headers["content-length"])


class _Writes:
    def __init__(self):
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True


def test_only_a_head_with_a_length_is_held():
    fixed = _Writes()
    proxy = _HoldHeaders(fixed)
    proxy.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert fixed.writes == []
    proxy.write(b"{}")
    assert fixed.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    proxy.close()  # everything else is the transport's
    assert fixed.closed
    stream = _Writes()
    proxy = _HoldHeaders(stream)
    proxy.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    proxy.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    proxy.write(b"2\r\n{}\r\n")
    assert stream.writes == [
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
        b"2\r\n{}\r\n",
    ]
