"""Rendezvous (highest-random-weight) hashing: which member owns a model.

Each ``(member, model)`` pair gets a pseudo-random weight (the first 8 bytes of a BLAKE2b
hash); a model belongs to the member of highest weight (Thaler & Ravishankar, 1998).  Every
member computes the same answer from the same list of live members, without any exchange; when a
member joins it takes from each other member only the models whose weight it beats (~1/N of
them), and when one leaves only its models move, spread over the others.

>>> owner("default", ["a", "b"]) in ("a", "b")
True
>>> owner("default", []) is None
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(member: str, model: str) -> int:
    """The pseudo-random weight of ``model`` on ``member`` (an unsigned 64-bit integer)."""
    digest = hashlib.blake2b(f"{member}\0{model}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(model: str, members: Iterable[str]) -> str | None:
    """The member of highest :func:`weight` for ``model`` (ties: the greater name); None if no
    member is alive."""
    best = None
    best_key = None
    for member in members:
        key = (weight(member, model), member)
        if best_key is None or key > best_key:
            best, best_key = member, key
    return best


def assign(models: Iterable[str], members: Iterable[str]) -> dict[str, str]:
    """``{model: owner}`` for every model (none when there is no member)."""
    members = sorted(set(members))
    if not members:
        return {}
    return {m: owner(m, members) for m in models}  # type: ignore[misc]
