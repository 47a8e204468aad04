"""``python -m benchmarks``: ``list`` the benchmarks, ``run`` one, ``compare`` two trees with one.

* ``python -m benchmarks list [--markdown]``: every benchmark, one line each (``--markdown``:
  the table of ``benchmarks/README.md``);
* ``python -m benchmarks run NAME [args...]``: the same as ``python -m benchmarks.NAME args...``;
* ``python -m benchmarks compare --before DIR [--after DIR] [--rounds 3] NAME [args...]``:
  ``NAME`` interleaved in two source trees (``benchmarks/compare.py``).
"""

from __future__ import annotations

import sys

USAGE = __doc__.split("\n\n", 1)[1]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "list":
        from benchmarks.runner import list_benchmarks

        if rest not in ([], ["--markdown"]):
            sys.exit("usage: python -m benchmarks list [--markdown]")
        print(list_benchmarks(markdown=rest == ["--markdown"]))
    elif command == "run" and rest:
        from benchmarks.runner import run

        run(rest[0], rest[1:])
    elif command == "compare":
        from benchmarks.compare import main as compare_main

        return compare_main(rest)
    else:
        print(USAGE, file=sys.stderr)
        return 0 if command in ("-h", "--help") else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
