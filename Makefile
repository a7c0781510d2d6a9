# intend — build, test and run. `make demo` and `make test` are all a fresh
# machine needs: `make tools` installs what is missing.

SHELL        := /bin/bash
GO           ?= go
TOOLS        ?= $(CURDIR)/.tools
TEMPORAL_CLI_VERSION := v1.5.1
STATICCHECK_VERSION  := v0.8.2
TEMPORAL     := $(TOOLS)/bin/temporal
STATICCHECK  := $(TOOLS)/bin/staticcheck
VERSION      ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
TEST_TIMEOUT ?= 30m

export INTEND_TEMPORAL_CLI := $(TEMPORAL)

.PHONY: all build test demo tools postgres sshd prometheus lint bench fuzz clean help

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/intend
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/intend ./cmd/intend

tools: $(TEMPORAL) postgres sshd prometheus ## install the pinned Temporal CLI, PostgreSQL, OpenSSH server and promtool when missing

# The Temporal CLI is built from source with `go install` (nothing is
# downloaded from GitHub releases); ~5 minutes on 2 cores, once.
$(TEMPORAL):
	@echo "building Temporal CLI $(TEMPORAL_CLI_VERSION) into $(TOOLS)/bin (takes a few minutes, once)"
	@mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

postgres: ## make sure PostgreSQL server binaries (initdb, postgres) exist
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "PostgreSQL: $$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"; \
	else \
		echo "PostgreSQL server binaries missing: installing with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y postgresql; \
	fi

# The ssh:: adapter tests start their own sshd (internal/sshtest).
sshd: ## make sure the OpenSSH server (/usr/sbin/sshd) exists
	@if [ -x /usr/sbin/sshd ]; then \
		echo "OpenSSH server: /usr/sbin/sshd"; \
	else \
		echo "OpenSSH server missing: installing with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y openssh-server; \
	fi

# deploy/prometheus's rules are checked and unit-tested with promtool
# (deploy/prometheus/prometheus_test.go). Debian's prometheus package brings it; the package
# may start a prometheus service (where policy-rc.d allows it), which
# nothing here uses or minds: the tests bind ports of their own.
prometheus: ## make sure promtool exists
	@if command -v promtool >/dev/null 2>&1; then \
		echo "promtool: $$(command -v promtool)"; \
	else \
		echo "promtool missing: installing Debian's prometheus package with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends prometheus; \
		command -v promtool >/dev/null 2>&1 || { echo "promtool still missing after installing prometheus"; exit 1; }; \
	fi

$(STATICCHECK):
	@mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

test: tools ## run the whole test suite against real PostgreSQL and Temporal
	CI=$${CI:-1} $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=10s

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME (default 30s)
	@set -e; for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$pkg/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			out=$$(mktemp); \
			if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >$$out 2>&1; then \
				cat $$out; \
				if grep -q 'context deadline exceeded' $$out && \
				   [ -z "$$(git status --porcelain -- $$pkg/testdata/fuzz/$$f 2>/dev/null)" ]; then \
					echo "no crasher written: Go's fuzzing engine failing at its time limit (golang/go#75804); running $$f again"; \
					$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
				else rm -f $$out; exit 1; fi; \
			else cat $$out; fi; \
			rm -f $$out; \
		done; \
	done

demo: build tools ## embedded all-in-one deploy of examples/quickstart
	./bin/intend deploy examples/quickstart

lint: $(STATICCHECK) ## go vet and staticcheck
	$(GO) vet ./...
	$(STATICCHECK) ./...

BENCH_N ?= 10000
bench: tools ## hot-path benchmarks, then the end-to-end deploy benchmark (docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -benchmem ./adapters/... ./internal/intent/
	$(GO) test -run '^$$' -bench P8 -benchtime 5x -benchmem ./internal/compiler/   # P8: compile of 1 / 1,000 service instances
	CI=$${CI:-1} $(GO) test -run '^$$' -bench 'Authenticate|GuardedRead' -benchtime 2000x ./api/   # what authentication adds per request
	$(GO) run ./cmd/intend-bench -n $(BENCH_N)
	@if [ -d /dev/shm ]; then $(GO) run ./cmd/intend-bench -n $(BENCH_N) -files /dev/shm; fi
	@if [ -d /dev/shm ]; then $(GO) run ./cmd/intend-bench -n $(BENCH_N) -files /dev/shm -external 1; fi   # P1–P5 on an executor without database credentials
	$(GO) run ./cmd/intend-bench -n 0 -lsm 1000   # P7: 1,000 service instances at once, then single creates

clean: ## remove build output and the embedded deploy's state
	rm -rf bin data examples/*/data
