"""Size check: no app/ module over 500 lines, no app/ function over 80 lines.

Run by .ci/run after lint-imports. Exits 1 and names each offender (path:line, name, lines).
`python .ci/check_sizes.py [ROOT]` checks ROOT/app (default: the repository's app/).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def offenders(root: Path) -> list[str]:
    """One line per module or function of ``root/app`` over its limit, sorted by path."""
    found = []
    for path in sorted((root / "app").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        n_lines = len(text.splitlines())
        rel = path.relative_to(root).as_posix()
        if n_lines > MAX_MODULE_LINES:
            found.append(f"{rel}: module has {n_lines} lines (limit {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = node.end_lineno - first + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(
                        f"{rel}:{node.lineno}: function {node.name} has {length} lines "
                        f"(limit {MAX_FUNCTION_LINES})"
                    )
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    if not (root / "app").is_dir():
        print(f"check_sizes: no app/ directory under {root}", file=sys.stderr)
        return 2
    found = offenders(root)
    for line in found:
        print(line)
    if found:
        print(f"check_sizes: {len(found)} over the limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
