"""Size check: small rooms in app/ and solvers/.

* no module of ``app/`` or ``solvers/`` over 500 lines;
* no function over 80 lines (decorators counted), except a numba kernel of ``solvers/``
  (a function decorated with ``numba.njit``/``numba.jit``, ``nb.njit``, ``njit``, ...,
  called or not) that gives its reason in a one-line comment directly above it (in the
  comment block right before its first decorator)::

      # size: one numba kernel, the per-example loop of Algorithm 1
      @nb.njit(nogil=True, cache=True)
      def bsgd_steps(...):

  A numba kernel over 80 lines without such a line is named as an offender.

Run by .ci/run after lint-imports. Exits 1 and names each offender (path:line, name, lines).
`python .ci/check_sizes.py [ROOT]` checks ROOT/app and ROOT/solvers (default: this repository's).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
#: The checked folders; numba kernels may be longer only in these (with a reason).
CHECKED = ("app", "solvers")
NUMBA_KERNELS_IN = ("solvers",)
#: The comment that gives a long numba kernel its reason.
REASON = "# size:"
#: Modules over the limit while their split is under way on another branch (issue 37), with the
#: branch that splits them: reported on stderr, not counted.  Empty it as they land.
PENDING: dict[str, str] = {}
#: Names a numba decorator is called by (``numba.njit``, ``nb.jit(...)``, ``njit``).
_NUMBA_DECORATORS = {"njit", "jit"}


def _is_numba(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute):
        return target.attr in _NUMBA_DECORATORS and isinstance(target.value, ast.Name)
    return isinstance(target, ast.Name) and target.id in _NUMBA_DECORATORS


def _reason(lines: list[str], first: int) -> str | None:
    """The ``# size:`` reason in the comment block right above line ``first`` (1-based)."""
    index = first - 2
    while index >= 0 and lines[index].lstrip().startswith("#"):
        text = lines[index].strip()
        if text.startswith(REASON) and text[len(REASON) :].strip():
            return text[len(REASON) :].strip()
        index -= 1
    return None


def _function_offenders(rel: str, text: str, path: Path, numba_allowed: bool) -> list[str]:
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        length = node.end_lineno - first + 1
        if length <= MAX_FUNCTION_LINES:
            continue
        if numba_allowed and any(_is_numba(d) for d in node.decorator_list):
            if _reason(lines, first) is None:
                found.append(
                    f"{rel}:{node.lineno}: numba kernel {node.name} has {length} lines "
                    f"(limit {MAX_FUNCTION_LINES} without a '{REASON} <reason>' line above it)"
                )
            continue
        found.append(
            f"{rel}:{node.lineno}: function {node.name} has {length} lines (limit {MAX_FUNCTION_LINES})"
        )
    return found


def offenders(root: Path) -> list[str]:
    """One line per module or function of ``root/app`` and ``root/solvers`` over its limit,
    sorted by path."""
    found = []
    for folder in CHECKED:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            n_lines = len(text.splitlines())
            rel = path.relative_to(root).as_posix()
            if n_lines > MAX_MODULE_LINES and rel not in PENDING:
                found.append(f"{rel}: module has {n_lines} lines (limit {MAX_MODULE_LINES})")
            found.extend(_function_offenders(rel, text, path, folder in NUMBA_KERNELS_IN))
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    if not any((root / folder).is_dir() for folder in CHECKED):
        print(
            f"check_sizes: no {' or '.join(f'{f}/' for f in CHECKED)} directory under {root}", file=sys.stderr
        )
        return 2
    found = offenders(root)
    for rel, why in PENDING.items():
        path = root / rel
        if path.is_file() and len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES:
            print(f"check_sizes: pending: {rel} ({why})", file=sys.stderr)
    for line in found:
        print(line)
    if found:
        print(f"check_sizes: {len(found)} over the limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
