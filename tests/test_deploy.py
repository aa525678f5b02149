"""The shipped deployment examples in deploy/: nginx reads the site, and the systemd unit has
what a class server needs (and systemd reads it, where systemd-analyze is installed)."""

from __future__ import annotations

import http.client
import re
import shutil
import subprocess

import pytest
from nginx_server import SITE, nginx_config, nginx_or_skip, start_site
from workbench_server import ROOT, free_port, listening, start_server, stop_process, wait_until

from app import auth
from app.shutdown import SHUTDOWN_GRACE_S

DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "attention-workbench@.service"


def test_nginx_reads_the_shipped_site(tmp_path):
    nginx = nginx_or_skip()
    config = nginx_config(tmp_path, SITE)
    done = subprocess.run([str(nginx), "-t", "-e", "stderr", "-p", str(tmp_path), "-c", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "[warn]" not in done.stderr and "[emerg]" not in done.stderr, done.stderr


def test_the_site_has_what_a_bokeh_server_behind_it_needs():
    text = SITE.read_text()
    directives = {line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")}
    for needed in ("proxy_http_version 1.1;", "proxy_set_header Upgrade $http_upgrade;",
                   "proxy_set_header Connection $connection_upgrade;", "proxy_buffering off;",
                   "proxy_set_header Host $http_host;",
                   "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
                   "proxy_set_header X-Forwarded-Proto $scheme;",
                   "hash $workbench_affinity consistent;"):
        assert needed in directives, needed
    servers = re.findall(r"^\s*server (127\.0\.0\.1:\d+) max_fails=\d+ fail_timeout=\d+s;", text, re.M)
    assert servers == ["127.0.0.1:5006", "127.0.0.1:5007"]
    timeout = re.search(r"^\s*proxy_read_timeout (\d+)s;", text, re.M)
    # Bokeh pings an open page's websocket every 37 s (its keep_alive_milliseconds default).
    assert timeout and int(timeout.group(1)) >= 120
    assert "/healthz" in text and "ip_hash" in text  # the comments say which affinity, and why not ip_hash


def unit_entries(text: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit's sections, each key with every value it is given (systemd keeps repeated
    keys such as Environment=, which configparser would not), continuation lines joined."""
    sections: dict[str, dict[str, list[str]]] = {}
    section = None
    logical = re.sub(r"\\\n\s*", " ", text)
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_unit_runs_one_hardened_process_per_port_on_the_shared_store_and_secret():
    unit = unit_entries(UNIT.read_text())
    service = unit["Service"]
    exec_start = service["ExecStart"][0].split()
    assert exec_start[1] == "serve"
    for option in ("--use-xheaders", "--allow-websocket-origin", "--cookie-secret-file"):
        assert option in exec_start, option
    assert exec_start[exec_start.index("--port") + 1] == "%i"
    assert exec_start[exec_start.index("--address") + 1] == "127.0.0.1"
    environment = dict(value.split("=", 1) for value in service["Environment"])
    assert environment["ATTENTION_WORKBENCH_STORE"].startswith("postgresql")
    assert environment["ATTENTION_WORKBENCH_COOKIE_SECRET_FILE"].startswith("/")
    assert environment["ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD_FILE"].startswith("/")
    expected = {"Restart": "on-failure", "KillSignal": "SIGTERM", "NoNewPrivileges": "yes",
                "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes"}
    assert {key: service[key][-1] for key in expected} == expected
    assert service["User"][-1] not in ("", "root")
    # systemd's SIGKILL must not cut the graceful stop short: it comes after the serve's grace.
    grace = float(exec_start[exec_start.index("--shutdown-grace") + 1]) if "--shutdown-grace" in exec_start \
        else SHUTDOWN_GRACE_S
    assert int(service["TimeoutStopSec"][-1]) > grace
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_systemd_reads_the_unit_without_a_warning(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze here (the unit's keys are checked above)")
    # An instance of the template, its program one that exists here (verify checks it is executable).
    text = re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", UNIT.read_text(), flags=re.M)
    (tmp_path / UNIT.name).write_text(text)
    done = subprocess.run([analyze, "verify", str(tmp_path / "attention-workbench@5006.service")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and str(tmp_path) not in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_site_balances_two_real_servers_keeps_a_browser_on_one_and_fails_over(tmp_path):
    """nginx running the shipped site on a loopback port in front of two real workbench servers:
    the affinity cookie keeps one browser on one server, different browsers spread over both,
    and a browser whose server is gone lands on the other."""
    nginx = nginx_or_skip()
    servers = [start_server(tmp_path / "runs", tmp_path / f"server{i}.log", env={auth.PASSWORD_ENV: "pw"})
               for i in range(2)]  # one SQLite store shared by both, as processes on one host may
    process = None
    try:
        ports = [int(s.url.rstrip("/").rsplit(":", 1)[1]) for s in servers]
        port = free_port()
        process = start_site(nginx, SITE, tmp_path, ports, port)

        def ask(path: str, cookie: str | None = None) -> tuple[int, str, str]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                headers = {"Host": "workbench.example", **({"Cookie": cookie} if cookie else {})}
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                response.read()
                return response.status, response.getheader("X-Upstream") or "", response.getheader("Set-Cookie") or ""
            finally:
                conn.close()

        wait_until(lambda: listening(port), "nginx listening", timeout=30)
        status, upstream, set_cookie = ask("/healthz")
        assert status == 200 and upstream.split(":")[1] in map(str, ports), (status, upstream)
        key = re.match(r"workbench_affinity=([^;]+);", set_cookie)
        assert key, set_cookie
        cookie = f"workbench_affinity={key.group(1)}"
        assert {ask(path, cookie)[1] for path in ("/healthz", "/", "/healthz", "/")} == {upstream}
        assert ask("/", cookie)[0] == 200
        spread = {ask("/healthz", f"workbench_affinity=browser{i}")[1] for i in range(20)}
        assert spread == {f"127.0.0.1:{p}" for p in ports}
        # Its server gone, the browser lands on the other.
        servers[[f"127.0.0.1:{p}" for p in ports].index(upstream)].stop()
        status, moved, _ = ask("/healthz", cookie)
        assert status == 200 and moved != upstream, (status, moved)
    finally:
        if process is not None:
            stop_process(process)
        for server in servers:
            server.stop()

