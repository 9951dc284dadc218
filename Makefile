# QIM developer commands. `make demo` and `make test` work on a fresh machine of this
# kind: every install step lives here or in the scripts it calls.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
CORE_SRC := $(wildcard qim/_core/*.pyx qim/_core/*.pxd)
DEMO_LANGS ?= english,chinese
# the demo replays DEMO_LIMIT dialogues (the languages interleaved); DEMO_FULL=1 replays
# the whole corpus (2,493 dialogues: about 20 minutes on a busy 2-core machine)
DEMO_LIMIT ?= 300
DEMO_FULL ?=
PYTEST_ARGS ?=
# make test: pytest-xdist workers for the main suite (docs/decisions/0118); 1 runs it in one process
PYTEST_WORKERS ?= 2

.PHONY: install engines up demo down test test-scale bench wheel proto clean test-tools web-tools web-build test-web web-up web-serve

# pip shows each package it fetches and installs (no -q: minutes on an empty cache are
# never silent); the compile of qim/_core is the "Building editable" step
$(STAMP): pyproject.toml setup.py $(CORE_SRC)
	@echo "install: 1/3 a virtual environment in $(VENV)" >&2
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@echo "install: 2/3 Cython, setuptools, wheel" >&2
	$(BIN)/pip install --progress-bar off "Cython>=3.0,<4" "setuptools>=68" wheel
	@echo "install: 3/3 QIM and its Python packages (PyPI), compiling qim/_core" >&2
	@# setuptools' "Editable installation" notice is a warning block on every fresh install: not ours to show
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --progress-bar off --no-build-isolation -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# REDIS_INSTANCES=N: N standalone Redis instances (docs/operations.md "Several Redis instances")
engines: install
	$(BIN)/qim-dev engines up $(if $(REDIS_INSTANCES),--redis-instances $(REDIS_INSTANCES))

# The services run under the stack's supervisor (qim/dev/supervisor.py): one that dies is
# started again after 0.5 s, doubling up to 30 s while it keeps dying; `qim-dev stack
# status` shows each one's restarts and .qim/stack/logs/supervisor.log each exit status.
# `make down` stops the supervisor first (by its recorded pid), then anything left.
up: engines
	$(BIN)/qim-dev stack up

# The demo (docs/decisions/0085): every phase prints progress (pip, each engine and
# service ready with its seconds, the replay's bars); the page's tools first (web-tools:
# Chromium with CJK and emoji fonts, web-build); a replay of DEMO_LIMIT dialogues
# (DEMO_FULL=1: all), whose `replay: …` verdict stays the replay's last line; then qim-web
# and what to do next (qim/dev/demo_next.py) as the very last lines. The demo runs the archive tier
# with a short hot window: history older than a few seconds moves to the
# archive (Cassandra), and after the replay every conversation's history is read again
# through the SDK across the seam (`history: … from_cold=C mismatched=0`, printed just
# before the replay line). These variables reach `qim-dev stack up` (a prerequisite).
demo: export QIM_HISTORY_HOT_WINDOW_MS = 5000
demo: export QIM_OUTBOX_RETENTION_MS = 2000
demo: export QIM_HISTORY_TRIM_SLACK_MS = 1000
demo: export QIM_HISTORY_TRIM_PERIOD_MS = 1000
demo: web-tools up web-build
	@echo "demo: replaying $(if $(DEMO_FULL),every dialogue of the corpus,$(DEMO_LIMIT) dialogues (DEMO_FULL=1: the whole corpus)) ($(DEMO_LANGS)); the stack stays up afterwards" >&2
	set -a; . .qim/stack/stack.env; set +a; $(BIN)/qim-loadgen replay --langs $(DEMO_LANGS) --limit $(if $(DEMO_FULL),0,$(DEMO_LIMIT)) --history-check --history-settle 20
	-@$(MAKE) --no-print-directory web-serve
	@$(BIN)/python -m qim.dev.demo_next --web-port $(QIM_WEB_PORT) --web-pid $(WEB_PID)

down:
	@if [ -f $(WEB_PID) ]; then kill $$(cat $(WEB_PID)) 2>/dev/null || true; rm -f $(WEB_PID); fi
	@if [ -x $(BIN)/qim-dev ]; then $(BIN)/qim-dev stack down; $(BIN)/qim-dev engines down; fi

# The web client (web/: qim-js and the page; docs/sdk.md "qim-js"). web-tools installs
# Debian's Chromium with CJK and emoji fonts (the browser tests in tests/web drive it
# through Playwright, never a downloaded browser) and the node packages pinned by
# web/package-lock.json (npm ci); web-build generates the protobuf code (buf +
# protoc-gen-es from npm, no protoc), type-checks and bundles the page into web/dist;
# test-web runs the qim-js unit tests (vitest: codec vs tests/vectors, store, state
# machine, the conformance scenarios of tests/conformance played by .venv's player) and
# then the browser tests. web-up starts qim-web (the page's development
# server, by recorded pid; `make down` stops it) and prints the address to open.
WEB_APT := chromium fonts-noto-cjk fonts-noto-color-emoji
WEB_STAMP := web/node_modules/.ci-stamp
WEB_PID := .qim/web/qim-web.pid
QIM_WEB_PORT ?= 8088

web-tools:
	@dpkg -s $(WEB_APT) >/dev/null 2>&1 || { echo "web-tools: installing $(WEB_APT) (Debian)" >&2; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(WEB_APT); }

$(WEB_STAMP): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	touch $@

web-build: $(WEB_STAMP)
	@# buf and tsc print nothing while they work: say so, or the demo looks stuck for a minute (decision 0093)
	@echo "web-build: protobuf code (buf), type check (tsc), then the bundle (vite): about a minute on a busy machine" >&2
	cd web && npm run build

test-web: install web-tools web-build
	cd web && npm test
	$(BIN)/python -m pytest -q tests/web

web-up: install web-build web-serve

# qim-web on the built page (web-up without the build: `make demo` builds before its replay)
web-serve:
	@mkdir -p .qim/web
	@if [ -f $(WEB_PID) ] && kill -0 $$(cat $(WEB_PID)) 2>/dev/null; then kill $$(cat $(WEB_PID)); sleep 0.5; fi
	@set -a; . .qim/stack/stack.env; set +a; \
	  if [ -z "$$QIM_GATEWAY_WS_ADDR" ]; then echo "web: this stack's gateway has no WebSocket listener (QIM_GATEWAY_WS_ADDR unset in .qim/stack/stack.env): qim-web not started" >&2; exit 1; fi; \
	  nohup $(BIN)/qim-web --port $(QIM_WEB_PORT) > .qim/web/qim-web.log 2>&1 & echo $$! > $(WEB_PID); \
	  sleep 1; if kill -0 $$(cat $(WEB_PID)) 2>/dev/null; then \
	    echo "web: open http://127.0.0.1:$(QIM_WEB_PORT)/ (sign in as any user id; qim-web pid $$(cat $(WEB_PID)), stopped by 'make down')" >&2; \
	  else echo "web: qim-web did not start: $$(tail -1 .qim/web/qim-web.log)" >&2; exit 1; fi

# Debian packages of the tests: tmux (two real qim-desktop processes, tests/e2e/test_desktop_tmux.py),
# promtool from prometheus (the alert rules, tests/ops/test_alerts.py) and systemd-analyze from
# systemd (the production units, tests/ops/test_units.py); --no-install-recommends keeps
# prometheus to its binaries (no exporters)
TEST_APT := tmux prometheus systemd
test-tools:
	@dpkg -s $(TEST_APT) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TEST_APT); }

# Every test (the qim-js unit tests first, then pytest on PYTEST_WORKERS processes, a
# test file per worker at a time, which includes the browser tests of tests/web), then the
# core suite again on the pure-Python twins (QIM_PUREPYTHON=1), then the three-node CQL
# gate (test-cql3) and the Redis moves under traffic (test-redis-move): the gate of the
# storage tier is part of CI (docs/decisions/0118). The scale suite and the operator
# drills are not: they run in `make test-all` (docs/decisions/0131, 0164: the CI run is
# CPU-bound, and was 48 of its 50 minutes).
# Each suite prints its run time.
test: install test-tools web-tools web-build
	cd web && npm test
	@start=$$(date +%s); $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=40 --ignore=tests/scale --ignore=tests/cql3 --ignore=tests/redismove --ignore=tests/deploy --ignore=tests/badge/test_badge_takeover.py $(DRILLS:%=--ignore=%) $(PYTEST_ARGS); rc=$$?; \
	  echo "test (main suite): $$(( $$(date +%s) - start )) s"; exit $$rc
	QIM_PUREPYTHON=1 $(BIN)/python -m pytest -q tests/core
	$(MAKE) test-cql3
	$(MAKE) test-redis-move

# Everything `make test` runs, then the scale suite (docs/decisions/0131): before a
# release, and after a change to takeover, leases, fencing or the ShardRegistry.
.PHONY: test-all
test-all: test
	$(MAKE) test-scale
	$(MAKE) test-drills

# The operator drills (docs/decisions/0164): a backup wiped and restored on a private
# stack (with the archive's cold history), and a start that misses its health grace
# getting a longer one each time. Each runs a whole stack for about a minute; run them
# after a change to qimctl backup/restore, the HistoryArchiver or the supervisor.
DRILLS = tests/ops/test_backup_archive.py tests/ops/test_backup_restore.py tests/ops/test_health_slow_start.py
.PHONY: test-drills
test-drills: install test-tools
	@start=$$(date +%s); $(BIN)/python -m pytest -q -p no:cacheprovider $(DRILLS) $(PYTEST_ARGS); rc=$$?; \
	  echo "test-drills: $$(( $$(date +%s) - start )) s"; exit $$rc

# Scale out, done when (tests/scale/test_scale.py: two nodes of every kind, three brokers,
# SIGKILL/SIGSTOP of each kind under traffic, a node added, cross-gateway push and kick,
# takeover time over 20 kills), and the badge across a session node's SIGKILL
# (tests/badge/test_badge_takeover.py: it hung once in a clean-clone run, decision 0131);
# prints its run time (docs/status.md keeps the last one).
test-scale: install
	@start=$$(date +%s); $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/scale tests/badge/test_badge_takeover.py $(PYTEST_ARGS); rc=$$?; \
	  echo "test-scale: $$(( $$(date +%s) - start )) s"; exit $$rc

# The three-node CQL gate (docs/decisions/0089, 0090, 0118; the last step but one of
# `make test`: three JVMs start one after the other, 4-5 min on two loaded cores): the CQL store contract suites, the RF
# checks and LOCAL_QUORUM on a cluster of three (RF 3); -k "cql" selects the "cql" and
# "cqlmbx" backends (the CQL MailboxStore's contract, decision 0102). Then the whole tier
# (three Redis instances, the CQL mailbox, the archive) sending while a Cassandra node is
# SIGKILLed and restarted, another SIGSTOPped and a Redis instance SIGKILLed and restarted,
# a move from the Redis mailbox to the CQL one, and a MailboxNode SIGKILLed and taken over
# on the CQL mailbox (tests/cql3). Prints its run time.
.PHONY: test-cql3
test-cql3: install
	@start=$$(date +%s); QIM_TEST_CQL_NODES=3 $(BIN)/python -m pytest -q -s -p no:cacheprovider \
	  tests/stores -k "cql or seam or test_archive or test_errors" tests/cql3/test_replication.py \
	  tests/cql3/test_node_faults.py tests/cql3/test_mailbox_migration.py tests/cql3/test_cql_mailbox.py $(PYTEST_ARGS); rc=$$?; echo "test-cql3: $$(( $$(date +%s) - start )) s"; exit $$rc

# A MailboxShard and a commit bucket moved to another Redis instance under traffic
# (docs/decisions/0104, 0113; the last step of `make test`: one private stack on three
# Redis instances shared by both tests: 45 s measured on a busy 2-core machine).
.PHONY: test-redis-move
test-redis-move: install
	@start=$$(date +%s); $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/redismove $(PYTEST_ARGS); rc=$$?; \
	  echo "test-redis-move: $$(( $$(date +%s) - start )) s"; exit $$rc

# The 200 MB media end to end (issue 40): a file uploaded in parts through qim.sdk, cut
# twice mid-part, resumed with only the missing parts, downloaded by another member by
# ranges (tests/scale/test_media_200mb.py; the main suite runs the same flow at 24 MiB).
# Also part of test-scale. Prints its run time.
.PHONY: test-media-large
test-media-large: install
	@start=$$(date +%s); $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/scale/test_media_200mb.py $(PYTEST_ARGS); rc=$$?; \
	  echo "test-media-large: $$(( $$(date +%s) - start )) s"; exit $$rc

# pytest-benchmark: every bench on the pure twin and the compiled module in one run,
# plus the reference bench; then the gate (benches/gate.py): each group's compiled/pure
# ratio at or above its floor (benches/floors.toml) and each compiled bench within the
# stated margin of its ratio to the reference in benches/baseline.json. Exits non-zero
# naming the figure otherwise. The last line printed is
# `bench: frame_stream_x=… watermark_x=… eventgroup_x=…`. `make bench-baseline` rewrites
# the baseline after an intended change (commit benches/baseline.json with it).
BENCH_REPORT_ARGS ?=
bench: install
	mkdir -p .benchmarks
	$(BIN)/python -m pytest benches -q -p no:cacheprovider -o python_files='bench_*.py' \
		--benchmark-only --benchmark-max-time=0.5 --benchmark-columns=min,median,rounds \
		--benchmark-json=.benchmarks/bench.json
	$(BIN)/python benches/report.py .benchmarks/bench.json $(BENCH_REPORT_ARGS)

.PHONY: bench-baseline
bench-baseline:
	$(MAKE) bench BENCH_REPORT_ARGS=--update-baseline

# Throughput and latency (docs/perf.md): a private stack in .perf/ (own ports
# and data, stopped at the end), a ladder of rates with `qim-loadgen rate` (SDK lane on),
# CPU per message per process from /proc, .perf/perf.json and .perf/perf.png. Shorten
# with PERF_RATES=25,100 PERF_SECONDS=10 PERF_HOLD_SECONDS=10; PERF_GROUP_STEP=1 adds the
# 1,000-member group step. First the connection step (PERF_CONNECTIONS=10000 idle TLS
# connections on a lone gateway; 0 skips it; `make perf-conn` runs it alone): the last
# line is `perf: max_rate=… … low_load_e2e_p99_ms=… conn_kb_per_idle=… logins_per_s=…`.
# PERF_REDIS=3: the whole run with one Redis and with 3 instances, then a `perf-redis:` line
# with both side by side (qim/dev/perf_redis.py). PERF_MIX=replies=0.1,reactions=0.3,...
# runs every step with `qim-loadgen rate --mix` (ms/msg then counts REACT and TYPING too).
.PHONY: perf perf-conn
perf: install
	$(BIN)/python -m qim.dev.perf

perf-conn: install
	$(BIN)/python -m qim.dev.perf_conn

# manylinux wheel into wheelhouse/: build, auditwheel repair, install into a fresh venv, import
wheel: install
	$(BIN)/python tools/wheel_check.py --out wheelhouse

proto: install
	$(BIN)/python tools/gen_proto.py

# Deployment artefacts (docs/decisions/0109; docs/operations.md "Running on Kubernetes"), not
# in `make test`: building helm and the image take minutes. deploy-tools builds helm and
# kubecheck (Go module proxy) into ~/.cache/qim/tools/bin and installs Debian's mmdebstrap
# and umoci, each once; image builds the OCI image into build/image/oci (tag qim) from
# the wheel; test-deploy runs tests/deploy (helm lint/template/kubecheck on three values
# files, the image's contents, a service run from it in a namespace, its reproducibility).
.PHONY: deploy-tools image test-deploy
deploy-tools:
	bash tools/deploy/install-tools.sh

image: install deploy-tools wheel
	$(BIN)/python tools/deploy/build_image.py

test-deploy: install deploy-tools image
	@start=$$(date +%s); PATH="$$HOME/.cache/qim/tools/bin:$$PATH" $(BIN)/python -m pytest -q -p no:cacheprovider \
	  tests/deploy $(PYTEST_ARGS); rc=$$?; echo "test-deploy: $$(( $$(date +%s) - start )) s"; exit $$rc

clean: down
	rm -rf build $(VENV) .qim qim/_core/*.c qim/_core/*.so web/node_modules web/dist web/src/gen web/test-results

# T-HEAVY: one user with 5000 conversations built through the real write path; first
# session-list page cold (snapshot rebuild included) and warm. Private engines and stack.
.PHONY: bench-sessions
bench-sessions: install
	$(BIN)/python benches/bench_sessions.py

# History paging across the archive's hot floor: 100,000 messages of one
# conversation, 89,975 archived in Cassandra and trimmed from Redis; P99 per page of a
# walk from the newest to the oldest, again after half the archived rows expired
# (tombstones). Private Redis and Cassandra. Last line `history-seam: … p99_ms=…`.
.PHONY: bench-history
bench-history: install
	$(BIN)/python benches/bench_history_seam.py

# The gateway's memory under 100,000 malformed connections (docs/operations.md "Memory
# under malformed connections"): a lone qim-gateway, batches of 10,000 garbage
# connections, its RSS after each; exits 1 when the RSS after the last batch is more than
# 20 MB above its value after the first. ~10 min on two cores. The last line is
# `malformed: connections=… growth_mb=… bound_mb=20`.
.PHONY: soak-malformed
soak-malformed: install
	$(BIN)/python -m tests.gateway.malformed --total 100000

# Chaos soak (tests/soak/chaos_soak.py; docs/operations.md "Chaos soak"): SOAK_MINUTES
# (default 20) of traffic on a supervised several-node stack (3 brokers, Redis, Cassandra)
# with a fault every SOAK_FAULT_EVERY_S (30) s: SIGKILL and SIGSTOP of every kind, a Redis
# restart on its AOF, a broker killed and paused, Cassandra paused; nobody but the
# supervisor restarts anything. Exits 1 unless every service is healthy at the end, every
# ACKed message was told once, the audit is at zero and no service's memory grew. About
# 25 min on two cores; SOAK_SEED repeats an order of faults. Last line `soak: minutes=… lost=0 …`.
.PHONY: soak
soak: install
	$(BIN)/python -m tests.soak.chaos_soak

# Offline push soak at the issue's size (issue 39, docs/decisions/0145;
# tests/scale/test_notify_soak.py, which `make test-scale` runs at 200 devices for 3 min):
# NOTIFY_SOAK_DEVICES (1000) offline phones, NOTIFY_SOAK_MINUTES (20) of traffic with reads
# on other devices and APNs faults, two qim-notify nodes. Fails unless every phone ends at
# the server's badge, none is alerted twice and the outcomes add up to the messages; prints
# `soak-notify:` lines (CPU per push per process, pushes/s, load average). About 23 min (22.4 on two loaded cores, docs/perf.md "Offline push").
NOTIFY_SOAK_DEVICES ?= 1000
NOTIFY_SOAK_MINUTES ?= 20
.PHONY: soak-notify
soak-notify: install
	@start=$$(date +%s); NOTIFY_SOAK_DEVICES=$(NOTIFY_SOAK_DEVICES) NOTIFY_SOAK_MINUTES=$(NOTIFY_SOAK_MINUTES) \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/scale/test_notify_soak.py $(PYTEST_ARGS); rc=$$?; \
	  echo "soak-notify: $$(( $$(date +%s) - start )) s"; exit $$rc

# Fuzzing (tests/fuzz/README.md): atheris (coverage-guided) on the frame
# decoder, zstd bodies and request parsing with a random seed, then fuzzed frame
# sequences against a private stack. FUZZ_RUNS per target (default 250000, 10^6 in all)
# or FUZZ_SECONDS per target, FUZZ_SEED to repeat a run, FUZZ_LIVE sequences (default
# 5000). The last line printed is `fuzz: inputs=N findings=0 …`.
.PHONY: fuzz
fuzz: install
	$(BIN)/python -m tests.fuzz.run
