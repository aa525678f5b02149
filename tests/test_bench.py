"""``make bench`` stays runnable: every benchmark module imports against today's app and core.

The benchmarks call into the app (number formatting, pages, the store) and are not run by
``make test``; a rename in the app broke ``bench/run.py`` once without any test noticing.
"""

from __future__ import annotations

import subprocess
import sys

from workbench_server import ROOT


def test_every_benchmark_module_imports():
    modules = sorted(path.stem for path in (ROOT / "bench").glob("*.py"))
    assert "run" in modules
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = subprocess.run([sys.executable, "-c", code, *modules], cwd=ROOT / "bench",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
