"""Find Debian's nginx for the tests that run the shipped site (deploy/nginx-workbench.conf),
installing it when missing (``make test`` runs this with ``--install``, as it does for
PostgreSQL and Chromium).

Run as a script: prints nginx's path (exit 0) or ``none`` (exit 1); ``--install`` installs the
``nginx-light`` package with apt-get (as root) when no nginx is found.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from apt_package import apt_install

HOW_TO_FIX = "Install nginx and run `make test` again: `sudo apt-get install nginx-light`."


def find_nginx() -> Path | None:
    """nginx on PATH or in /usr/sbin (not on a non-root PATH in Debian), or None."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    return Path(found) if found else None


def install() -> int:
    """Install Debian's ``nginx-light`` when no nginx is found; 0 when there is one."""
    if find_nginx() is not None:
        return 0
    if not apt_install("nginx-light", "nginx_server", HOW_TO_FIX):
        return 1
    return 0 if find_nginx() is not None else 1


if __name__ == "__main__":
    if "--install" in sys.argv[1:]:
        sys.exit(install())
    found = find_nginx()
    print(found or "none")
    sys.exit(0 if found else 1)
