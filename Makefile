# Two commands: `make run` (the whole stack) and `make test` (the suite). Both set themselves up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PGHOST ?= 127.0.0.1
PGUSER ?= postgres
DATABASE ?= impo
# What `npm ci` leaves in tests/js once the npm packages the tests read are installed.
JS_MODULES := tests/js/node_modules/.package-lock.json

.PHONY: run test test-fast fuzz chaos bench install lock database browser lint

# The stack runs as the tests run the web server: DEBUG off (a person sees the project's own 404 and 500 pages,
# not Django's debug pages listing every route), over plain HTTP on loopback, with a key kept in var/ and the demo
# user. Each relaxation of the secure defaults is named here. Static files are still served and reread when
# changed. `DJANGO_DEBUG=true make run` brings the debug pages back (the web server serves DEBUG on loopback only).
RUN_ENV = DJANGO_DEBUG=$${DJANGO_DEBUG:-false} DJANGO_HTTPS=$${DJANGO_HTTPS:-false} IMPO_DEMO_USER_FORCE=true \
	IMPO_STATIC_AUTOREFRESH=true DJANGO_SECRET_KEY="$${DJANGO_SECRET_KEY:-$$(cat var/secret_key)}" \
	IMPO_VAPID_PRIVATE_KEY="$${IMPO_VAPID_PRIVATE_KEY:-$$(cat var/vapid_private_key)}"
# A VAPID key (Web Push, docs/notifications.md): base64url of a raw P-256 private key, made once like the secret key.
NEW_VAPID_KEY = import base64; from cryptography.hazmat.primitives.asymmetric import ec; \
	key = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value.to_bytes(32, "big"); \
	print(base64.urlsafe_b64encode(key).rstrip(b"=").decode())

run: install database
	mkdir -p var
	test -s var/secret_key || $(BIN)/python -c "import secrets; print(secrets.token_urlsafe(50))" > var/secret_key
	test -s var/vapid_private_key || $(BIN)/python -c '$(NEW_VAPID_KEY)' > var/vapid_private_key
	$(RUN_ENV) $(BIN)/python manage.py migrate --no-input
	$(RUN_ENV) $(BIN)/python manage.py ensure_demo_user
	$(RUN_ENV) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start

# The suite in parallel: TEST_WORKERS pytest-xdist workers, each a test session of its own (tests/isolation.py),
# each test to the next free worker (a module fixture is then set up once in every worker that runs one of
# its tests). TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 3
test: install database browser
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist load

# The tests that start no process (no worker, web server, double or Temporal): marked `fast` by tests/conftest.py,
# which also fails a fast test that starts a process anyway. Minutes, not the suite's quarter hour. The npm packages
# are read as files (the vendored libraries' test), so they are installed; Chromium is not needed.
test-fast: install database $(JS_MODULES)
	$(BIN)/python -m pytest -m fast -n $(TEST_WORKERS) --dist load

# The schema fuzzer deeper than the suite's budget: with the coverage phase (every constraint's boundaries and
# violations) and 100 fuzzed cases an operation instead of 20; IMPO_FUZZ_SEED replays one.
fuzz: install database
	IMPO_FUZZ_PHASES=$${IMPO_FUZZ_PHASES:-examples,coverage,fuzzing} IMPO_FUZZ_EXAMPLES=$${IMPO_FUZZ_EXAMPLES:-100} \
		$(BIN)/python -m pytest tests/fuzz -q

# A longer, wider chaos run than the suite's; IMPO_CHAOS_SEED replays one. Prints its figures.
chaos: install database
	IMPO_CHAOS_SECONDS=$${IMPO_CHAOS_SECONDS:-120} IMPO_CHAOS_CONVERSATIONS=$${IMPO_CHAOS_CONVERSATIONS:-12} \
		IMPO_CHAOS_MESSAGES=$${IMPO_CHAOS_MESSAGES:-20} $(BIN)/python -m pytest tests/chaos -q

# Figures against same-run baselines, in a scratch database of its own; see bench/RESULTS.md.
bench: install
	$(BIN)/python -m bench

install: $(BIN)/.installed

# Installs exactly what requirements.lock pins, so a new upstream release cannot change what runs, with uv (itself
# pinned): the whole lock into a fresh venv in seconds, where pip took half a minute. `make lock` regenerates the
# lock from pyproject.toml (runtime and dev dependencies) when those change. .ci/run installs the same way.
UV_VERSION := 0.13.9
$(BIN)/.installed: requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync --quiet --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $@

lock: install
	$(BIN)/uv pip compile --quiet --python $(BIN)/python --extra dev -o requirements.lock \
		pyproject.toml

# The browser test drives Debian's Chromium; the stream test parses with the AI SDK's own reader.
browser: $(JS_MODULES)
	command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

$(JS_MODULES): tests/js/package.json tests/js/package-lock.json
	cd tests/js && npm ci --no-audit --no-fund --loglevel=error

database:
	psql -h $(PGHOST) -U $(PGUSER) -tAc "SELECT 1 FROM pg_database WHERE datname = '$(DATABASE)'" | grep -q 1 \
		|| createdb -h $(PGHOST) -U $(PGUSER) $(DATABASE)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
