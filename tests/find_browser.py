"""Find a Chromium for the browser tests, and with ``--install`` get one if there is none.

Used by ``make test`` (``python tests/find_browser.py --install``) and by ``tests/conftest.py``
(``find_chromium()``), so both look in the same places, in this order:

1. for headless runs (every test run unless ``--headed``), Debian's old headless shell,
   ``chromium-headless-shell``: what Playwright itself runs headless tests in; a learner page
   costs it much less CPU than the whole browser's headless mode, and the browser tests are
   most of ``make test``'s time (figures in bench/README.md, "make test's time");
2. a system Chromium: ``/usr/bin/chromium``, then ``chromium``, ``chromium-browser``,
   ``google-chrome`` on ``PATH`` (``playwright install`` cannot download on our machines);
3. the Chromium that ``python -m playwright install chromium`` downloaded.

Installing (only with ``--install``), when running as root: Debian's ``chromium`` and
``chromium-headless-shell`` when there is no browser (``chromium`` alone if that fails), the
headless shell alone when only it is missing (its failure is no error: it is only faster); else
``python -m playwright install chromium``. It never decides to skip browser tests: if nothing
works it exits non-zero saying what it tried and how to fix it. The benchmarks and ``make
screenshots`` keep the whole browser (``find_chromium(headless_shell=False)``): they measure and
show what a learner's browser does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

SYSTEM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
HEADLESS_SHELL = "chromium-headless-shell"

HOW_TO_FIX = (
    "Install a Chromium and run `make test` again: `sudo apt-get install chromium chromium-headless-shell` (Debian), "
    "or `.venv/bin/python -m playwright install chromium` where downloads are allowed."
)


def system_chromium() -> str | None:
    """Path of a Chromium installed on the system, or None."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    for name in SYSTEM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def find_headless_shell() -> str | None:
    """Path of Debian's ``chromium-headless-shell`` (headless only), or None."""
    return shutil.which(HEADLESS_SHELL, path=f"/usr/bin{os.pathsep}{os.environ.get('PATH', '')}")


def playwright_chromium() -> str | None:
    """Path of Playwright's own downloaded Chromium if it is on disk, or None."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as pw:
            path = pw.chromium.executable_path
    except Exception:  # the driver failing to start means no usable browser either
        return None
    return path if path and os.access(path, os.X_OK) else None


def find_chromium(headless_shell: bool = True) -> str | None:
    """Path of the Chromium the browser tests will launch: the headless shell first (unless
    ``headless_shell`` is false: a run with a window, a benchmark, a screenshot), then a
    system Chromium, then Playwright's."""
    return (headless_shell and find_headless_shell()) or system_chromium() or playwright_chromium()


def _run(cmd: list[str], tried: list[str], env: dict[str, str] | None = None) -> None:
    print("find_browser: running " + " ".join(cmd), file=sys.stderr)
    try:
        code = subprocess.run(cmd, stdin=subprocess.DEVNULL, env=env).returncode
    except OSError as exc:
        code = f"could not start ({exc})"
    tried.append(f"`{' '.join(cmd)}` -> exit {code}")


def can_apt_get() -> bool:
    """Whether Debian packages can be installed here: root, with apt-get on PATH."""
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") is not None


def _apt_get(*args: str, tried: list[str]) -> None:
    _run(["apt-get", *args], tried, {**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def install_chromium() -> tuple[str | None, list[str]]:
    """Try to install a Chromium; return its path (or None) and what was tried."""
    tried: list[str] = []
    if can_apt_get():
        _apt_get("update", tried=tried)
        for packages in (("chromium", HEADLESS_SHELL), ("chromium",)):
            _apt_get("install", "-y", "--no-install-recommends", *packages, tried=tried)
            if path := find_chromium():
                return path, tried
    else:
        tried.append("apt-get: skipped (needs root and apt-get)")
    _run([sys.executable, "-m", "playwright", "install", "chromium"], tried)
    return find_chromium(), tried


def main(argv: list[str]) -> int:
    if "--install" in argv and find_headless_shell() is None and system_chromium() and can_apt_get():
        # A whole Chromium is enough, the headless shell only faster: its install may fail.
        print(f"find_browser: adding {HEADLESS_SHELL}, the lighter browser for headless tests", file=sys.stderr)
        _apt_get("install", "-y", "--no-install-recommends", HEADLESS_SHELL, tried=[])
    path = find_chromium()
    if path is None and "--install" in argv:
        print("find_browser: no Chromium found; trying to install one", file=sys.stderr)
        path, tried = install_chromium()
        if path is None:
            print(
                "find_browser: no Chromium for the browser tests, and installing one failed.\n"
                f"  Looked for: {HEADLESS_SHELL}, /usr/bin/chromium, " + ", ".join(SYSTEM_CANDIDATES) + " on PATH, "
                "and Playwright's downloaded chromium.\n  Tried:\n    " + "\n    ".join(tried)
                + "\n  " + HOW_TO_FIX,
                file=sys.stderr,
            )
            return 1
    if path is None:
        print("find_browser: no Chromium found. " + HOW_TO_FIX, file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
