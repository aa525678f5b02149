"""The ``attention-workbench`` command: ``serve`` the app, ``export`` and ``import`` runs, write the
exercise's ``test-case`` made from one run.

``export``, ``import`` and ``test-case`` need only the store (:mod:`app.store`) and
:mod:`attention_core`; Panel is imported by ``serve`` alone, so they work on a machine (or in a
CI job) without the app's dependencies loaded.

The store is ``--store URL``, else ``$ATTENTION_WORKBENCH_STORE``, else ``sqlite:///runs.db`` in
the working directory. ``--runs-dir DIR`` and ``$ATTENTION_WORKBENCH_RUNS_DIR`` still work for
this release, deprecated: they mean the SQLite store ``DIR/runs.db`` (with a one-line notice).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from app.auth import (
    COOKIE_SECRET_FILE_ENV,
    PASSWORD_ENV,
    PASSWORD_FILE_ENV,
    exposure_problem,
    password_looks_like_a_file,
    read_cookie_secret_file,
    read_password_file,
)
from app.framing import EMBED_ORIGINS_ENV, origins_from_env, parse_origins
from app.oplog import LEVELS, configure
from attention_core import __version__

EXIT_OK, EXIT_WRITE_FAILED, EXIT_USAGE = 0, 1, 2


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535)")
    return port


def _seconds(text: str) -> float:
    """argparse type: a number of seconds above 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds above 0")
    return seconds


RUNS_DIR_ENV = "ATTENTION_WORKBENCH_RUNS_DIR"  # deprecated: the SQLite store DIR/runs.db
STORE_FILE = "runs.db"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for the subcommands."""
    from app.store.dialects import BUSY_TIMEOUT_S  # every command opens a store: not a cost of its own

    parser = argparse.ArgumentParser(
        prog="attention-workbench",
        description="Self-attention workbench: serve it, export and import runs, make the exercise's test "
                    "from a run.")
    # The installed distribution's version, which every saved record also carries (app_version).
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{serve,export,import,test-case}")
    store_help = ("where runs are kept: a SQLAlchemy URL, sqlite:///FILE or "
                  "postgresql+psycopg://USER:PASSWORD@HOST/DB (default: $ATTENTION_WORKBENCH_STORE, "
                  "else sqlite:///runs.db in the working directory)")
    runs_help = "deprecated: the SQLite store DIR/runs.db (use --store)"

    serve = sub.add_parser("serve", help="start the workbench in a browser-facing server")
    serve.add_argument("--store", metavar="URL", help=store_help)
    serve.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    serve.add_argument("--port", type=_port, default=5006, help="TCP port (default 5006)")
    serve.add_argument("--address", default="localhost",
                       help="interface to bind (default localhost; 0.0.0.0 for a class server)")
    serve.add_argument("--num-procs", type=int, default=1, metavar="N",
                       help="worker processes (default 1; 0 means one per CPU)")
    password = serve.add_mutually_exclusive_group()
    password.add_argument("--instructor-password", metavar="PASSWORD",
                          help=f"password for the /instructor page (default: ${PASSWORD_ENV}; "
                               "the environment variable keeps it out of the process list)")
    password.add_argument("--instructor-password-file", metavar="FILE",
                          help=f"read the /instructor password from FILE, readable by you alone "
                               f"(default: ${PASSWORD_FILE_ENV})")
    serve.add_argument("--no-instructor-auth", action="store_true",
                       help="serve /instructor without a password on a non-loopback address")
    serve.add_argument("--cookie-secret-file", metavar="FILE",
                       help="sign instructor logins with the secret in FILE, readable by you alone: "
                            "the same file for every server process behind one proxy keeps a login "
                            f"valid on each and across restarts (default: ${COOKIE_SECRET_FILE_ENV}, "
                            "else a new secret at each start)")
    serve.add_argument("--allow-websocket-origin", action="append", default=[], metavar="HOST[:PORT]",
                       help="a host (as the browser sees it: a proxy's name) whose pages may open "
                            "the server's websocket, besides this machine's own names (repeatable)")
    serve.add_argument("--use-xheaders", action="store_true",
                       help="behind a proxy: take the client's address from X-Forwarded-For / "
                            "X-Real-IP and the scheme from X-Forwarded-Proto")
    serve.add_argument("--prefix", default="", metavar="PATH",
                       help="serve the pages under /PATH/ (/PATH/embed, /PATH/instructor), as a "
                            "proxy forwards them")
    # app.shutdown.SHUTDOWN_GRACE_S, not imported: app.shutdown loads Panel, which export need not.
    serve.add_argument("--shutdown-grace", type=_seconds, default=10.0, metavar="SECONDS",
                       help="on SIGTERM or Ctrl-C: fail /healthz and refuse new pages at once (503), "
                            "let saves in flight commit, tell open pages the server is restarting, "
                            "then stop; exit anyway SECONDS after the signal (default %(default)g; a save "
                            f"waiting on a held store gives up after {BUSY_TIMEOUT_S:g} s, so keep it above that)")
    serve.add_argument("--unused-session-lifetime", type=_seconds, metavar="SECONDS",
                       help="drop a session SECONDS after its last page closed or, for a page that never "
                            "connected, after it was made (default 60; Bokeh's "
                            "option of the same name, in seconds here)")
    serve.add_argument("--log-level", type=str.upper, choices=LEVELS, default="INFO",
                       help="the least severe operator log lines written to stderr (default INFO: sessions, "
                            "saves, imports, logins; WARNING: failed logins and errors only)")
    serve.add_argument("--embed-origin", action="append", default=[], metavar="ORIGIN",
                       help="a course site that may frame the learner pages and receive the "
                            "embed's messages, e.g. https://course.example (repeatable; default: "
                            f"${EMBED_ORIGINS_ENV}, space-separated, else none)")

    export = sub.add_parser("export", help="write every run as JSON or CSV")
    export.add_argument("--store", metavar="URL", help=store_help)
    export.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    export.add_argument("--format", choices=("json", "csv"), required=True)
    export.add_argument("-o", "--output", help="file to write (default, or -: stdout)")

    imports = sub.add_parser(
        "import", help="bring record files, folders of them and export bundles into the store")
    imports.add_argument("paths", nargs="+", metavar="PATH",
                         help="a record file, a folder of them (subfolders too), or an export bundle")
    imports.add_argument("--store", metavar="URL", help=store_help)
    imports.add_argument("--runs-dir", metavar="DIR", help=runs_help)

    test_case = sub.add_parser(
        "test-case", help="write the exercise's test (vitest or pytest) made from one saved run",
        description="Write a vitest (--lang ts) or pytest (--lang py) test of the exercise function "
                    "of Self-attention, \"Shapes and loops\", with the run's queries, keys and "
                    "causal mask, expecting the correct weights (also for a run saved in a broken "
                    "mode). A run with padding is refused.")
    test_case.add_argument("run_id", metavar="RUN_ID", help="the run's id (its file name without .json)")
    test_case.add_argument("--lang", choices=("ts", "py"), required=True,
                           help="ts: a vitest file; py: a pytest file")
    test_case.add_argument("--store", metavar="URL", help=store_help)
    test_case.add_argument("--runs-dir", metavar="DIR", help=runs_help)
    test_case.add_argument("-o", "--output", help="file to write (default, or -: stdout)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Exit status: 0 done (``import``: every file read and taken whole, runs already there
    skipped); 1 an output file could not be written, ``export`` left out a run it could not read
    (named on stderr and in the bundle's ``skipped``; the rest written), or ``import`` could not
    read a file or refused one (a record not valid or whose id holds other content); 2 bad
    usage, a store that cannot be opened (missing for ``export`` and ``test-case``, corrupt,
    foreign, newer, unreachable), (``test-case``) no such run, an unreadable one or one with padding (no test made), or
    (``serve``) an instructor password file or a cookie secret file that is missing, empty or
    readable by others, a ``--prefix`` or ``--allow-websocket-origin`` that cannot be one, a
    non-loopback address without an instructor password or ``--no-instructor-auth``,
    an ``--embed-origin`` that is not an origin, a runs directory that is a file or cannot be
    created, a port already in use.
    """
    args = build_parser().parse_args(argv)
    name = f"attention-workbench {args.command}"
    try:
        url, runs_dir = _store_url(args)
    except ValueError as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "serve":
        return _serve(args, url, runs_dir)
    if args.command == "import":
        return _import(url, args.paths)
    output = None if args.output in (None, "-") else Path(args.output)
    if args.command == "test-case":
        return _test_case(url, args.run_id, args.lang, output)
    return _export(url, args.format, output)


def _store_url(args: argparse.Namespace) -> tuple[str, Path | None]:
    """The store's URL, and the deprecated runs directory it came from (or None).

    ``--store`` beats ``--runs-dir``, which beats ``$ATTENTION_WORKBENCH_STORE``, which beats
    ``$ATTENTION_WORKBENCH_RUNS_DIR``. A runs directory is checked (and for ``serve`` created)
    here; ``ValueError`` says why it cannot be used.
    """
    # Imported here, not at the top: see the module docstring.
    from app.store.dialects import STORE_ENV, StoreOpenError, resolve_store_url, sqlite_url

    given_dir = None if args.store else (args.runs_dir or (
        None if os.environ.get(STORE_ENV) else os.environ.get(RUNS_DIR_ENV)))
    if not given_dir:
        try:
            return resolve_store_url(args.store), None
        except StoreOpenError as error:
            raise ValueError(str(error)) from None
    runs_dir = Path(given_dir).expanduser()
    source = "--runs-dir" if args.runs_dir else f"${RUNS_DIR_ENV}"
    url = sqlite_url(runs_dir / STORE_FILE)
    print(f"attention-workbench: {source} is deprecated and goes in the next release: runs are kept "
          f"in the SQLite store {runs_dir / STORE_FILE}; say --store {url} instead.", file=sys.stderr)
    if runs_dir.exists() and not runs_dir.is_dir():
        raise ValueError(f"runs directory {runs_dir} is not a directory")
    if args.command == "serve":
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"runs directory {runs_dir} cannot be created: {error.strerror or error}") from None
    elif not runs_dir.exists():
        raise ValueError(f"runs directory {runs_dir} does not exist")
    return url, runs_dir


def _instructor_password(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The instructor password and None, or None and why it cannot be had.

    The options first, then the environment: ``--instructor-password``,
    ``--instructor-password-file``, ``$ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD``, then
    ``$ATTENTION_WORKBENCH_INSTRUCTOR_PASSWORD_FILE``. A password that names an existing file is
    used as given, with a warning on stderr.
    """
    given = [(args.instructor_password, "--instructor-password", False),
             (args.instructor_password_file, "--instructor-password-file", True),
             (os.environ.get(PASSWORD_ENV), PASSWORD_ENV, False),
             (os.environ.get(PASSWORD_FILE_ENV), PASSWORD_FILE_ENV, True)]
    for value, source, is_file in given:
        if not value:
            continue
        if is_file:
            try:
                return read_password_file(value), None
            except ValueError as error:
                return None, f"{error} (from {source})"
        if password_looks_like_a_file(value):
            # The value is not echoed: it may be a real password that happens to name a file.
            print(f"attention-workbench serve: warning: the password given by {source} is the name of an "
                  "existing file; it is used as the password itself. To read the password from that file, "
                  "use --instructor-password-file FILE instead", file=sys.stderr)
        return value, None
    return None, None


def _cookie_secret(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The login cookie secret and None, or None and why it cannot be had (None, None: none
    given). ``--cookie-secret-file`` beats ``$ATTENTION_WORKBENCH_COOKIE_SECRET_FILE``."""
    for value, source in ((args.cookie_secret_file, "--cookie-secret-file"),
                          (os.environ.get(COOKIE_SECRET_FILE_ENV), COOKIE_SECRET_FILE_ENV)):
        if value:
            try:
                return read_cookie_secret_file(value), None
            except ValueError as error:
                return None, f"{error} (from {source})"
    return None, None


def _url_prefix(text: str) -> str:
    """``--prefix`` as Bokeh keeps it: ``/class`` for ``class``, ``/class/`` or ``/class``; empty
    for none. ``ValueError`` for a prefix that is not a plain path."""
    bare = text.strip("/")
    if not bare:
        return ""
    if any(c in bare for c in "?#%\\") or any(c.isspace() for c in bare) or "//" in bare:
        raise ValueError(f"--prefix {text!r} is not a URL path (write it as /class)")
    return "/" + bare


def _websocket_origin(text: str) -> str:
    """``--allow-websocket-origin`` checked: a host with an optional port, no scheme nor path."""
    host, _, port = text.partition(":")
    if (not host or "/" in text or ":" in port or any(c.isspace() for c in text)
            or (port and not port.isdigit())):
        raise ValueError(f"--allow-websocket-origin {text!r} is not HOST[:PORT] (e.g. class.example.org "
                         "or class.example.org:443, without http://)")
    return text


def _serve(args: argparse.Namespace, url: str, runs_dir: Path | None) -> int:
    password, problem = _instructor_password(args)
    if problem:
        print(f"attention-workbench serve: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    problem = exposure_problem(args.address, password, args.no_instructor_auth)
    if problem:
        print(f"attention-workbench serve: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.num_procs < 0:
        print("attention-workbench serve: error: --num-procs must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    cookie_secret, problem = _cookie_secret(args)
    if problem:
        print(f"attention-workbench serve: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        prefix = _url_prefix(args.prefix)
        ws_origins = [_websocket_origin(text) for text in args.allow_websocket_origin]
    except ValueError as error:
        print(f"attention-workbench serve: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if password and cookie_secret is None:
        print("attention-workbench serve: note: no --cookie-secret-file: instructor logins end when this "
              "server restarts and do not hold on another server started apart (its --num-procs workers share them); "
              "give every server the same --cookie-secret-file FILE to keep them",
              file=sys.stderr)
    try:
        embed_origins = parse_origins(args.embed_origin or origins_from_env(os.environ.get(EMBED_ORIGINS_ENV)))
    except ValueError as error:
        print(f"attention-workbench serve: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    configure(args.log_level)
    from app.store import RunStore, StoreError
    from app.store.importing import unimported_runs_notice

    try:  # before Panel is imported (a second or two): a store that cannot open is one line
        store = RunStore(url)
    except StoreError as error:
        print(f"attention-workbench serve: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    store_option = "" if url == "sqlite:///runs.db" else f"--store {url}"
    folder = runs_dir if runs_dir is not None else Path("runs")
    notice = unimported_runs_notice(store, folder, store_option)
    if notice and _first_time(store, f"import hint for {folder.absolute()}"):
        print(f"attention-workbench: {notice}", file=sys.stderr)
    try:
        # Lazily: Panel is heavy and export does not need it.
        server = importlib.import_module("app.server")
        server.serve(store=store, port=args.port, address=args.address,
                     num_procs=args.num_procs, instructor_password=password,
                     no_instructor_auth=args.no_instructor_auth, embed_origins=embed_origins,
                     cookie_secret=cookie_secret, allow_websocket_origin=ws_origins,
                     use_xheaders=args.use_xheaders, prefix=prefix, shutdown_grace=args.shutdown_grace,
                     unused_session_lifetime=args.unused_session_lifetime)
    except OSError as error:
        # Start-up problems only: the port is taken (or not ours to bind), the address is not
        # one of this machine's. Anything else is a bug.
        import socket

        if isinstance(error, StoreError):
            problem = str(error)
        elif isinstance(error, socket.gaierror) or error.errno in (
                errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            problem = _listen_message(args.address, args.port, error)
        else:
            raise
        print(f"attention-workbench serve: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _first_time(store, what: str) -> bool:
    """Whether ``store`` has not yet noted ``what``; noting it now (a store that cannot be
    written cannot remember: then every time)."""
    from app.store import StoreError

    try:
        return store.note_once(what)
    except StoreError:
        return True


def _listen_message(address: str, port: int, error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return f"port {port} on {address} is already in use"
    return f"cannot listen on {address} port {port}: {error.strerror or error}"


def _export(url: str, fmt: str, output: Path | None) -> int:
    from app.store import RunStore, StoreError, iter_csv, iter_export_json

    try:
        store = RunStore(url, create=False)
    except StoreError as error:
        print(f"attention-workbench export: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    count, left_out = [0], []

    def counted(items: Iterator) -> Iterator:
        for item in items:
            count[0] += 1
            yield item

    # A run that cannot be read is left out (and listed in the bundle's "skipped"), so what is
    # written is always a valid bundle or CSV; the command then fails, naming each one.
    if fmt == "json":
        pieces = iter_export_json(counted(store.iter_texts(left_out=left_out)), left_out)
    else:
        pieces = iter_csv(counted(store.iter_csv_rows(left_out=left_out)))
    try:
        if output is None:
            try:
                _write_stdout(pieces)
            except BrokenPipeError:
                # The reader stopped early (`| head`): Python's documented way out, no traceback
                # (stdout goes to devnull so the interpreter's last flush does not fail again).
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return EXIT_WRITE_FAILED
        else:
            try:
                _write_atomically(output, pieces)
            except OSError as error:
                if isinstance(error, StoreError):
                    raise
                print(f"attention-workbench export: error: cannot write {output}: "
                      f"{error.strerror or error}", file=sys.stderr)
                return EXIT_WRITE_FAILED
    except StoreError as error:
        print(f"attention-workbench export: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        store.close()
    runs = f"{count[0]:,} run{'' if count[0] == 1 else 's'}"
    if not left_out:
        print(f"exported {runs} from {store.where}", file=sys.stderr)
        return EXIT_OK
    for error in left_out[:20]:
        print(f"attention-workbench export: error: {error}", file=sys.stderr)
    n = len(left_out)
    print(f"attention-workbench export: error: {n:,} run{'s' if n != 1 else ''} in {store.where} could not be "
          f"read and {'were' if n != 1 else 'was'} left out{' (the first 20 named above)' if n > 20 else ''}; "
          f"{runs} {'were' if count[0] != 1 else 'was'} written to {output or 'stdout'}",
          file=sys.stderr)
    return EXIT_WRITE_FAILED


def _test_case(url: str, run_id: str, lang: str, output: Path | None) -> int:
    from app.store import RunStore, StoreError
    from attention_core.exercise import ExerciseCaseError, render_test
    from attention_core.records import RecordError

    def refuse(problem: str) -> int:
        print(f"attention-workbench test-case: error: {problem}", file=sys.stderr)
        return EXIT_USAGE

    try:
        with RunStore(url, create=False) as store:
            record = store.get(run_id)
    except KeyError:
        return refuse(f"no run {run_id} in {store.where}")
    except (ValueError, RecordError, StoreError) as error:  # not an id; an unreadable record; no store
        return refuse(str(error))
    try:
        text = render_test(record, lang)
    except ExerciseCaseError as error:
        return refuse(str(error))
    if output is None:
        _write_stdout([text])
        return EXIT_OK
    try:
        _write_atomically(output, [text])
    except OSError as error:
        print(f"attention-workbench test-case: error: cannot write {output}: {error.strerror or error}",
              file=sys.stderr)
        return EXIT_WRITE_FAILED
    print(f"wrote the {'vitest' if lang == 'ts' else 'pytest'} test of run {run_id} to {output}", file=sys.stderr)
    return EXIT_OK


def _import(url: str, paths: list[str]) -> int:
    from app.store import RunStore, StoreError
    from app.store.importing import import_paths, log_import

    configure()  # the import's line, for an operator whose stderr is kept (cron, a unit's journal)
    try:
        store = RunStore(url)
    except StoreError as error:
        print(f"attention-workbench import: error: {error}", file=sys.stderr)
        return EXIT_USAGE

    def tell(report) -> None:
        for line in report.lines():
            print(line, flush=True)

    try:
        result = import_paths(store, paths, on_file=tell)
        log_import(result, "cli")
    except StoreError as error:
        print(f"attention-workbench import: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        store.close()
    print(f"{result.summary()} (store {store.where})")
    return EXIT_OK if result.all_taken else EXIT_WRITE_FAILED


def _write_stdout(pieces) -> None:
    # As UTF-8 bytes whatever the locale says, so learners' text never fails to encode.
    binary = getattr(sys.stdout, "buffer", None)
    if binary is not None:
        sys.stdout.flush()
    for text in pieces:
        if binary is None:
            sys.stdout.write(text)
        else:
            binary.write(text.encode("utf-8"))
    if binary is not None:
        binary.flush()


def _write_atomically(path: Path, pieces) -> None:
    """Write the text ``pieces`` to ``path`` so readers see the old file or the whole new one."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            for text in pieces:
                f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


if __name__ == "__main__":
    sys.exit(main())
