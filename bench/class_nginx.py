"""A class through nginx on two server processes against one process direct (issue 25).

For each store (PostgreSQL, and SQLite: one file shared by the processes of one host) the same
class runs twice in the same run: on one ``attention-workbench serve`` process reached directly,
then on two processes behind nginx running the shipped site (deploy/nginx-workbench.conf, its
ports made loopback ones by ``tests/nginx_server.render_site``). Servers are started as an
operator would start them behind a proxy: a shared ``--cookie-secret-file``, an instructor
password file, ``--use-xheaders``, ``--allow-websocket-origin`` naming nginx's host:port.

Each learner opens the page as a browser does: ``GET /`` (through nginx's port, or the process's)
gives the session's token and the cookies (nginx's affinity cookie among them); then a websocket
(the same port) carries those cookies and the Origin and attaches to that session, speaking
Bokeh's protocol as BokehJS does (bench/wire_learner.py: ``bokeh.client``, a whole Document per
learner, saturated the bench's own core from 150 sessions). It then edits ``Query 3`` at
classroom.py's pace (a pause of 2–6 s), timed until the new ``weights-source`` data arrives, and
every fifth edit sets Learner, Label and Prediction and presses ``Save run``, timed until the
page's save message names the new run. Levels are
cumulative (100, then 50 more, …). At the end the store's rows are counted against the saves the
pages confirmed, by (Learner, Label), and nginx's access log says which upstream served each
page and each websocket: the cookie hash must keep the two on one process.

Server CPU is the servers' user + system time over the phase's wall time (2 processes: up to
200 %); RSS per session is the servers' RSS over their baseline (each process after one warm-up
page opened and closed, not waited for Bokeh's cleanup) divided by the open sessions.
"""

from __future__ import annotations

import http.client
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from http.cookies import SimpleCookie
from pathlib import Path

import classroom
from common import CLI, Server, cpu_seconds, free_port, rss_mib, spawn, stop_process, summary, wait_listening

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from nginx_server import find_nginx, nginx_config, render_site  # noqa: E402
from wire_learner import HOST, OPENERS, WireLearner  # noqa: E402

LEVELS = (100, 150, 200, 300)
HTTP_TIMEOUT_S = 60.0
EDIT_BUDGET_MS = 250
LEARNER_PREFIX = "bench learner"

def open_page(port: int) -> tuple[str, dict[str, str]]:
    """``GET /`` on 127.0.0.1:``port`` as a browser does: the page's session token and the
    cookies the response sets.

    Raises
    ------
    RuntimeError
        The page did not answer 200 or holds no session token.
    """
    conn = http.client.HTTPConnection(HOST, port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("GET", "/", headers={"Host": f"{HOST}:{port}"})
        response = conn.getresponse()
        body = response.read().decode("utf-8", "replace")
        cookies = SimpleCookie()
        for header in response.headers.get_all("Set-Cookie") or []:
            cookies.load(header)
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET / answered {response.status}")
    token = re.search(r'"token":\s*"([^"]+)"', body)
    if token is None:
        raise RuntimeError("the page holds no session token")
    return token.group(1), {name: morsel.value for name, morsel in cookies.items()}


class Tally:
    """Edit and save times from every learner thread, taken per phase."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.edits: list[float] = []
        self.saves: list[float] = []

    def add(self, kind: str, seconds: float) -> None:
        with self._lock:
            getattr(self, kind).append(seconds)

    def take(self) -> tuple[list[float], list[float]]:
        with self._lock:
            out = self.edits, self.saves
            self.edits, self.saves = [], []
        return out


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its children (nginx's workers, PostgreSQL's backends)."""
    total = 0.0
    try:
        total += cpu_seconds(pid)
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += _tree_cpu(int(child))
    except (OSError, ValueError):  # a backend that ended meanwhile
        pass
    return total


def _serve(store_url: str, log: Path, secrets: Path, front: int | None) -> Server:
    """``attention-workbench serve`` as behind a proxy; its websocket origin nginx's host:port
    (``front``), or its own when reached directly."""
    port = free_port()
    return spawn([str(CLI), "serve", "--address", HOST, "--port", str(port), "--store", store_url,
                  "--cookie-secret-file", str(secrets / "cookie-secret"),
                  "--instructor-password-file", str(secrets / "instructor-password"),
                  "--use-xheaders", "--allow-websocket-origin", f"{HOST}:{front or port}"], log, port)


def _write_secret(path: Path, text: str) -> None:
    path.touch(mode=0o600)
    path.write_text(text + "\n")


def _start_nginx(directory: Path, ports: tuple[int, int], port: int) -> subprocess.Popen:
    """nginx running the shipped site on ``port`` before the servers on ``ports``, logging each
    request's affinity key and upstream to ``directory/access.log``."""
    nginx = find_nginx()
    if nginx is None:
        raise RuntimeError("no nginx: `make test` installs it (or `sudo apt-get install nginx-light`)")
    directory.mkdir(parents=True, exist_ok=True)
    site = render_site(ports, port).replace(
        "proxy_buffering off;", f"proxy_buffering off;\n        access_log {directory}/access.log upstreams;")
    (directory / "site.conf").write_text(
        "log_format upstreams '$workbench_affinity $upstream_addr $status $request_method $uri';\n" + site)
    config = nginx_config(directory, directory / "site.conf")
    # A class holds two connections per page (browser → nginx → server); nginx's default 512
    # per worker would refuse a class of 300.
    config.write_text("daemon off;\n" + config.read_text().replace("events {}", "events { worker_connections 4096; }"))
    process = subprocess.Popen([str(nginx), "-e", "stderr", "-p", str(directory), "-c", str(config)],
                               stdout=subprocess.DEVNULL, stderr=open(directory / "error.log", "w"))  # noqa: SIM115
    wait_listening(Server(process, port, directory / "error.log", time.monotonic()))
    return process


def affinity(access_log: Path) -> dict:
    """From nginx's access log: which upstream served each page and each websocket, and how many
    sessions had the two on different processes, or a websocket without its page's cookie."""
    upstreams: dict[str, set[str]] = defaultdict(set)
    pages, sockets, statuses = Counter(), Counter(), Counter()
    page_keys, socket_keys = set(), set()
    for line in access_log.read_text().splitlines():
        key, upstream, status, _method, uri = line.split(" ", 4)
        statuses[status] += 1
        if uri in ("/", "/ws"):
            upstreams[key].add(upstream)
            (pages if uri == "/" else sockets)[upstream] += 1
            (page_keys if uri == "/" else socket_keys).add(key)
    return {"pages_per_upstream": dict(pages), "websockets_per_upstream": dict(sockets),
            "sessions_split_over_upstreams": sum(1 for seen in upstreams.values() if len(seen) > 1),
            "websockets_without_page_cookie": len(socket_keys - page_keys), "statuses": dict(statuses)}


def _log_errors(path: Path, size: int | None = None) -> list[str]:
    """Error lines of the log at ``path`` (its first ``size`` bytes, or all)."""
    lines = path.read_bytes()[:size].decode(errors="replace").splitlines() if path.exists() else []
    return [line for line in lines if re.search(r"Traceback|ERROR|\[(error|crit|alert|emerg)\]", line)]


def class_run(workdir: Path, store_url: str, processes: int, levels: tuple[int, ...], phase_s: float) -> dict:
    """One class: ``processes`` (1: reached directly; 2: behind nginx) over ``store_url``."""
    from app.store import RunStore

    workdir.mkdir(parents=True, exist_ok=True)
    _write_secret(workdir / "cookie-secret", "bench-cookie-secret-" + "x" * 32)
    _write_secret(workdir / "instructor-password", "bench-password")
    front = free_port() if processes == 2 else None
    servers: list[Server] = []
    nginx = None
    tally, learners = Tally(), []
    result: dict = {"processes": processes, "via": "nginx" if front else "direct", "levels": {}}
    try:
        # Started together on one new store, as systemd starts them.
        for i in range(processes):
            servers.append(_serve(store_url, workdir / f"server{i}.log", workdir, front))
        for server in servers:
            wait_listening(server)
        if front:
            nginx = _start_nginx(workdir / "nginx", (servers[0].port, servers[1].port), front)
        port = front or servers[0].port
        for server in servers:  # one page per process opened and closed: imports, templates
            warm = WireLearner(-1, server.port, tally, open_page, LEARNER_PREFIX)
            warm.start()
            warm.ready.wait()
            warm.stop.set()
            warm.join(timeout=30)
        time.sleep(2.0)
        baseline = sum(rss_mib(s.pid) for s in servers)
        result["rss_baseline_mib"] = baseline
        for level in levels:
            t = time.monotonic()
            while len(learners) < level:
                learner = WireLearner(len(learners), port, tally, open_page, LEARNER_PREFIX)
                learner.start()
                learners.append(learner)
            for learner in learners:
                learner.ready.wait()
            ramp_s = time.monotonic() - t
            tally.take()
            cpu0 = [cpu_seconds(s.pid) for s in servers]
            nginx0 = _tree_cpu(nginx.pid) if nginx else 0.0
            client0 = resource.getrusage(resource.RUSAGE_SELF)
            wall0 = time.monotonic()
            for learner in learners:
                learner.active.set()
            time.sleep(phase_s)
            for learner in learners:
                learner.active.clear()
            time.sleep(classroom.THINK_S[1] + 1)  # let edits and saves in flight finish
            wall = time.monotonic() - wall0
            client1 = resource.getrusage(resource.RUSAGE_SELF)
            edits, saves = tally.take()
            shares = [(cpu_seconds(s.pid) - c) / wall for s, c in zip(servers, cpu0, strict=True)]
            rss = sum(rss_mib(s.pid) for s in servers)
            result["levels"][str(level)] = {
                "sessions": level,
                "edit_ms": summary(edits, 1e3), "save_ms": summary(saves, 1e3),
                "edit_samples_ms": [round(x * 1e3, 1) for x in edits],
                "save_samples_ms": [round(x * 1e3, 1) for x in saves],
                "edits_per_s": len(edits) / wall,
                "server_cpu_share": sum(shares), "server_cpu_shares": shares,
                "nginx_cpu_share": ((_tree_cpu(nginx.pid) - nginx0) / wall) if nginx else None,
                "client_cpu_share": (client1.ru_utime + client1.ru_stime - client0.ru_utime
                                     - client0.ru_stime) / wall,
                "open_session_s": summary([x.open_s for x in learners if x.open_s is not None]),
                "ramp_s": ramp_s,
                "rss_mib": rss, "rss_per_session_mib": (rss - baseline) / level,
                "learners_failed": sum(1 for x in learners if x.error),
                "not_saved": sum(len(x.not_saved) for x in learners),
            }
            done = result["levels"][str(level)]
            print(f"bench: class_nginx {result['via']}, {level} sessions: edit / save p50 / p95 "
                  f"{_ms(done['edit_ms'])}, {_ms(done['save_ms'])} ms, {done['learners_failed']} learners "
                  f"failed", file=sys.stderr, flush=True)
        # Closing the class resets websockets mid-frame (nginx logs it): count what came before.
        nginx_log_open = (workdir / "nginx" / "error.log").stat().st_size if nginx else 0
        for learner in learners:
            learner.stop.set()
        for learner in learners:
            learner.join(timeout=30)
    finally:
        for server in servers:
            server.stop()
        if nginx is not None:
            stop_process(nginx)
    confirmed = Counter((x.name_in_runs, name) for x in learners for name in x.saved)
    with RunStore(store_url) as store:
        stored = Counter((r.learner, r.label) for r in store.iter_records()
                         if (r.learner or "").startswith(LEARNER_PREFIX))
    result["runs"] = {
        "confirmed": sum(confirmed.values()), "stored": sum(stored.values()),
        "lost": sum(1 for key in confirmed if key not in stored),
        "doubled": sum(n - 1 for n in stored.values() if n > 1),
        "stored_not_confirmed": sum(1 for key in stored if key not in confirmed),
    }
    result["errors"] = [f"learner {x.index}: {x.error}" for x in learners if x.error] + \
        [f"learner {x.index}: {m}" for x in learners for m in x.not_saved]
    result["log_errors"] = [line for i in range(processes) for line in _log_errors(workdir / f"server{i}.log")]
    if front:
        result["log_errors"] += _log_errors(workdir / "nginx" / "error.log", nginx_log_open)
        result["affinity"] = affinity(workdir / "nginx" / "access.log")
    return result


def _stores(workdir: Path):
    """(name, a function giving a new empty store's URL) for PostgreSQL (when it can start) and
    SQLite, and the PostgreSQL server to stop."""
    from store_scale import _postgres

    pg = _postgres()
    stores = [] if pg is None else [("postgresql", pg.new_database)]
    made = iter(range(1, 1000))
    stores.append(("sqlite", lambda: f"sqlite:///{workdir / f'class-{next(made)}' / 'runs.db'}"))
    return stores, pg


def run(workdir: Path, levels: tuple[int, ...] = LEVELS, phase_s: float = 20.0) -> dict:
    """Every store, one process direct then two behind nginx, at each of ``levels``."""
    classroom._register_panel_models()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket and a loop per session
    stores, pg = _stores(workdir)
    result: dict = {"levels": list(levels), "phase_s": phase_s, "think_s": classroom.THINK_S,
                    "save_every": classroom.SAVE_EVERY, "openers": OPENERS, "by_store": {}}
    try:
        for store, new_url in stores:
            result["by_store"][store] = {}
            for processes in (1, 2):
                url = new_url()
                if url.startswith("sqlite"):
                    Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
                key = "direct_1" if processes == 1 else "nginx_2"
                print(f"bench: class_nginx {store} {key} …", file=sys.stderr, flush=True)
                result["by_store"][store][key] = class_run(
                    workdir / f"class-{store}-{key}", url, processes, levels, phase_s)
    finally:
        if pg is not None:
            pg.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    result["checks"] = checks(result)
    return result


def checks(result: dict) -> dict:
    """The budgets, per store: edit and save p95 at the top level on 2 processes ≤ 250 ms; p95 at
    the top on 2 ≤ p95 at half the top on 1 (300 on 2 against 150 on 1); nothing lost, doubled
    or failed."""
    top = max(result["levels"])
    half = str(top // 2) if top // 2 in result["levels"] else None
    out = {}
    for store, runs in result["by_store"].items():
        two, one = runs["nginx_2"], runs["direct_1"]
        at_top = two["levels"][str(top)]
        row = {}
        for kind in ("edit_ms", "save_ms"):
            p95 = at_top[kind]["p95"]
            row[f"{kind}_p95_at_top_on_2"] = {"value": p95, "target": EDIT_BUDGET_MS,
                                              "pass": None if p95 is None else p95 <= EDIT_BUDGET_MS}
            base = one["levels"][half][kind]["p95"] if half else None
            ratio = None if p95 is None or not base else p95 / base
            row[f"{kind}_p95_ratio_top_on_2_to_half_on_1"] = {"value": ratio, "target": 1.0,
                                                              "pass": None if ratio is None else ratio <= 1.0}
        clean = all(not r["errors"] and not r["runs"]["lost"] and not r["runs"]["doubled"]
                    and r["runs"]["stored"] == r["runs"]["confirmed"] for r in (one, two))
        row["no_error_lost_or_doubled"] = {"pass": clean}
        out[store] = row
    return out


def _mark(ok) -> str:
    return "n/a" if ok is None else ("pass" if ok else "MISS")


def _ms(s: dict) -> str:
    return "—" if s["median"] is None else f"{s['median']:.0f} / {s['p95']:.0f}"


def table_rows(result: dict) -> list[tuple[str, str, str, str, str]]:
    """bench/run.py's (figure, measured, baseline, target, result) rows."""
    rows = []
    top = max(result["levels"])
    half = top // 2 if top // 2 in result["levels"] else None
    for store, runs in result["by_store"].items():
        c = result["checks"][store]
        for key, what in (("direct_1", "1 process direct"), ("nginx_2", "2 processes via nginx")):
            r = runs[key]
            for level, row in r["levels"].items():
                at_top = key == "nginx_2" and int(level) == top
                ok = None
                if at_top:
                    ok = c["edit_ms_p95_at_top_on_2"]["pass"] and c["save_ms_p95_at_top_on_2"]["pass"]
                rows.append((f"class on {store}, {what}, {level} sessions: edit / save p50 / p95 (ms)",
                             f"{_ms(row['edit_ms'])}, {_ms(row['save_ms'])}",
                             f"server CPU {row['server_cpu_share']:.0%}, RSS {row['rss_per_session_mib']:.2f} "
                             f"MiB/session, client CPU {row['client_cpu_share']:.0%}",
                             f"p95 ≤ {EDIT_BUDGET_MS} / {EDIT_BUDGET_MS}" if at_top else "",
                             _mark(ok) if at_top else ""))
            runs_ = r["runs"]
            seen = r.get("affinity")
            rows.append((f"class on {store}, {what}: runs stored / saves confirmed; errors",
                         f"{runs_['stored']} / {runs_['confirmed']} (lost {runs_['lost']}, doubled "
                         f"{runs_['doubled']}); {len(r['errors'])} errors, {len(r['log_errors'])} in logs",
                         "" if seen is None else (
                             f"page and websocket on different processes: {seen['sessions_split_over_upstreams']}; "
                             f"websocket without the page's cookie: {seen['websockets_without_page_cookie']}"),
                         "no error, none lost or doubled", ""))
        if half:
            e, s = (c[f"{k}_p95_ratio_top_on_2_to_half_on_1"] for k in ("edit_ms", "save_ms"))
            f = "—" if e["value"] is None or s["value"] is None else f"×{e['value']:.2f} / ×{s['value']:.2f}"
            rows.append((f"class on {store}: edit / save p95 at {top} on 2 against {half} on 1", f,
                         "", "≤ ×1", _mark(e["pass"] and s["pass"] if None not in (e["pass"], s["pass"]) else None)))
        rows.append((f"class on {store}: no error, no lost or doubled run", "", "", "",
                     _mark(c["no_error_lost_or_doubled"]["pass"])))
    return rows
