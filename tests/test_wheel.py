"""The package as a newcomer installs it: the sdist and the wheel built from this checkout, the
wheel installed (not editable) into a fresh virtual environment outside it, and every command
run there from another working directory.

The fresh environment takes the dependencies (Panel, numpy, ...) from this checkout's own
environment through a ``.pth`` line, so the test needs no network and no minutes of installing;
``.pth`` files inside that directory (the checkout's editable install among them) are not
processed, so ``app`` and ``attention_core`` come from the wheel alone, which the first test
checks.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from workbench_server import PageWatch, free_port, stop_process, wait_listening

from attention_core import ExperimentRecord, scaled_dot_product_attention

ROOT = Path(__file__).resolve().parent.parent
V1_RECORD = ROOT / "tests" / "records_v1" / "v1-worked-row-scalar.json"
PASSWORD = "wheel pass"
WEIGHTS_JS = "() => Array.from(Bokeh.documents[0].get_model_by_name('weights-source').data.value)"


class Installed:
    """The fresh environment with the wheel in it, and a working directory outside the checkout."""

    def __init__(self, venv: Path, work: Path, dist: Path) -> None:
        self.venv, self.work, self.dist = venv, work, dist
        self.bin = venv / "bin"
        self.store = f"sqlite:///{work / 'runs.db'}"

    def env(self) -> dict[str, str]:
        # Nothing of the checkout's on the path: only the fresh environment's scripts and python.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return {**env, "PATH": f"{self.bin}{os.pathsep}{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(self.bin / "attention-workbench"), *args], cwd=self.work, env=self.env(),
                              capture_output=True, text=True, timeout=120)
        if check:
            assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    dist, venv, work = base / "dist", base / "venv", base / "work"
    work.mkdir()
    # sdist first, then the wheel built from that sdist (build's default): both must hold the
    # package data. No isolation: the checkout's setuptools builds, so no download is needed.
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                   check=True, capture_output=True, text=True, timeout=300)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [wheel] = dist.glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                    "--no-deps", "--no-index", "--disable-pip-version-check", "-q", str(wheel)],
                   check=True, cwd=work, timeout=300)
    fresh_site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True, cwd=work).stdout.strip()
    # The dependencies: this environment's site-packages, after the fresh one's own.
    Path(fresh_site, "checkout-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return Installed(venv, work, dist)


def test_the_sdist_and_the_wheel_hold_every_file_the_program_reads(installed):
    [wheel] = installed.dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("attention_core/experiment-record.schema.json", "app/instructor/login.html",
                 "app/instructor/logout.html", "app/instructor/auth_page.html"):
        assert name in names
    assert not any(name.startswith(("assets/", "tests/", "bench/")) for name in names)
    [sdist] = installed.dist.glob("*.tar.gz")
    import tarfile

    with tarfile.open(sdist) as tar:
        members = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert "attention_core/experiment-record.schema.json" in members
    assert "app/instructor/login.html" in members


def test_the_installed_packages_come_from_the_wheel_and_know_their_version(installed):
    done = subprocess.run(
        [str(installed.bin / "python"), "-c",
         "import importlib.metadata as m, app, attention_core; "
         "print(app.__file__); print(attention_core.__file__); print(attention_core.__version__); "
         "print(m.version('attention-workbench'))"],
        cwd=installed.work, env=installed.env(), capture_output=True, text=True, check=True)
    app_file, core_file, version, metadata_version = done.stdout.split("\n")[:4]
    for path in (app_file, core_file):
        assert Path(path).is_relative_to(installed.venv), path
    assert version == metadata_version and re.fullmatch(r"\d+\.\d+\.\d+\S*", version)


def test_help_names_every_command(installed):
    out = installed.run("--help").stdout
    assert out.startswith("usage: attention-workbench")
    for command in ("serve", "export", "import", "test-case"):
        assert command in out
    version = installed.run("--version").stdout.split()
    assert version[0] == "attention-workbench" and re.fullmatch(r"\d+\.\d+\.\d+\S*", version[1])


def test_import_export_and_test_case_from_the_wheel(installed, tmp_path):
    # A record made by the core now (schema version 3): the worked row, saved in the broken mode.
    result = scaled_dot_product_attention([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], [10.0, 20.0, 100.0],
                                          failure_mode="mask_after_softmax")
    v2 = ExperimentRecord.from_result(result, learner="Grace", label="broken worked row", record_id="wheel-v2")
    assert v2.to_dict()["schema_version"] == 3
    (tmp_path / "wheel-v2.json").write_text(v2.to_json(indent=1), encoding="utf-8")
    store = ["--store", installed.store]
    imported = installed.run("import", str(V1_RECORD), str(tmp_path / "wheel-v2.json"), *store)
    assert "imported 2 runs, skipped 0" in imported.stdout and "0 not valid" in imported.stdout, imported.stdout

    exported = json.loads(installed.run("export", "--format", "json", *store).stdout)
    runs = {run["id"]: run for run in exported["runs"]}
    assert set(runs) == {"v1-worked-row-scalar", "wheel-v2"}
    assert runs["v1-worked-row-scalar"]["schema_version"] == 1 and runs["wheel-v2"]["schema_version"] == 3
    assert runs["wheel-v2"]["settings"]["failure_mode"] == "mask_after_softmax"
    np.testing.assert_allclose(runs["v1-worked-row-scalar"]["results"]["weights"][1], [0.269, 0.731, 0], atol=1e-3)

    rows = list(csv.DictReader(io.StringIO(installed.run("export", "--format", "csv", *store).stdout)))
    assert {row["id"] for row in rows} == {"v1-worked-row-scalar", "wheel-v2"}
    assert {row["learner"] for row in rows} == {"Ada", "Grace"}

    test = installed.run("test-case", "wheel-v2", "--lang", "py", *store).stdout
    assert "def test_" in test and "0.2689" in test and "0.7310" in test, test


def test_serve_with_a_password_file_answers_every_page_and_computes_the_worked_row(installed, page: Page):
    password_file = installed.work / "instructor-password"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    log = installed.work / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [str(installed.bin / "attention-workbench"), "serve", "--store", installed.store, "--address",
             "127.0.0.1", "--port", str(port), "--instructor-password-file", str(password_file)],
            cwd=installed.work, env=installed.env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(server, port, log)
        watch = PageWatch(origin=url.rstrip("/"))
        watch.attach(page)
        for path, title in (("", "Self-attention workbench"), ("embed", None)):
            response = page.goto(url + path)
            assert response.status == 200, path
            if title:
                expect(page).to_have_title(title)
            page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                                   "Bokeh.documents[0].get_model_by_name('weights-source')")

        page.goto(url)
        expect(page.get_by_label("Query 1", exact=True)).to_be_visible(timeout=30_000)
        page.get_by_role("button", name="Worked row (seed 003)").click()
        page.wait_for_function(f"() => ({WEIGHTS_JS})().length === 9")
        page.wait_for_function(f"() => Math.abs(({WEIGHTS_JS})()[4] - 0.731) < 1e-3")
        weights = page.evaluate(WEIGHTS_JS)
        np.testing.assert_allclose(weights[3:5], [0.269, 0.731], atol=1e-3)  # row 2, keys 1 and 2

        page.goto(url + "instructor")
        expect(page).to_have_url(re.compile(r"/login"))
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(re.compile(r"/instructor$"))
        response = page.goto(url + "instructor")  # with the login's cookie now
        assert response.status == 200 and response.url == url + "instructor"
        expect(page.get_by_test_id("runs-total")).to_be_visible(timeout=30_000)
        watch.assert_clean()
    finally:
        stop_process(server)
