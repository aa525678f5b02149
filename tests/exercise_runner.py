"""Run generated exercise tests as a learner would: vitest over TypeScript, pytest over Python.

Each implementation of the exercise (``correct`` or ``starter``, from ``tests/exercise/``) gets a
folder laid out like the exercise of Self-attention, "Shapes and loops": ``<impl>/attention.ts``
beside ``<impl>/tests/*.test.ts`` (the generated tests import ``"../attention"``), and for Python
``py-<impl>/masked_attention.py`` beside the generated ``test_*.py``. One vitest process runs
every TypeScript file of every implementation; pytest runs once per implementation (both copies are
called ``masked_attention``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from find_node import NODE_DIR, vitest_or_fail

FIXTURES = Path(__file__).resolve().parent / "exercise"
IMPLEMENTATIONS = ("correct", "starter")
# The generated tests' names (TypeScript title, Python function) that the starter's bug fails.
ROW_SUM_TEST = {"ts": "makes every row sum to 1", "py": "test_row_sums"}
WEIGHTS_TEST = {"ts": "gives the correct weight in every cell, within TOLERANCE", "py": "test_weights"}


def lay_out(root: Path, tests: dict[str, dict[str, str]]) -> None:
    """Write ``tests[impl][file name] = text`` under ``root`` beside each implementation's copy.

    A ``.ts`` name goes to ``<impl>/tests/`` with ``<impl>/attention.ts``; a ``.py`` name to
    ``py-<impl>/`` with ``py-<impl>/masked_attention.py``.
    """
    for impl, files in tests.items():
        for name, text in files.items():
            if name.endswith(".ts"):
                folder = root / impl / "tests"
                shutil.copyfile(FIXTURES / f"{impl}_attention.ts", _made(folder).parent / "attention.ts")
            else:
                folder = _made(root / f"py-{impl}")
                shutil.copyfile(FIXTURES / f"{impl}_attention.py", folder / "masked_attention.py")
                (folder / "pytest.ini").write_text("[pytest]\n")  # this folder is pytest's root
            (folder / name).write_text(text, encoding="utf-8")


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


Results = dict[tuple[str, str], dict[str, tuple[str, str]]]


def run_vitest(root: Path) -> Results:
    """Run every ``*.test.ts`` under ``root`` in one vitest process.

    Returns ``{(impl, file name): {test title: (status, failure messages)}}``, status ``passed``
    or ``failed``. Fails the calling test if Node or vitest is missing or vitest itself errs.
    """
    command = vitest_or_fail()
    link = root / "node_modules"  # the generated tests import "vitest" from here
    if not link.exists():
        link.symlink_to(NODE_DIR / "node_modules", target_is_directory=True)
    report = root / "vitest-report.json"
    done = subprocess.run(
        # --no-isolate: the files share one worker's module cache (each implementation is its own
        # module path, so none sees another's), instead of a fresh environment per file.
        [*command, "run", "--root", str(root), "--no-isolate", "--reporter=json", f"--outputFile={report}"],
        cwd=root, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1", "CI": "true"})
    if not report.is_file():
        raise AssertionError(f"vitest wrote no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    results: Results = {}
    for file in json.loads(report.read_text())["testResults"]:
        path = Path(file["name"]).relative_to(root.resolve())
        if file["status"] == "failed" and not file["assertionResults"]:
            raise AssertionError(f"vitest could not run {path}: {file.get('message')}")
        results[(path.parts[0], path.name)] = {
            t["title"]: (t["status"], "\n".join(t["failureMessages"])) for t in file["assertionResults"]}
    return results


def run_pytest(root: Path, impl: str) -> Results:
    """Run the generated pytest files of ``py-<impl>`` in a pytest of their own (a subprocess).

    Returns ``{(impl, file name): {test name: (status, failure message)}}``, status ``passed`` or
    ``failed``.
    """
    folder = root / f"py-{impl}"
    report = folder / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", str(folder)],
        cwd=folder, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    results: Results = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("classname").rsplit(".", 1)[-1] + ".py"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        status = "passed" if problem is None else "failed"
        message = "" if problem is None else problem.get("message", "")
        results.setdefault((impl, name), {})[case.get("name")] = (status, message)
    return results
