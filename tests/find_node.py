"""Find Node.js and the vitest that runs the generated TypeScript tests; with ``--install``, install it.

Used by ``make test`` (``python tests/find_node.py --install``) and by the exercise tests
(``vitest_or_fail()``), like ``find_browser.py`` for Chromium. vitest comes from npm, pinned by
``tests/exercise/package.json`` and ``package-lock.json``, installed with ``npm ci`` into
``.cache/node/`` (not into the repository's tests): once per lock file, then reused.

It never decides to skip: a missing or too old Node, or an install that fails, is an error that
says what to do (under ``CI=true`` and everywhere else alike).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK_DIR = ROOT / "tests" / "exercise"
NODE_DIR = ROOT / ".cache" / "node"
VITEST = NODE_DIR / "node_modules" / "vitest" / "vitest.mjs"
STAMP = NODE_DIR / ".installed"
# vitest 4 runs on vite 8 and rolldown, which need Node 20.19 or later.
MIN_NODE = (20, 19)

HOW_TO_FIX = (f"Install Node.js {MIN_NODE[0]}.{MIN_NODE[1]} or later with npm (e.g. `sudo apt-get install nodejs npm`, "
              "or from https://nodejs.org) and run `make test` again.")


def node_problem() -> str | None:
    """Why Node cannot run vitest here (no node or npm, or too old), or None."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return f"no {'node' if node is None else 'npm'} on PATH. {HOW_TO_FIX}"
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+.*", version)
    if match is None or tuple(map(int, match.groups())) < MIN_NODE:
        return f"node {version or '(no version)'} is too old for vitest 4. {HOW_TO_FIX}"
    return None


def _lock_digest() -> str:
    return hashlib.sha256(b"".join((LOCK_DIR / n).read_bytes()
                                   for n in ("package.json", "package-lock.json"))).hexdigest()


def installed() -> bool:
    """Whether ``.cache/node`` holds vitest as the committed lock file pins it."""
    return VITEST.is_file() and STAMP.is_file() and STAMP.read_text().strip() == _lock_digest()


def install() -> str | None:
    """``npm ci`` the pinned vitest into ``.cache/node`` unless it is there; returns a problem or None."""
    if problem := node_problem():
        return problem
    if installed():
        return None
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(LOCK_DIR / name, NODE_DIR / name)
    cmd = ["npm", "ci", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"]
    print("find_node: running " + " ".join(cmd), file=sys.stderr)
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0 or not VITEST.is_file():
        return (f"`{' '.join(cmd)}` failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}\n"
                "npm needs to reach its registry (https://registry.npmjs.org) once to install vitest.")
    STAMP.write_text(_lock_digest() + "\n")
    return None


def vitest_or_fail() -> list[str]:
    """The command that runs vitest (installing it first if needed); fails the calling test if it cannot."""
    import pytest

    if problem := install():
        pytest.fail(f"Cannot run the generated TypeScript tests: {problem}", pytrace=False)
    return [shutil.which("node"), str(VITEST)]


def main(argv: list[str]) -> int:
    problem = install() if "--install" in argv else (node_problem() or (None if installed() else
                                                     "vitest is not installed: run `make test` or "
                                                     "`python tests/find_node.py --install`"))
    if problem:
        print(f"find_node: {problem}", file=sys.stderr)
        return 1
    print(VITEST)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
