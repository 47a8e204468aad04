"""The snapshot store of a clustered learner: a write needs the model's lease.

:class:`FencedSnapshotStore` asks Redis (:data:`svmstream.app.stream.fencing.SNAPSHOT_OK`)
before each snapshot file is encoded and again right before it is renamed into place: allowed while this learner's lease of the model is
the current one, or for a brand-new model nobody holds and the catalogue does not list yet
(``POST /models``); refused (:class:`~svmstream.app.stream.fencing.Fenced`) otherwise.  What is
left between that check and the file's rename is documented in ``docs/cluster.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from svmstream.app.cluster.membership import MODELS_KEY
from svmstream.app.models.snapshots import SnapshotStore, Written
from svmstream.app.stream import fencing


class _Writing(threading.local):
    """The lease a write of this thread started with, for its check before the rename."""

    lease: tuple[str, str] | None = None


_writing = _Writing()


@dataclass
class FencedSnapshotStore(SnapshotStore):
    """:class:`SnapshotStore` whose :meth:`write` is fenced (``client``: a Redis client;
    ``token_of``: model name -> ``(lease key, token or '')``).  The store is shared: a learner
    that starts removes only temp files older than ``temp_grace_s`` (a live learner's write in
    progress is not an interrupted one)."""

    temp_grace_s: float = 600.0
    client: Any = None
    token_of: Callable[[str], tuple[str, str]] | None = None
    refused: int = 0

    def write(self, name: str, *args: Any, **kwargs: Any) -> Written:
        key, token = self.token_of(name)
        self._check(name, key, token)  # before encoding: a refused write costs nothing
        # the writer and its fence, for audits (docs/cluster.md: fences never decrease by seq)
        kwargs["extra"] = {**(kwargs.get("extra") or {}), "cluster_writer": token or "new"}
        _writing.lease = (key, token)
        try:
            return super().write(name, *args, **kwargs)
        finally:
            _writing.lease = None

    def before_replace(self, name: str) -> Callable[[], None]:
        """The same check again once the file is on disk, right before its rename: a learner
        paused while encoding or writing (SIGSTOP, a long GC) and resumed after losing the
        lease renames nothing.  The token is the one :meth:`write` started with (this thread's)."""
        key, token = _writing.lease or self.token_of(name)
        return lambda: self._check(name, key, token)

    def _check(self, name: str, key: str, token: str) -> None:
        if self.client.eval(fencing.SNAPSHOT_OK, 2, key, MODELS_KEY, token, name) != 1:
            self.refused += 1
            raise fencing.Fenced(f"model {name!r}: not ours any more; snapshot refused")
