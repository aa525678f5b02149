"""Install one Debian package with apt-get, for the scripts ``make test`` runs to find what the
tests need (tests/postgres_server.py, tests/nginx_server.py): only as root, never asking."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def apt_install(package: str, who: str, how_to_fix: str) -> bool:
    """``apt-get update`` then ``apt-get install -y --no-install-recommends package``; True if
    both ran. Otherwise says on stderr why (``who:`` first, ``how_to_fix`` after) and is False."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print(f"{who}: cannot install {package} here (needs root and apt-get). {how_to_fix}", file=sys.stderr)
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", package]):
        if subprocess.run(command, env=env).returncode != 0:
            print(f"{who}: `{' '.join(command)}` failed. {how_to_fix}", file=sys.stderr)
            return False
    return True
