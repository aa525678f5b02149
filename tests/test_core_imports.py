"""The core's modules import one way only: each imports alone, and no import comes back round.

An import cycle makes import order load-bearing (a module that works only when another was
imported first) and hides which module a type belongs to; these tests keep the core's graph
acyclic, counting every import of a core module, at top level, in a function or for type
checking only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "attention_core"
MODULES = sorted(f"attention_core.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")

# The checks audit an AttentionResult, which holds their Check records: checks.py names the
# result's type in annotations alone (under TYPE_CHECKING), never at run time.
ANNOTATION_ONLY = {("attention_core.checks", "attention_core.attention")}


def core_imports(path: Path) -> set[str]:
    """The core modules (``attention_core`` for the package itself) that the file imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "attention_core"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "attention_core":
            if node.module == "attention_core":  # `from attention_core import x`: x may be a module
                found |= {f"attention_core.{a.name}" if f"attention_core.{a.name}" in MODULES
                          else "attention_core" for a in node.names}
            else:
                found.add(node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each core module (and the package) to the core modules it imports."""
    graph = {m: core_imports(CORE / f"{m.rsplit('.', 1)[1]}.py") for m in MODULES}
    graph["attention_core"] = core_imports(CORE / "__init__.py")
    return {m: {t for t in targets if (m, t) not in ANNOTATION_ONLY} for m, targets in graph.items()}


def test_the_core_import_graph_has_no_cycle():
    graph = import_graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(module):], module]))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])


def test_the_graph_check_sees_a_cycle_through_type_checking_and_functions(tmp_path):
    """The parser counts the imports a cycle hides in (TYPE_CHECKING blocks, function bodies)."""
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from attention_core.attention import AttentionResult\n"
                      "def f():\n    from attention_core import records\n")
    assert core_imports(source) == {"attention_core.attention", "attention_core.records"}


@pytest.mark.parametrize("module", ["attention_core", *MODULES])
def test_each_core_module_imports_alone_in_a_fresh_interpreter(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                          cwd=CORE.parent, timeout=60)
    assert done.returncode == 0, done.stderr
