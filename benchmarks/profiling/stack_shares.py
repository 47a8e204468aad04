"""Inclusive shares per stage of a py-spy raw (collapsed) file: the tally behind
``cpu_shares.py`` and ``gil_shares.py``."""

import collections
import re
from pathlib import Path


def print_shares(path, stages, *, idle=None, top=12, heading=None):
    """Print the share of samples of ``path`` (lines ``frame;frame;... count``) whose stack matches
    each ``(name, pattern)`` of ``stages``, then the ``top`` leaf frames; stacks matching the
    compiled ``idle`` pattern (blocked threads) are left out of the total."""
    tot = 0
    counts = collections.Counter()
    leaf = collections.Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        n = int(n)
        if idle is not None and idle.search(stack):
            continue
        tot += n
        for name, pat in stages:
            if re.search(pat, stack):
                counts[name] += n
        leaf[stack.split(";")[-1]] += n
    print(f"samples {tot}")
    for name, _ in stages:
        print(f"| {name} | {100 * counts[name] / tot:.1f} % |")
    if heading:
        print(heading)
    width = 150 if heading else 140
    for k, v in leaf.most_common(top):
        print(f"  {100 * v / tot:5.1f}  {k[:width]}")
