"""``POST /learn`` for a model another learner owns, forwarded to its owner
(``SVMSTREAM_CLUSTER_LEARN_ROUTE=forward``; ``docs/cluster.md``, "Any node takes any request").

**The learner that got the request** (:meth:`Forwarder.route`) finds the model's owner (the
holder of its lease) and the owner's advertised URL (published with its heartbeat in
``svmstream:cluster:urls``) in one script, and sends it the body as it came, with the caller's
``Authorization`` and a forward id (:data:`FORWARD_HEADER`).  The owner's answer goes back as it
is: ``200`` with the new version, or its ``4xx`` (a ``422`` naming the field; nothing changed).
When there is no owner (a hand-off under way), the owner does not answer, answers ``421`` (not
the owner any more) or ``5xx``, the batch is **appended** to the model's stream instead, once per
forward id (:func:`~svmstream.app.cluster.append.append_once`), so an owner that appended it
before dying is not appended to twice: the answer is then the append's ``202`` with
``"fallback"`` saying why.  Nothing is lost and nothing is applied twice.

**The owner** (:func:`accept`) validates the whole batch as ``/learn`` does (422 naming the
field, nothing written), appends it to the model's stream under the forward id, and waits until
its own consumer has applied those entries (:class:`~svmstream.app.stream.progress.ApplyProgress`):
a forwarded batch is learned through the stream, in the stream's order, so it is as durable as
any streamed entry (a SIGKILL after the append loses nothing; the next owner applies it) and
every model stays equal to an uninterrupted run of its stream.  If the wait ends first
(``SVMSTREAM_CLUSTER_FORWARD_TIMEOUT_S``, or the model moved meanwhile) the answer is ``202``:
the entries are in the stream.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import scipy.sparse as sp
from prometheus_client import Counter

from svmstream.app.cluster import membership
from svmstream.app.cluster.append import ONCE_TTL_MS, append_learn, append_once, model_of, stream_entries
from svmstream.app.cluster.leases import lease_keys
from svmstream.app.errors import ModelNotFound, ServiceError
from svmstream.app.ingest.decode import decode_body, may_contain_bools
from svmstream.app.ingest.examples import parse_examples
from svmstream.app.ingest.features import conform
from svmstream.app.stream.redis_ops import parse_id

log = logging.getLogger("svmstream.cluster")

#: The id of a forward: the owner appends under it, the fallback append too (once in all).
FORWARD_HEADER = "x-svmstream-forward-id"
#: The member that forwarded (for the owner's logs).
FORWARDED_BY = "x-svmstream-forwarded-by"
#: Seconds the forwarding learner waits for the owner beyond the owner's own wait.
ANSWER_MARGIN_S = 5.0

OWNER_URL = """
local v = redis.call('get', KEYS[1])
if not v then
  return false
end
local member = string.match(v, '^(.*)|')
return {member, redis.call('hget', KEYS[2], member) or ''}
"""
"""KEYS: the model's lease, the members' URLs.  ``[member, url]`` of the lease holder, or nil."""


class Misdirected(ServiceError):
    """A forwarded ``/learn`` reached a learner that does not own the model (421: the sender
    appends the batch instead)."""

    default_status = 421


class RouteMetrics:
    """``svmstream_cluster_learn_*`` on the app's Prometheus registry."""

    def __init__(self, prom):
        self.routed = Counter(
            "svmstream_cluster_learn_routed_total",
            "POST /learn of models another learner owns, by route: forwarded (the owner answered), "
            "appended (to the model's stream), fallback_appended (a forward the owner could not take)",
            ["route"],
            registry=prom,
        )
        self.received = Counter(
            "svmstream_cluster_forwards_received_total",
            "Forwarded POST /learn received, by answer: applied (200), queued (202: still in the stream "
            "when the wait ended), misdirected (421: not the owner), refused (4xx)",
            ["answer"],
            registry=prom,
        )


@dataclass
class Accepted:
    """A forwarded batch appended by its owner: what to answer once its entries are applied."""

    handle: Any
    answer: dict[str, Any]
    ids: tuple  # (first, last) entry IDs
    streams: Any  # the StreamManager: the model's consumer applies them (:func:`waiter_of`)


def once_ttl_ms(settings) -> int:
    """How long a forward's once-marker stays: twice the longest a forward can take."""
    return int(max(ONCE_TTL_MS / 1000, 2 * (settings.cluster_forward_timeout_s + ANSWER_MARGIN_S)) * 1000)


def accept(coordinator, registry, streams, body: bytes, default_model: str, once_id: str) -> Accepted:
    """The owner's side of a forward (in a worker thread): validate, append once, wait handle.

    Raises :class:`Misdirected` when this learner does not own the model, what ``/learn``
    raises for a bad body (nothing written then)."""
    obj = decode_body(body)
    name = model_of(obj, default_model)
    try:
        handle = registry.get(name)
    except ModelNotFound:
        raise Misdirected(f"model {name!r} is not owned by learner {coordinator.member!r}") from None
    if coordinator.lease(name) is None:
        raise Misdirected(f"model {name!r} is being handed off by learner {coordinator.member!r}")
    handle.check_learns()
    batch = parse_examples(
        obj, handle.codec, check_bools=may_contain_bools(body), has_schema=handle.fields is not None
    )
    if batch.X is not None and handle.n_features is not None:  # the dimension rules of submit
        d = handle.n_features
        if sp.issparse(batch.X) and not handle.n_features_fixed:
            d = max(d, int(batch.X.shape[1]))
        conform(batch.X, d, batch.n_features, name)
    entries = stream_entries(obj, labels_optional=True)
    key = coordinator.settings.stream_keys(name)[0]
    first, last, _ = append_once(coordinator.client, key, once_id, entries, once_ttl_ms(coordinator.settings))
    answer = {
        "model": name,
        "n_examples": len(entries),
        "route": "forwarded",
        "owner": coordinator.member,
        "stream": key,
        "first_id": first,
        "last_id": last,
    }
    return Accepted(handle, answer, (parse_id(first), parse_id(last)), streams)


def waiter_of(got: Accepted):
    """A future of the dead-lettered count of ``got``'s entries from the model's consumer here,
    or None while it has none (just gained: the consumer starts within a tick; ask again)."""
    consumer = got.streams.consumers.get(got.handle.name) if got.streams is not None else None
    if consumer is None or consumer.handle is not got.handle:
        return None
    return consumer.applier.progress.wait_for(*got.ids)


class Forwarder:
    """The forwarding side (one per clustered learner; :meth:`aclose` at shutdown)."""

    def __init__(self, settings, coordinator, metrics: RouteMetrics):
        self.settings = settings
        self.coordinator = coordinator
        self.metrics = metrics
        timeout = settings.cluster_forward_timeout_s + ANSWER_MARGIN_S
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(2.0, timeout)))

    async def aclose(self) -> None:
        await self.http.aclose()

    def owner_url(self, name: str) -> str | None:
        """The URL of ``name``'s owner when another learner holds its lease, else None."""
        lease = lease_keys(self.settings.stream_keys(name)[0])[0]
        found = self.coordinator.client.eval(OWNER_URL, 2, lease, membership.URLS_KEY)
        if not found:
            return None
        member, url = (v.decode() for v in found)
        if member == self.coordinator.member or not url:  # ours, not installed yet: append
            return None
        return url

    def append(self, obj: Any, once_id: str | None = None, why: str | None = None) -> dict[str, Any]:
        """The append route (``once_id``: that of a forward that fell back; ``why`` it did)."""
        answer = append_learn(
            self.coordinator,
            obj,
            self.settings.default_model,
            once_id=once_id,
            once_ttl=once_ttl_ms(self.settings),
        )
        if why is not None:
            answer["fallback"] = why
        self.metrics.routed.labels("appended" if why is None else "fallback_appended").inc()
        return answer

    async def forward(self, obj: Any, body: bytes, headers, run) -> tuple[int, Any, dict[str, str]]:
        """Forward to the owner: ``(status, answer, headers)`` where ``answer`` is the owner's
        body (bytes) or the fallback append's dict.  ``run(fn, *args)`` runs blocking calls in a
        worker thread."""
        name = model_of(obj, self.settings.default_model)
        if not isinstance(obj, dict) or not await run(self.coordinator.catalogued, name):
            raise ModelNotFound(f"model {name!r} not found")
        once_id = uuid.uuid4().hex
        url = await run(self.owner_url, name)
        why = "no other learner holds the model's lease (a hand-off is under way)"
        if url is not None:
            sent = {
                "content-type": "application/json",
                FORWARD_HEADER: once_id,
                FORWARDED_BY: self.coordinator.member,
            }
            if headers.get("authorization"):
                sent["authorization"] = headers["authorization"]
            try:
                reply = await self.http.post(url.rstrip("/") + "/learn", content=body, headers=sent)
            except httpx.HTTPError as exc:
                why = f"the owner at {url} did not answer ({type(exc).__name__})"
            else:
                if reply.status_code != 421 and reply.status_code < 500:  # the owner's answer
                    self.metrics.routed.labels("forwarded").inc()
                    kept = {
                        k: v for k, v in reply.headers.items() if k in ("retry-after", "www-authenticate")
                    }
                    return reply.status_code, reply.content, kept
                why = f"the owner at {url} answered {reply.status_code}"
        log.info("cluster: /learn of model %r appended instead of forwarded: %s", name, why)
        return 202, await run(self.append, obj, once_id, why), {}
