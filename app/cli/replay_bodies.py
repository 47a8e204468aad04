"""The HTTP side of ``svmstream replay``: request bodies of consecutive row slices under a
byte limit (:func:`pieces`), a 413 answer lowering that limit and the same rows sent again in
smaller pieces (:func:`answers`), and ``POST /learn`` in order with one request in flight
(:func:`send_in_order`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from svmstream.app.cli.client import check_response
from svmstream.app.cli.producer import ByteLimit, RowSlicer, RowTooLarge, max_bytes_from_env


class ReplayError(RuntimeError):
    """The service refused a request; the message is the server's."""


def check(response) -> Any:
    return check_response(response, ReplayError)


def labels_json(y: np.ndarray) -> np.ndarray:
    return y.astype(np.int64) if np.all(np.mod(y, 1) == 0) else y


def json_body(model: str, X, y: np.ndarray | None, start: int, stop: int, dense: bool) -> bytes:
    """The JSON body of rows ``start:stop`` (dense lists or sparse ``{"index": value}`` maps)."""
    part = X[start:stop]
    if dense:
        rows: Any = np.ascontiguousarray(part.toarray())
    else:
        indices, data, indptr = part.indices.tolist(), part.data.tolist(), part.indptr.tolist()
        rows = [
            dict(zip(map(str, indices[indptr[i] : indptr[i + 1]]), data[indptr[i] : indptr[i + 1]]))
            for i in range(stop - start)
        ]
    obj: dict[str, Any] = {"model": model, "X": rows}
    if y is not None:
        obj["y"] = y[start:stop]
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


@dataclass
class Piece:
    """One request body: rows ``start:stop`` of the matrix its ``slicer`` cuts."""

    rows: int
    body: bytes
    start: int
    stop: int
    slicer: RowSlicer

    def split(self) -> list[Piece]:
        """The same rows again, in pieces that fit the (lowered) byte limit."""
        try:
            return [
                Piece(b - a, body, a, b, self.slicer)
                for a, b, body in self.slicer.slices(self.start, self.stop)
            ]
        except RowTooLarge as exc:
            raise ReplayError(str(exc)) from None


def pieces(
    model: str,
    X,
    y: np.ndarray | None,
    batch: int,
    dense: bool,
    passes: int = 1,
    shuffle_seed: int | None = None,
    limit: ByteLimit | None = None,
) -> Iterator[Piece]:
    """Request bodies of consecutive row slices of at most ``batch`` rows and ``limit.bytes``
    bytes: in file order, or, with ``shuffle_seed``, in a new permutation per pass drawn from
    ``default_rng(shuffle_seed)``."""
    limit = limit if limit is not None else ByteLimit(max_bytes_from_env())
    n = X.shape[0]
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    rate = None
    for _ in range(passes):
        Xp, yp = X, y
        if rng is not None:
            perm = rng.permutation(n)
            Xp, yp = X[perm], (None if y is None else y[perm])

        def encode(a: int, b: int, Xp=Xp, yp=yp) -> tuple[bytes, int]:
            body = json_body(model, Xp, yp, a, b, dense)
            return body, len(body)

        slicer = RowSlicer(Xp, "dense" if dense else "sparse", batch, limit, encode)
        if rate is not None:
            slicer.rate = rate
        try:
            for a, b, body in slicer.slices():
                yield Piece(b - a, body, a, b, slicer)
        except RowTooLarge as exc:
            raise ReplayError(str(exc)) from None
        rate = slicer.rate


def request_bodies(
    model: str,
    X,
    y: np.ndarray | None,
    batch: int,
    dense: bool,
    passes: int = 1,
    shuffle_seed: int | None = None,
    max_bytes: int | None = None,
):
    """Yield ``(n_rows, body_bytes)`` for consecutive row slices of at most ``batch`` rows and
    ``max_bytes`` bytes (default: :func:`~svmstream.app.cli.producer.max_bytes_from_env`): in
    file order, or, with ``shuffle_seed``, in a new permutation per pass drawn from
    ``default_rng(shuffle_seed)``."""
    limit = ByteLimit(max_bytes if max_bytes is not None else max_bytes_from_env())
    for piece in pieces(model, X, y, batch, dense, passes, shuffle_seed, limit):
        yield piece.rows, piece.body


JSON_HEADERS = {"content-type": "application/json"}
LIMIT_RE = re.compile(r"MAX_BODY_BYTES=(\d+)")


def lower_limit(response, piece: Piece, limit: ByteLimit, out) -> bool:
    """On a 413 answer: lower ``limit`` to the service's ``MAX_BODY_BYTES`` (named in its
    message; half the body if it is not, e.g. a proxy's 413) and return True."""
    if response.status_code != 413:
        return False
    found = LIMIT_RE.search(response.text)
    new = min(int(found.group(1)) if found else len(piece.body) // 2, len(piece.body) - 1)
    if new < 1:
        return False
    limit.bytes = min(limit.bytes, new)
    limit.refused += 1
    print(
        f"the service refused a {len(piece.body):,}-byte body (413): sending at most {limit.bytes:,} bytes "
        "per request from now on",
        file=out,
    )
    return True


def answers(client, path: str, piece: Piece, response, limit: ByteLimit, out) -> list[tuple[Piece, Any]]:
    """``[(piece, answer)]`` of a response; a 413 is answered by sending the piece's rows
    again in pieces under the lowered limit (the refused body was not applied)."""
    if lower_limit(response, piece, limit, out):
        return [got for sub in piece.split() for got in post(client, path, sub, limit, out)]
    return [(piece, check(response))]


def post(client, path: str, piece: Piece, limit: ByteLimit, out) -> list[tuple[Piece, Any]]:
    return answers(
        client, path, piece, client.post(path, content=piece.body, headers=JSON_HEADERS), limit, out
    )


def send_in_order(client, pieces, bar, limit: ByteLimit, out) -> tuple[int, Any, list[int]]:
    """``POST /learn`` each :class:`Piece` in order, one request in flight while the next
    body is built; returns the rows sent, the last answer and the size of each body sent."""
    sent = 0
    last = None
    sizes: list[int] = []

    def done(answers: list[tuple[Piece, Any]]) -> None:
        nonlocal sent, last
        for part, answer in answers:
            last = answer
            sent += part.rows
            sizes.append(len(part.body))
            bar.update(part.rows)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay-send") as pool:
        pending = None
        for piece in pieces:
            # the next body is ready: wait for the request in flight, then send it
            if pending is not None:
                done(answers(client, "/learn", pending[0], pending[1].result(), limit, out))
                pending = None
            if len(piece.body) > limit.bytes:  # built before a 413 lowered the limit
                for sub in piece.split():
                    done(post(client, "/learn", sub, limit, out))
                continue
            pending = (piece, pool.submit(client.post, "/learn", content=piece.body, headers=JSON_HEADERS))
        if pending is not None:
            done(answers(client, "/learn", pending[0], pending[1].result(), limit, out))
    return sent, last, sizes
