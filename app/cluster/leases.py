"""A model's lease with its fencing token (``docs/cluster.md``).

The lease key is the stream consumer's (``<stream key>:lease``), its value ``member|fence``;
``<stream key>:fence`` counts the hand-offs.  The scripts are in
:mod:`svmstream.app.stream.fencing`, where the consumer's fenced reads and acknowledgements are.
"""

from __future__ import annotations

from dataclasses import dataclass

from svmstream.app.cluster import membership
from svmstream.app.stream import fencing
from svmstream.app.stream.redis_ops import as_str

#: Leases renewed by one script of the heartbeat (Redis runs it at once: ~0.3 ms for 1,000).
RENEW_CHUNK = 1000


@dataclass(frozen=True)
class Lease:
    """A lease this member holds: ``key`` (the lease key), ``member``, ``fence`` (the token
    number), ``ttl_ms``; ``token`` is the value stored in Redis."""

    model: str
    key: str
    member: str
    fence: int
    ttl_ms: int

    @property
    def token(self) -> str:
        return f"{self.member}|{self.fence}"


def lease_keys(stream_key: str) -> tuple[str, str]:
    """``(lease key, fence counter key)`` of a model's stream."""
    return f"{stream_key}:lease", f"{stream_key}:fence"


def acquire(client, model: str, stream_key: str, member: str, ttl_ms: int) -> Lease | None:
    """Take the model's lease if nobody holds it (the fence counter increases); None if held."""
    key, fence_key = lease_keys(stream_key)
    fence = client.eval(fencing.ACQUIRE, 2, key, fence_key, member, ttl_ms)
    if fence == -1:
        return None
    return Lease(model, key, member, int(fence), ttl_ms)


def acquire_many(
    client, wanted: list[tuple[str, str]], member: str, ttl_ms: int
) -> tuple[list[Lease], dict[str, str | None]]:
    """Take every free lease of ``wanted`` (``(model, stream key)`` pairs) in one pipelined
    round trip; returns the leases taken and, for the others, ``{model: holder}`` (the member
    holding it, None when it expired between the two commands)."""
    pipe = client.pipeline(transaction=False)
    for _, stream_key in wanted:
        key, fence_key = lease_keys(stream_key)
        pipe.eval(fencing.ACQUIRE, 2, key, fence_key, member, ttl_ms)
        pipe.get(key)
    replies = pipe.execute() if wanted else []
    taken, held = [], {}
    for (model, stream_key), fence, value in zip(wanted, replies[0::2], replies[1::2]):
        if fence == -1:
            text = value.decode() if isinstance(value, bytes) else value
            held[model] = None if text is None else text.rpartition("|")[0]
        else:
            taken.append(Lease(model, lease_keys(stream_key)[0], member, int(fence), ttl_ms))
    return taken, held


def beat(
    client, member: str, ttl_ms: int, url: str | None, leases: list[Lease]
) -> tuple[list[str], list[bool]]:
    """A member's heartbeat (:data:`membership.HEARTBEAT`), its advertised URL and the renewal
    of every lease it holds (:data:`fencing.RENEW_MANY`, each at ``ttl_ms``), in one pipelined
    round trip; returns the live members and, per lease, whether it was renewed (False: not
    ours any more)."""
    pipe = client.pipeline(transaction=False)
    pipe.eval(membership.HEARTBEAT, 1, membership.MEMBERS_KEY, member, ttl_ms)
    if url:
        pipe.hset(membership.URLS_KEY, member, url)
    for start in range(0, len(leases), RENEW_CHUNK):  # one script per chunk, not one per lease
        chunk = leases[start : start + RENEW_CHUNK]
        pipe.eval(fencing.RENEW_MANY, len(chunk), *(x.key for x in chunk), *(x.token for x in chunk), ttl_ms)
    replies = pipe.execute()
    renewed = [r != -1 for part in replies[2 if url else 1 :] for r in part]
    return [as_str(m) for m in replies[0]], renewed


def release(client, lease: Lease) -> bool:
    """Delete the lease if still ours."""
    return client.eval(fencing.RELEASE, 1, lease.key, lease.token) != -1


def holder(client, stream_key: str) -> str | None:
    """The member holding the model's lease, or None."""
    value = client.get(lease_keys(stream_key)[0])
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else value
    return text.rpartition("|")[0]
