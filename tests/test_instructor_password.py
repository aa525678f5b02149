"""The instructor password from a file, the warning for a password that names a file, logging out."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect
from workbench_server import ROOT, PageWatch, start_server

from app import auth
from app.cli import main


def secret_file(tmp_path, text: str | bytes, mode: int = 0o600):
    path = tmp_path / "instructor-password"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    path.chmod(mode)
    return path


@pytest.mark.parametrize("text, password", [
    ("s3cret pass\n", "s3cret pass"), ("s3cret\r\n", "s3cret"), ("  spaced  ", "  spaced  "),
    ("pässwört", "pässwört"),
])
def test_a_password_file_gives_its_text_without_the_line_end(tmp_path, text, password):
    assert auth.read_password_file(secret_file(tmp_path, text)) == password


@pytest.mark.parametrize("text, mode, why", [
    ("", 0o600, "is empty"), ("\n", 0o600, "is empty"), ("  \n", 0o600, "is empty"),
    ("one\ntwo\n", 0o600, "holds more than one line"), (b"\xff\xfe", 0o600, "is not UTF-8"),
    ("pw\n", 0o644, r"can be read or changed by other users \(mode -rw-r--r--\); .*chmod 600"),
    ("pw\n", 0o640, "can be read or changed by other users"),
    ("pw\n", 0o604, "can be read or changed by other users"),
    ("pw\n", 0o620, "can be read or changed by other users"),
])
def test_a_bad_password_file_is_refused_with_its_name_and_reason(tmp_path, text, mode, why):
    path = secret_file(tmp_path, text, mode)
    with pytest.raises(ValueError, match=f"instructor password file {re.escape(str(path))} {why}"):
        auth.read_password_file(path)


def test_a_missing_or_non_regular_password_file_is_refused(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        auth.read_password_file(tmp_path / "nope")
    with pytest.raises(ValueError, match="is not a regular file"):
        auth.read_password_file(tmp_path)


def test_cli_reads_the_password_from_a_file_given_by_option_or_environment(fake_server, monkeypatch, tmp_path):
    path = secret_file(tmp_path, "from a file\n")
    runs = str(tmp_path / "runs")
    assert main(["serve", "--address", "0.0.0.0", "--instructor-password-file", str(path), "--runs-dir", runs]) == 0
    monkeypatch.setenv(auth.PASSWORD_FILE_ENV, str(path))
    assert main(["serve", "--address", "0.0.0.0", "--runs-dir", runs]) == 0
    # An option beats the environment; the password variable beats the file variable.
    assert main(["serve", "--instructor-password", "typed", "--runs-dir", runs]) == 0
    monkeypatch.setenv(auth.PASSWORD_ENV, "env pw")
    assert main(["serve", "--runs-dir", runs]) == 0
    assert [c["instructor_password"] for c in fake_server] == ["from a file", "from a file", "typed", "env pw"]


@pytest.mark.parametrize("env", [False, True])
def test_cli_refuses_to_start_with_a_bad_password_file(fake_server, monkeypatch, tmp_path, capsys, env):
    path = secret_file(tmp_path, "pw\n", 0o644)
    args = ["serve", "--runs-dir", str(tmp_path / "runs")]
    if env:
        monkeypatch.setenv(auth.PASSWORD_FILE_ENV, str(path))
    else:
        args += ["--instructor-password-file", str(path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    source = auth.PASSWORD_FILE_ENV if env else "--instructor-password-file"
    assert f"error: instructor password file {path} can be read or changed by other users" in err
    assert f"chmod 600 {path}" in err and f"(from {source})" in err
    assert fake_server == []
    path.chmod(0o600)
    path.write_text("")
    assert main(args) == 2
    assert f"instructor password file {path} is empty" in capsys.readouterr().err
    path.unlink()
    assert main(args) == 2
    assert f"instructor password file {path} does not exist" in capsys.readouterr().err
    assert fake_server == []


def test_cli_refuses_both_password_options(fake_server, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--instructor-password", "pw", "--instructor-password-file", str(tmp_path / "f")])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_cli_warns_when_the_password_names_a_file_without_echoing_it(fake_server, monkeypatch, tmp_path, capsys):
    path = secret_file(tmp_path, "the real one\n")
    assert main(["serve", "--instructor-password", str(path), "--runs-dir", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert "warning: the password given by --instructor-password is the name of an existing file" in err
    assert "--instructor-password-file FILE" in err and str(path) not in err
    monkeypatch.setenv(auth.PASSWORD_ENV, str(path))
    assert main(["serve", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert f"given by {auth.PASSWORD_ENV} is the name of an existing file" in capsys.readouterr().err
    assert [c["instructor_password"] for c in fake_server] == [str(path), str(path)]  # used as given
    monkeypatch.delenv(auth.PASSWORD_ENV)
    assert main(["serve", "--instructor-password", "no such file", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_real_command_exits_non_zero_with_a_world_readable_password_file(tmp_path):
    path = secret_file(tmp_path, "pw\n", 0o644)
    env = {k: v for k, v in os.environ.items() if k not in (auth.PASSWORD_ENV, auth.PASSWORD_FILE_ENV)}
    done = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}",
                           "--port", "0", "--instructor-password-file", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"attention-workbench serve: error: instructor password file {path} can be read or changed by other "
        f"users (mode -rw-r--r--); make it yours alone: chmod 600 {path} (from --instructor-password-file)")


def test_log_out_is_offered_only_to_a_logged_in_instructor(tmp_path, monkeypatch):
    import panel as pn
    from store_helpers import sqlite_store

    from app.instructor import create_instructor

    store = sqlite_store(tmp_path / "runs")
    assert len(create_instructor(store).header) == 0  # no password: nobody to log out
    monkeypatch.setattr(type(pn.state), "user", property(lambda self: auth.INSTRUCTOR_USER))
    (link,) = create_instructor(store).header
    assert f"href='.{auth.LOGOUT_PATH}'" in link.object and ">Log out</a>" in link.object
    assert auth.LOGOUT_TEMPLATE.is_file()


def test_the_login_and_logout_pages_share_one_head_and_render_as_panel_renders_them():
    provider = auth.serve_options("pw")["auth_provider"]
    # The arguments Panel's BasicLoginHandler and LogoutHandler render them with.
    login = provider.login_handler._login_template.render(
        login_endpoint="/login", errormessage="<b>wrong</b>", PANEL_CDN="https://cdn.example/")
    logout = provider.logout_handler._logout_template.render(LOGIN_ENDPOINT="/login", PANEL_CDN="https://cdn.example/")
    for page, title in ((login, "Instructor login"), (logout, "Logged out")):
        assert page.startswith("<!DOCTYPE html>") and page.count("<head>") == 1
        assert f"<title>{title} · Self-attention workbench</title>" in page
        assert '<meta name="viewport"' in page and "<header>Self-attention workbench</header>" in page
        assert "cdn.example" not in page and "{%" not in page
    assert '<form action="./login" method="post">' in login and "&lt;b&gt;wrong&lt;/b&gt;" in login
    assert 'next_url=" + new URL("instructor", location.href).pathname' in login
    assert "button { margin-top: 20px" in login
    assert '<a class="button" href="./login">Log in again</a>' in logout and "a.button {" in logout
    # One <head>, in the frame both extend.
    for template in (auth.LOGIN_TEMPLATE, auth.LOGOUT_TEMPLATE):
        text = template.read_text(encoding="utf-8")
        assert text.startswith('{% extends "auth_page.html" %}') and "<head>" not in text


def test_log_in_from_a_password_file_then_log_out(tmp_path, browser):
    path = secret_file(tmp_path, "from the file\n")
    server = start_server(tmp_path / "runs", tmp_path / "server.log", "--instructor-password-file", str(path),
                          env={auth.PASSWORD_ENV: None, auth.PASSWORD_FILE_ENV: None})
    try:
        context = browser.new_context()
        page = context.new_page()
        watch = PageWatch(origin=server.url.rstrip("/"))
        watch.attach(page)
        page.goto(server.url + "instructor")
        page.get_by_label("Password").fill("from the file")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_test_id("runs-total")).to_have_text("0", timeout=30_000)
        page.get_by_role("link", name="Log out").click()
        expect(page.get_by_role("heading", name="Logged out")).to_be_visible()
        expect(page.get_by_role("status")).to_contain_text("You are logged out of the instructor page")
        # The login cookie is gone: the page and its WebSocket need the password again.
        assert [c["name"] for c in context.cookies() if c["name"] == "user"] == []
        conn = http.client.HTTPConnection(server.url.split("//")[1].rstrip("/"), timeout=10)
        cookies = "; ".join(f"{c['name']}={c['value']}" for c in context.cookies())
        conn.request("GET", "/instructor", headers={"Cookie": cookies})
        response = conn.getresponse()
        assert response.status == 302 and "/login" in response.getheader("Location")
        conn.close()
        page.get_by_role("link", name="Log in again").click()
        page.get_by_label("Password").fill("from the file")
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(re.compile(r"/instructor$"))
        expect(page.get_by_role("link", name="Log out")).to_be_visible(timeout=30_000)
        watch.assert_clean()
        context.close()
    finally:
        server.stop()
