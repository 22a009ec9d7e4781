# npumon build, test and measurement targets.
GO          ?= go
BIN         := bin/npumon
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 10s
PYTHON      ?= python3
PYPRODUCER  := monitor/producer/python
# mypy for the Python producer: the command, else Debian's python3-mypy module (.ci/run installs it)
MYPY        ?= $(shell command -v mypy >/dev/null 2>&1 && echo mypy || echo /usr/bin/python3 -m mypy)
# The version npumon reports (semver): X.Y.Z on a commit tagged vX.Y.Z, else the base version
# in cmd/npumon/main.go plus the commit as build metadata (0.1.0-dev+e16c67d, .dirty with
# uncommitted changes), else the base alone (no git).
BASE_VERSION := $(shell sed -n 's/^var version = "\(.*\)"$$/\1/p' cmd/npumon/main.go)
VERSION     ?= $(shell t=$$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) && echo $${t\#v} || \
                 { c=$$(git rev-parse --short HEAD 2>/dev/null) && echo "$(BASE_VERSION)+$$c$$(git diff --quiet HEAD 2>/dev/null || echo .dirty)"; } || \
                 echo "$(BASE_VERSION)")
# The commit `npumon version` names: its full hash, its time (UTC) and whether the tree had
# uncommitted changes; empty without git (the binary then says "commit unknown").
COMMIT      := $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME := $(if $(COMMIT),$(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ))
DIRTY       := $(if $(COMMIT),$(shell git diff --quiet HEAD 2>/dev/null || echo true))
LDFLAGS     := $(strip -X main.version=$(VERSION) $(if $(COMMIT),-X main.commit=$(COMMIT) -X main.commitTime=$(COMMIT_TIME)) $(if $(DIRTY),-X main.modified=true))
# make dist: static release tarballs of these architectures, with SHA256SUMS, in $(DIST).
DIST        ?= dist
DIST_ARCHES ?= amd64 arm64

.PHONY: build dist run test test-unit test-rules test-e2e test-arm64 test-dist test-python test-standalone bench bench-allocator bench-producer bench-soak fuzz lint docs golden crosscheck bench-data clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/npumon

# A release to carry to an air-gapped host (docs/release.md): per architecture a static
# binary (CGO_ENABLED=0, -trimpath) with README, docs, the Python producer and shell
# completions in dist/npumon-<version>-linux-<arch>.tar.gz, and dist/SHA256SUMS.
# Reproducible: sorted entries, owner 0, every mtime the commit's time.
dist:
	GO="$(GO)" VERSION="$(VERSION)" LDFLAGS="$(LDFLAGS)" DIST="$(DIST)" ARCHES="$(DIST_ARCHES)" \
	  bash e2e/dist.sh

# The main job: the embedded demo (a simulated training job, live).
run: build
	./$(BIN) demo

test: test-unit test-rules test-e2e test-arm64 test-dist test-python

test-unit:
	$(GO) test -race -count=1 ./...

# The Prometheus rules and alerts (docs/prometheus): promtool checks the example config and the
# rules it loads, runs the rules' unit tests, and the Go tests that parse the Grafana dashboard's
# queries. Skipped with a note where promtool is missing, unless REQUIRE_PROMTOOL=1 (CI installs
# it: Debian's prometheus package).
test-rules:
	@if command -v promtool >/dev/null 2>&1; then \
	  promtool check config docs/prometheus/prometheus.yml && \
	  promtool test rules docs/prometheus/npumon-rules.test.yml && \
	  REQUIRE_PROMTOOL=1 $(GO) test -count=1 -run '^(TestRules|TestDashboard|TestMetricNames)' ./monitor/metrics/; \
	elif [ "$(REQUIRE_PROMTOOL)" = 1 ]; then echo "test-rules: promtool not found"; exit 1; \
	else echo "test-rules: skipped, no promtool (apt-get install prometheus)"; fi

# End-to-end tests drive the real binary (tmux, sockets); they carry the e2e build tag.
test-e2e: build
	@if ls e2e/*_test.go >/dev/null 2>&1; then NPUMON_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -tags e2e ./e2e/...; fi

# The Python producer's own tests, without Go (cmd/npumon's TestProducerPython runs them too).
test-python:
	cd $(PYPRODUCER) && PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m unittest discover -s tests

# Ascend hosts are mostly aarch64 (Kunpeng): the unit tests again as linux/arm64 under
# qemu-user, which also runs the allocator's CNTVCT_EL0 counter stub. With -short: the
# randomized and scale tests run a sample (fewer seeds, cases and files; the soak and the
# 21 MB JSON are skipped), since test-unit has run them in full and they hold no
# architecture-specific code. Skipped with a note where qemu-aarch64 is missing, unless
# REQUIRE_ARM64=1 (CI installs it).
test-arm64:
	@if command -v qemu-aarch64 >/dev/null 2>&1; then \
	  GOARCH=arm64 $(GO) test -short -count=1 -exec qemu-aarch64 ./...; \
	elif [ "$(REQUIRE_ARM64)" = 1 ]; then echo "test-arm64: qemu-aarch64 not found"; exit 1; \
	else echo "test-arm64: skipped, no qemu-aarch64 (apt-get install qemu-user)"; fi

# make dist, then check what it made (e2e/e2e_dist_test.go): SHA256SUMS verify, the tarballs'
# contents, static ELF binaries, the amd64 binary here and the arm64 one under qemu-aarch64
# (skipped with a note without it, unless REQUIRE_ARM64=1), and a second make dist gives the
# same bytes.
test-dist: dist
	NPUMON_DIST=$(abspath $(DIST)) REQUIRE_ARM64=$(REQUIRE_ARM64) $(GO) test -count=1 -tags e2e -run '^TestDist' ./e2e/

# The unit tests once more (-short, as test-arm64: every test opens its files, the random
# ones draw fewer cases) in a fresh clone of the committed HEAD with nothing beside it: the
# repository must stand alone (no fixture, reference or file outside it).
test-standalone:
	bash e2e/standalone.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The allocator's headline figures (pair with and without history, history overhead, clock
# reads), 6 runs on one core: what to run on a bare-metal or arm64 host.
bench-allocator:
	$(GO) test -run '^$$' -bench 'MallocFreePair|HistoryOverhead|Timestamp' -benchmem -cpu 1 -count 6 ./allocator/

# The Python producer's CPU time per poll against the ring size (stand-in allocator, no torch).
bench-producer:
	PYTHONPATH=monitor/producer/python:monitor/producer/python/tests/standin python3 monitor/producer/python/tests/bench_producer.py 1000
	PYTHONPATH=monitor/producer/python:monitor/producer/python/tests/standin python3 monitor/producer/python/tests/bench_producer.py 100

# Every fuzz target for a short, fixed time. Minimizing a new corpus entry
# is quadratic in its length; the default 60 s per entry left a worker
# minimizing instead of fuzzing (FuzzFrameworkDecoder: 9-14 execs a minute).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff
	@# The Python producer's type hints (settings in its pyproject.toml).
	cd $(PYPRODUCER) && $(MYPY)
	@# The repository stands alone: nothing may point at files beside it.
	@if git grep -nI -e '\.\./shared' -e 'shared/reference' -e 'shared/fixtures' -- . ':!Makefile'; then \
	  echo "lint: the files above refer to a directory outside the repository"; exit 1; fi
	$(GO) test -count=1 -run '^TestDocsCurrent$$' ./cmd/npumon/

# Regenerate the generated parts of docs/cli.md (command reference) and docs/tui.md (key table).
docs:
	$(GO) test -count=1 -run '^TestDocsCurrent$$' ./cmd/npumon/ -args -update-docs

# Refresh every golden file, then read the diff (git diff) before committing it: the Go
# tests' goldens (the packages whose tests use internal/testutil/golden; one flag, -update)
# and the Python-reference goldens of replay/testdata (regen_golden.sh).
GOLDEN_PKGS := ./profiler/ ./tui/ ./tui/rankview/ ./tui/whatif/
golden:
	$(GO) test -count=1 -run 'Golden|^TestViewContent$$' $(GOLDEN_PKGS) -args -update
	cd replay/testdata && sh regen_golden.sh

# The 1,000,000-entry snapshots the replay benchmarks read (Python's pickle writes them):
# "distinct" is shaped like real dumps (a frames list per allocation), the shared shape
# (snapshot_1m.pickle, and the one with an oom entry) refers to 400 shared stack lists.
# Optional, not made here: the 10M case (860 MB),
#   python3 replay/testdata/gen_bench.py testdata/bench/snapshot_10m_distinct.pickle 10000000 distinct
bench-data:
	@mkdir -p testdata/bench
	python3 replay/testdata/gen_bench.py testdata/bench/snapshot_1m.pickle 1000000 shared
	python3 replay/testdata/gen_bench.py testdata/bench/snapshot_1m_distinct.pickle 1000000 distinct
	python3 replay/testdata/gen_bench.py testdata/bench/snapshot_1m_oom.pickle 1000000 --oom

# The live path at a set rate: a producer feeds the real `npumon attach` over a Unix socket,
# its terminal UI drawing in tmux (LIVE_FLAGS= for --headless); reports entries received and
# missed and attach's CPU per entry.
LIVE_FLAGS ?= -live-tui
bench-live: build
	NPUMON_BIN=$(CURDIR)/$(BIN) $(GO) test -tags e2e -run '^$$' -bench LiveAttach -benchtime 1x ./e2e/ -live-rate 1000000 -live-for 60s $(LIVE_FLAGS)

# Ten minutes of `npumon sim` at its top rate into `npumon attach --headless`: attach's RSS at
# 1, 2, 5 and 10 minutes with the default retention window (docs/retention.md). Not for CI.
bench-soak: build
	NPUMON_BIN=$(CURDIR)/$(BIN) nice $(GO) test -tags e2e -run '^$$' -bench Soak -benchtime 1x -timeout 30m ./e2e/ -soak-for 10m -v

# Optional: installs Debian's python3-torch (1.13, CPU) and compares `npumon stats` with
# `python3 -m torch.cuda._memory_viz stats` on 1.13-form exports. Too heavy for CI.
crosscheck: build
	sh replay/testdata/crosscheck.sh $(CURDIR)/$(BIN)

clean:
	rm -rf bin dist
