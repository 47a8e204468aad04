"""The size check of ``.ci/run`` (``.ci/check_sizes.py``): it passes on this tree, and it
fails naming each ``app/`` module over 500 lines and each function over 80."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / ".ci" / "check_sizes.py"


def _run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=60
    )


def _function(name: str, n_lines: int, decorated: bool = False) -> str:
    """Source of a function spanning exactly ``n_lines`` lines (decorator included)."""
    head = ["@staticmethod"] if decorated else []
    body = [f"    x{i} = {i}" for i in range(n_lines - len(head) - 2)]
    return "\n".join([*head, f"def {name}():", *body, "    return 0"]) + "\n"


def test_the_tree_passes_the_size_check():
    done = _run(REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_names_each_oversized_module_and_function(tmp_path):
    pkg = tmp_path / "app" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "app" / "fits.py").write_text(
        _function("at_the_limit", 80) + _function("decorated", 80, True)
    )
    (pkg / "long_function.py").write_text("\n" + _function("too_long", 81))
    (pkg / "long_module.py").write_text("".join(_function(f"f{k}", 50) for k in range(11)))  # 550 lines
    (tmp_path / "elsewhere.py").write_text(_function("outside_app", 200))  # not under app/: not checked
    done = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        "app/sub/long_function.py:2: function too_long has 81 lines (limit 80)",
        "app/sub/long_module.py: module has 550 lines (limit 500)",
    ], lines
    assert "2 over the limit" in done.stderr


def test_a_decorator_counts_in_a_function_length(tmp_path):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "m.py").write_text(_function("f", 81, decorated=True))
    done = _run(tmp_path)
    assert done.returncode == 1 and "function f has 81 lines" in done.stdout, done.stdout


def _kernel(name: str, n_lines: int, reason: str | None) -> str:
    """A numba kernel spanning ``n_lines`` lines (decorator included), with a reason line above."""
    head = [f"# size: {reason}"] if reason is not None else []
    body = [f"    x{i} = {i}" for i in range(n_lines - 3)]
    return (
        "\n".join([*head, "@nb.njit(nogil=True, cache=True)", f"def {name}():", *body, "    return 0"]) + "\n"
    )


def test_solvers_are_checked_and_a_long_numba_kernel_needs_its_reason(tmp_path):
    pkg = tmp_path / "solvers" / "family"
    pkg.mkdir(parents=True)
    (pkg / "kernels.py").write_text(
        _kernel("with_reason", 120, "one numba kernel, the per-example loop")
        + "\n"
        + _kernel("without_reason", 90, None)
        + "\n# size:\n"  # an empty reason is no reason
        + _kernel("empty_reason", 85, None)
    )
    (pkg / "driver.py").write_text(_function("long_driver", 81))
    (tmp_path / "solvers" / "big.py").write_text("".join(_function(f"f{k}", 50) for k in range(11)))
    (tmp_path / "app").mkdir()
    # numba kernels are exempt in solvers/ only
    (tmp_path / "app" / "m.py").write_text(_kernel("in_app", 90, "no exemption in app/"))
    done = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        "app/m.py:3: function in_app has 90 lines (limit 80)",
        "solvers/big.py: module has 550 lines (limit 500)",
        "solvers/family/driver.py:1: function long_driver has 81 lines (limit 80)",
        "solvers/family/kernels.py:124: numba kernel without_reason has 90 lines "
        "(limit 80 without a '# size: <reason>' line above it)",
        "solvers/family/kernels.py:216: numba kernel empty_reason has 85 lines "
        "(limit 80 without a '# size: <reason>' line above it)",
    ], lines


def test_every_long_numba_kernel_of_the_tree_gives_its_reason():
    sys.path.insert(0, str(REPO / ".ci"))
    try:
        import check_sizes
    finally:
        sys.path.pop(0)
    import ast

    reasons = []
    for path in sorted((REPO / "solvers").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and any(
                check_sizes._is_numba(d) for d in node.decorator_list
            ):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if node.end_lineno - first + 1 > check_sizes.MAX_FUNCTION_LINES:
                    reasons.append((path.name, node.name, check_sizes._reason(lines, first)))
    assert reasons and all(reason for _, _, reason in reasons), reasons
