# Every target bootstraps .venv on a fresh machine: `make serve` and `make test` are all you need.
# The install is editable, so edits to app/ and attention_core/ (code and the files they read,
# package data) take effect without reinstalling; a wheel carries the same files (tests/test_wheel.py).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Touched after a successful install; reinstalls whenever pyproject.toml changes.
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help serve test lint browser node postgres nginx bench screenshots clean distclean

help:
	@echo "make serve   set up .venv and start the workbench (ARGS='--port 5007' passes options)"
	@echo "make test    set up .venv, make sure Chromium, vitest, PostgreSQL and nginx exist, run ruff and every test"
	@echo "make lint    ruff only"
	@echo "make bench   run bench/run.py"
	@echo "make screenshots  remake the README's pictures in assets/screenshots/ (Chromium, 1280x720)"
	@echo "make clean   remove caches and build output (make distclean also removes .venv)"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "make: $(PYTHON) is older than 3.11; run e.g. 'make PYTHON=python3.11 ...'" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e '.[test]'
	touch $@

# Bytecode for our packages, as pip writes it when it installs a wheel: an editable install
# leaves it to the first import, which writes none under PYTHONDONTWRITEBYTECODE (set on our
# machines), and every start (each test's server too) then compiled every module again. Only
# what changed is compiled again; figures in bench/README.md.
COMPILE := $(BIN)/python -m compileall -q app attention_core

serve: $(STAMP)
	$(COMPILE)
	$(BIN)/attention-workbench serve $(ARGS)

# Finds a system or Playwright Chromium, installing one (apt-get as root, else Playwright) if none;
# the tests run headless in Debian's chromium-headless-shell when there is one (tests/find_browser.py).
browser: $(STAMP)
	$(BIN)/python tests/find_browser.py --install

# Needs Node.js 20.19+ and npm: npm ci installs the pinned vitest (tests/exercise/package-lock.json)
# into .cache/node once, for the tests that run the generated TypeScript tests.
node: $(STAMP)
	$(BIN)/python tests/find_node.py --install

lint: $(STAMP)
	$(BIN)/ruff check .

# Finds Debian's PostgreSQL server binaries, installing the postgresql package (apt-get as root)
# if none: the store tests start a server of their own with them.
postgres: $(STAMP)
	$(BIN)/python tests/postgres_server.py --install

# Finds nginx, installing Debian's nginx-light (apt-get as root) if none: the deployment tests
# run the shipped site (deploy/nginx-workbench.conf) with it.
nginx: $(STAMP)
	$(BIN)/python tests/nginx_server.py --install

# Two pytest-xdist workers: a browser test leaves a core idle while its page waits for the
# server. Each test file runs whole on one worker, so its module's servers and its order stay.
TEST_WORKERS ?= 2

test: browser node postgres nginx lint
	$(COMPILE)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(ARGS)

bench: $(STAMP)
	@test -f bench/run.py || { echo "make: bench/run.py does not exist yet" >&2; exit 1; }
	$(BIN)/python bench/run.py $(ARGS)

# Serves the app over a temporary store and photographs it (assets/screenshots/make_screenshots.py).
screenshots: browser
	$(BIN)/python assets/screenshots/make_screenshots.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache test-results
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .cache
