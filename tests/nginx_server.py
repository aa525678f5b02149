"""Find Debian's nginx for the tests that run the shipped site (deploy/nginx-workbench.conf),
installing it when missing (``make test`` runs this with ``--install``, as it does for
PostgreSQL and Chromium), and write the configuration that runs that site on loopback ports
(used by tests/test_deploy.py and bench/class_nginx.py).

Run as a script: prints nginx's path (exit 0) or ``none`` (exit 1); ``--install`` installs the
``nginx-light`` package with apt-get (as root) when no nginx is found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from apt_package import apt_install

HOW_TO_FIX = "Install nginx and run `make test` again: `sudo apt-get install nginx-light`."
SITE = Path(__file__).resolve().parent.parent / "deploy" / "nginx-workbench.conf"


def find_nginx() -> Path | None:
    """nginx on PATH or in /usr/sbin (not on a non-root PATH in Debian), or None."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    return Path(found) if found else None


def nginx_or_skip() -> Path:
    """nginx for a test: skipped without one, failed without one under ``CI=true``."""
    import pytest

    found = find_nginx()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"nginx is needed under CI=true. {HOW_TO_FIX}", pytrace=False)
        pytest.skip(f"no nginx to test against. {HOW_TO_FIX}")
    return found


def render_site(upstream_ports: tuple[int, int], port: int, site: Path = SITE) -> str:
    """The shipped ``site`` with its two upstream servers on 127.0.0.1 at ``upstream_ports`` and
    listening on 127.0.0.1:``port`` instead of the example's 5006, 5007 and port 80."""
    first, second = upstream_ports
    return site.read_text().replace("127.0.0.1:5006", f"127.0.0.1:{first}") \
        .replace("127.0.0.1:5007", f"127.0.0.1:{second}").replace("listen 80;", f"listen 127.0.0.1:{port};")


def nginx_config(directory: Path, site: Path) -> Path:
    """A whole nginx configuration in ``directory`` with ``site`` inside its http block; every
    file nginx writes (pid, temporary files) stays in ``directory``."""
    temp = " ".join(f"{kind}_temp_path {directory}/{kind};"
                    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    config = directory / "nginx.conf"
    config.write_text(f"pid {directory}/nginx.pid;\nerror_log stderr;\nevents {{}}\n"
                      f"http {{\n  access_log off;\n  {temp}\n  include {site};\n}}\n")
    return config


def start_site(nginx: Path, site: Path, directory: Path, upstream_ports: list[int], port: int) -> subprocess.Popen:
    """Run the nginx ``site`` (the shipped deploy/nginx-workbench.conf) in the foreground from
    ``directory``, its upstream servers on loopback ``upstream_ports`` (in place of 5006, 5007),
    listening on 127.0.0.1:``port``. For the tests only, each answer says which server gave it
    (``X-Upstream: $upstream_addr``; after a failover, every server tried). The caller waits
    until it listens and terminates it."""
    text = render_site(tuple(upstream_ports), port, site)
    text = text.replace("proxy_buffering off;", "proxy_buffering off; add_header X-Upstream $upstream_addr always;")
    (directory / "site.conf").write_text(text)
    config = nginx_config(directory, directory / "site.conf")
    config.write_text("daemon off;\n" + config.read_text())
    return subprocess.Popen([str(nginx), "-e", "stderr", "-p", str(directory), "-c", str(config)],
                            stdout=subprocess.DEVNULL, stderr=open(directory / "nginx.log", "w"))  # noqa: SIM115


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
