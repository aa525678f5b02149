"""What every benchmark shares: summaries of timings, the machine, a real server, a Chromium.

Everything talks to loopback only: servers bind 127.0.0.1 and browser pages abort any request
that would leave the local server.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
CLI = Path(sys.executable).parent / "attention-workbench"

# The same flags as tests/conftest.py: no network chatter, no GPU, runs as root.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def summary(samples: list[float], scale: float = 1.0) -> dict:
    """``n``, median and p95 (nearest rank, no interpolation) of ``samples`` times ``scale``."""
    a = np.sort(np.asarray(samples, dtype=float)) * scale
    if a.size == 0:
        return {"n": 0, "median": None, "p95": None}
    rank = max(int(np.ceil(0.95 * a.size)) - 1, 0)
    return {"n": int(a.size), "median": float(np.median(a)), "p95": float(a[rank])}


def patch_bytes(protocol, changes: list) -> int:
    """Bytes of one ``PATCH-DOC`` message carrying the document change events ``changes`` (its
    JSON and its binary buffers), as Panel would send them: ``protocol`` is a
    ``bokeh.protocol.Protocol``."""
    message = protocol.create("PATCH-DOC", changes)
    return len(message.content_json) + sum(len(b) for b in message.buffers)


def patch_bytes_by_model(protocol, changes: list) -> dict[str, int]:
    """:func:`patch_bytes` of each change event alone, summed per model name (or type)."""
    out: dict[str, int] = {}
    for event in changes:
        model = getattr(event, "model", None)
        name = (getattr(model, "name", None) or type(model).__name__) if model else type(event).__name__
        out[name] = out.get(name, 0) + patch_bytes(protocol, [event])
    return out


def machine() -> dict:
    """Date, cores, CPU model and the versions that matter, for results.json."""
    import bokeh
    import panel

    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(), "cpu_model": model, "mem_gib": mem,
        "python": platform.python_version(), "panel": panel.__version__, "bokeh": bokeh.__version__,
        "numpy": np.__version__, "platform": platform.platform(),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    """A server subprocess on a loopback port."""

    process: subprocess.Popen
    port: int
    log: Path
    started: float  # time.monotonic() just before spawning

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def spawn(cmd: list[str], log: Path, port: int) -> Server:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = open(log, "w")  # noqa: SIM115 - lives as long as the process
    started = time.monotonic()
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    return Server(process, port, log, started)


def wait_listening(server: Server, timeout: float = 60.0) -> float:
    """Seconds from spawn until the port accepts a connection."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"server exited with {server.process.returncode}:\n"
                                   f"{server.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                    return time.monotonic() - server.started
            except OSError:
                time.sleep(0.01)
    except BaseException:  # interrupted while it starts: the caller never gets it to stop
        server.stop()
        raise
    server.stop()
    raise RuntimeError(f"server did not listen within {timeout} s:\n{server.log.read_text()}")


def start_workbench(runs_dir: Path, log: Path, store: str | None = None, ablation: bool = True) -> Server:
    """``attention-workbench serve`` exactly as a learner starts it, on 127.0.0.1, over the SQLite
    store ``runs_dir/runs.db`` (the directory is made), or over the store at the URL ``store``;
    without the ablation panel (``bench/serve_without_ablation.py``) if not ``ablation``."""
    port = free_port()
    runs_dir.mkdir(parents=True, exist_ok=True)
    store = store or f"sqlite:///{runs_dir.absolute() / 'runs.db'}"
    cmd = [str(CLI), "serve", "--address", "127.0.0.1"] if ablation else \
        [sys.executable, str(BENCH / "serve_without_ablation.py")]
    server = spawn([*cmd, "--store", store, "--port", str(port)], log, port)
    wait_listening(server)
    return server


def start_baseline(log: Path, tokens: int = 3, width: int = 1, batch: int | None = None,
                   d_model: int = 4) -> Server:
    """The bare Panel app of bench/baseline_app.py, served with the same options, with the text
    fields of the page at ``tokens`` tokens of width ``width`` (d_k = d_v, values on); with
    ``batch``, the matrix-mode page's fields (``batch`` items of X, the W's and W_O at ``d_model``)."""
    port = free_port()
    layer = [] if batch is None else ["--batch", str(batch), "--d-model", str(d_model)]
    server = spawn([sys.executable, str(BENCH / "baseline_app.py"), "--port", str(port),
                    "--tokens", str(tokens), "--width", str(width), *layer], log, port)
    wait_listening(server)
    return server


def send_frames_at_once(connection) -> None:
    """Turn Nagle's algorithm off on a Tornado websocket client ``connection``, as browsers do
    (Chromium sets TCP_NODELAY on every socket it opens).

    Tornado's client turns it back on once its upgrade request is answered. A Bokeh message is
    three frames, so a learner's second frame waited for the server's delayed ACK: about 40 ms
    more per message than a browser waits (bench/README.md, issue 25, ninth pass)."""
    connection.protocol.set_nodelay(True)


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def loopback_only(context, origin: str) -> list[str]:
    """Abort every request of ``context`` not to ``origin``; return the list of those aborted."""
    outside: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith((origin, "data:", "blob:", "about:")):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    context.route("**/*", route)
    return outside
