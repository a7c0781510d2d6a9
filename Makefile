# intend — build, test and run. `make demo` and `make test` are all a fresh
# machine needs: `make tools` installs what is missing.

SHELL        := /bin/bash
GO           ?= go
TOOLS        ?= $(CURDIR)/.tools
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL_SERVER_VERSION := v1.29.1
STATICCHECK_VERSION  := v0.8.2
HELM_VERSION         := v3.22.0
OAPI_CODEGEN_VERSION := v2.8.2
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.5.1
CUE_VERSION          := v0.17.1
PROTOC_GEN_GO      := $(TOOLS)/bin/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(TOOLS)/bin/protoc-gen-go-grpc
CUE                := $(TOOLS)/bin/cue
TEMPORAL     := $(TOOLS)/bin/temporal
STATICCHECK  := $(TOOLS)/bin/staticcheck
HELM         := $(TOOLS)/bin/helm
OAPI_CODEGEN := $(TOOLS)/bin/oapi-codegen
TEMPORAL_SERVER   := $(TOOLS)/bin/temporal-server
TEMPORAL_SQL_TOOL := $(TOOLS)/bin/temporal-sql-tool
TEMPORAL_UI_VERSION := v2.42.1
TEMPORAL_UI       := $(TOOLS)/bin/temporal-ui
VERSION      ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
TEST_TIMEOUT ?= 30m

export INTEND_TEMPORAL_CLI := $(TEMPORAL)
export INTEND_HELM := $(HELM)
export INTEND_OAPI_CODEGEN := $(OAPI_CODEGEN)
export INTEND_TEMPORAL_SERVER := $(TEMPORAL_SERVER)
export INTEND_TEMPORAL_SQL_TOOL := $(TEMPORAL_SQL_TOOL)
export INTEND_TEMPORAL_UI := $(TEMPORAL_UI)
export INTEND_CUE := $(CUE)

.PHONY: all build test demo tools postgres sshd systemd prometheus helm oapi-codegen chromium apiservers netconfd ociregistry plugintools cue proto python-plugins lint staticcheck bench bench-delay fuzz clean help

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/intend
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/intend ./cmd/intend

tools: $(TEMPORAL) $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL) $(TEMPORAL_UI) postgres sshd systemd prometheus helm oapi-codegen chromium apiservers netconfd ociregistry plugintools cue ## install the pinned Temporal CLI, server and UI, Helm, oapi-codegen, PostgreSQL, OpenSSH server, systemd-analyze, Prometheus, Chromium, the REST adapter's test servers, netconfd, the OCI registry, the plugin toolchain and cue when missing

# The Temporal CLI is built from source with `go install` (nothing is
# downloaded from GitHub releases); ~5 minutes on 2 cores, once.
$(TEMPORAL):
	@echo "building Temporal CLI $(TEMPORAL_CLI_VERSION) into $(TOOLS)/bin (takes a few minutes, once)"
	@mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# The standalone Temporal server and its SQL schema tool (production mode,
# on PostgreSQL: docs/production.md), built from source by one `go install`
# of the same module version the CLI embeds. `go install` names them after
# their directories (server, sql), so they are built into a scratch
# directory and renamed. The schemas travel inside the tool (its
# --schema-name flag), so nothing else is copied.
$(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL) &:
	@echo "building Temporal server $(TEMPORAL_SERVER_VERSION) into $(TOOLS)/bin (takes several minutes, once)"
	@mkdir -p $(TOOLS)/bin
	@set -e; tmp=$$(mktemp -d $(TOOLS)/bin/.temporal-server.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	GOBIN=$$tmp $(GO) install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) \
		go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION); \
	mv "$$tmp/server" $(TEMPORAL_SERVER); mv "$$tmp/sql" $(TEMPORAL_SQL_TOOL)

# Temporal's web UI for the standalone server (`intend dev-cluster`), the
# version the pinned CLI bundles; its module carries the built web assets.
$(TEMPORAL_UI):
	@echo "building Temporal UI server $(TEMPORAL_UI_VERSION) into $(TOOLS)/bin (takes a few minutes, once)"
	@mkdir -p $(TOOLS)/bin
	@set -e; tmp=$$(mktemp -d $(TOOLS)/bin/.temporal-ui.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	GOBIN=$$tmp $(GO) install github.com/temporalio/ui-server/v2/cmd/server@$(TEMPORAL_UI_VERSION); \
	mv "$$tmp/server" $(TEMPORAL_UI)

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

# The console's tests drive a headless Chromium (console/browser_test.go).
chromium: ## make sure Debian's chromium exists
	@if command -v chromium >/dev/null 2>&1; then \
		echo "Chromium: $$(command -v chromium)"; \
	else \
		echo "Chromium missing: installing Debian's chromium with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y chromium; \
	fi

# The rest:: adapter is tested against real HTTP APIs (adapters/rest):
# RabbitMQ's management API, etcd's v3 JSON gateway, Prometheus
# Alertmanager's silences API, and nginx in front of them for throttling
# and API-key checks. The tests start their own servers on loopback ports.
APISERVERS := /usr/sbin/rabbitmq-server:rabbitmq-server /usr/bin/etcd:etcd-server \
	/usr/bin/prometheus-alertmanager:prometheus-alertmanager /usr/sbin/nginx:nginx-light
apiservers: ## make sure RabbitMQ, etcd, Alertmanager and nginx exist (the rest:: adapter's tests)
	@missing=; for p in $(APISERVERS); do [ -x "$${p%%:*}" ] || missing="$$missing $${p#*:}"; done; \
	if [ -z "$$missing" ]; then \
		echo "REST test servers: rabbitmq-server, etcd, prometheus-alertmanager, nginx"; \
	else \
		echo "REST test servers missing:$$missing: installing with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

# The netconf:: adapter is tested against yuma123's netconfd, reached over
# sshd's netconf subsystem (adapters/netconf). Not the netconfd-module-*
# packages: their ietf-interfaces instrumentation aborts here.
netconfd: ## make sure netconfd and netconf-subsystem (yuma123) exist
	@if [ -x /usr/sbin/netconfd ] && [ -x /usr/sbin/netconf-subsystem ]; then \
		echo "netconfd: /usr/sbin/netconfd"; \
	else \
		echo "netconfd missing: installing with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends netconfd; \
	fi

# Modules from a CUE module registry (internal/modules) are tested against
# Debian's docker-registry (CNCF distribution 2.8), started by
# internal/ocitest on a loopback port, with modules `cue mod publish` put there.
ociregistry: ## make sure docker-registry (an OCI registry, for the modules' tests) exists
	@if [ -x /usr/bin/docker-registry ]; then \
		echo "OCI registry: /usr/bin/docker-registry"; \
	else \
		echo "docker-registry missing: installing with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends docker-registry; \
	fi

# Adapter plugins (adapters/plugin): the protocol's stubs are generated by
# Debian's protoc (3.21, which matches Debian's python3-protobuf runtime)
# with the pinned Go generators; Python plugins run on Debian's own
# /usr/bin/python3 with python3-grpcio and python3-protobuf.
PLUGINTOOLS := /usr/bin/protoc:protobuf-compiler /usr/lib/python3/dist-packages/grpc:python3-grpcio \
	/usr/lib/python3/dist-packages/google/protobuf:python3-protobuf
plugintools: $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## make sure protoc, the Go generators and Debian's python3-grpcio and python3-protobuf exist
	@missing=; for p in $(PLUGINTOOLS); do [ -e "$${p%%:*}" ] || missing="$$missing $${p#*:}"; done; \
	if [ -z "$$missing" ]; then \
		echo "plugin toolchain: protoc, python3-grpcio, python3-protobuf"; \
	else \
		echo "plugin toolchain missing:$$missing: installing with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi

$(PROTOC_GEN_GO):
	@mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(PROTOC_GEN_GO_GRPC):
	@mkdir -p $(TOOLS)/bin
	cd /tmp && GOBIN=$(TOOLS)/bin GOFLAGS=-mod=mod $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

proto: plugintools ## regenerate the adapter plugin protocol's Go and Python stubs (committed)
	PATH=$(TOOLS)/bin:$$PATH protoc -I adapters/plugin/adapterv1 \
		--go_out=adapters/plugin/adapterv1 --go_opt=paths=source_relative \
		--go-grpc_out=adapters/plugin/adapterv1 --go-grpc_opt=paths=source_relative \
		adapters/plugin/adapterv1/adapter.proto
	protoc -I adapters/plugin/adapterv1 --python_out=adapters/plugin/python/intend_plugin adapters/plugin/adapterv1/adapter.proto
	protoc -I adapters/plugin/python/proto --python_out=adapters/plugin/python/intend_plugin adapters/plugin/python/proto/health.proto

# Python adapter plugins: zipapps run by Debian's /usr/bin/python3 (the
# tests build their own from the sources, internal/pythonplugin).
python-plugins: ## build the Python adapter plugins (bin/plugins/ini.pyz, and the ini module's artifact)
	/usr/bin/python3 adapters/plugin/python/build_zipapp.py -o bin/plugins/ini.pyz adapters/plugin/python/examples/ini
	mkdir -p examples/python-plugin/module/dist
	cp bin/plugins/ini.pyz examples/python-plugin/module/dist/ini.pyz

# The cue command, at the version of cuelang.org/go in go.mod: the tests
# run `cue vet` on a fresh `intend init` project and on every example.
cue: $(CUE) ## install the pinned cue command into .tools/bin
$(CUE):
	@mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install cuelang.org/go/cmd/cue@$(CUE_VERSION)

# deploy's tests check the systemd units with systemd-analyze.
systemd: ## make sure systemd-analyze exists
	@if command -v systemd-analyze >/dev/null 2>&1; then \
		echo "systemd-analyze: $$(command -v systemd-analyze)"; \
	else \
		echo "systemd-analyze missing: installing systemd with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y systemd; \
	fi

# Helm checks deploy/helm/intend (deploy/helm's tests run helm lint and
# helm template). Built from source with `go install` like the Temporal CLI:
# 3 CPU-minutes, 17 minutes on 2 cores shared with a benchmark; once.
helm: $(HELM) ## build the pinned Helm into .tools/bin when missing

$(HELM):
	@echo "building Helm $(HELM_VERSION) into $(TOOLS)/bin (takes a few minutes, once)"
	@mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# api's TestOpenAPIGenerates runs the pinned oapi-codegen at its defaults on
# the served OpenAPI document and builds the output in the module
# api/testdata/oapi-codegen, whose dependencies are downloaded here so the
# test builds offline. Seconds, once.
# Installed again when .tools/bin holds another version (the test refuses
# any but the pinned one).
oapi-codegen: ## install the pinned oapi-codegen into .tools/bin and the modules its output imports
	@if ! $(OAPI_CODEGEN) -version 2>/dev/null | grep -qx '$(OAPI_CODEGEN_VERSION)'; then \
		mkdir -p $(TOOLS)/bin && \
		echo "installing oapi-codegen $(OAPI_CODEGEN_VERSION) into $(TOOLS)/bin" && \
		GOBIN=$(TOOLS)/bin $(GO) install github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$(OAPI_CODEGEN_VERSION); \
	else echo "oapi-codegen: $(OAPI_CODEGEN) $(OAPI_CODEGEN_VERSION)"; fi
	cd api/testdata/oapi-codegen && GOWORK=off $(GO) mod download

# deploy/prometheus's rules are checked and unit-tested with promtool
# (deploy/prometheus/prometheus_test.go), and `intend dev-cluster` runs a
# Prometheus that scrapes the cluster. Debian's prometheus package brings both; the package
# may start a prometheus service (where policy-rc.d allows it), which
# nothing here uses or minds: the tests bind ports of their own.
prometheus: ## make sure prometheus and promtool exist
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then \
		echo "promtool: $$(command -v promtool), prometheus: $$(command -v prometheus)"; \
	else \
		echo "prometheus or promtool missing: installing Debian's prometheus package with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends prometheus; \
		command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || \
			{ echo "prometheus or promtool still missing after installing the prometheus package"; exit 1; }; \
	fi

# staticcheck, built from source with `go install` (seconds); installed
# again when .tools/bin holds another version, so a bump of
# STATICCHECK_VERSION takes effect on machines that kept .tools.
staticcheck: ## install the pinned staticcheck into .tools/bin when missing
	@if ! $(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))'; then \
		mkdir -p $(TOOLS)/bin && \
		echo "installing staticcheck $(STATICCHECK_VERSION) into $(TOOLS)/bin" && \
		GOBIN=$(TOOLS)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

# lint runs first: a vet or staticcheck finding fails `make test` (and CI).
test: lint tools ## go vet and staticcheck, then the whole test suite against real PostgreSQL and Temporal
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

lint: staticcheck ## go vet and staticcheck (pinned); make test runs it first
	$(GO) vet ./...
	$(STATICCHECK) ./...

BENCH_N ?= 10000
bench: tools ## hot-path benchmarks, then the end-to-end deploy benchmark (docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -skip Interfaces200 -benchmem ./adapters/... ./internal/intent/
	$(GO) test -run '^$$' -bench Interfaces200 -benchtime 3x ./adapters/netconf/   # issue 29: 200 NETCONF list entries on one netconfd, created in one batch then a no-op pass; CPU per resource next to fs::File's
	CI=$${CI:-1} $(GO) test -run '^$$' -bench 'RunOne|DecodeBatch' -benchmem ./activities/agent/   # an executor's attempt on an unchanged file, a batch of 100 decoded
	$(GO) test -run '^$$' -bench PluginOverhead -benchtime 2000x ./internal/pluginhost/   # issue 30: an adapter through a plugin's socket against in process, batches of 100 (observe + update each); the bar is +50 µs per resource
	$(GO) test -run '^$$' -bench 'PluginStart|TenPlugins' -benchtime 10x ./internal/pluginhost/   # issue 30: a Go plugin's first call (start, handshake, Describe, Observe); the executor's RSS with 10 plugins
	$(GO) test -run '^$$' -bench ObserveUpdate -benchtime 30x ./internal/pythonplugin/   # issue 30: the Python SDK's CPU per resource (observe + update, batches of 100), no-op type and ini::Option
	$(GO) test -run '^$$' -bench P8 -benchtime 5x -benchmem ./internal/compiler/   # P8: compile of 1 / 1,000 service instances
	CI=$${CI:-1} $(GO) test -run '^$$' -bench 'Authenticate|GuardedRead' -benchtime 2000x ./api/   # what authentication adds per request
	CI=$${CI:-1} $(GO) test -run '^$$' -bench ConsolePages -benchtime 20x ./console/   # the console's pages at 10,000 resources
	$(GO) test -run '^$$' -bench AllocateInAFullPool -benchtime 20x ./internal/store/   # a create allocating from pools holding 1,000 and 99,000 values
	$(GO) run ./cmd/intend-bench -n $(BENCH_N)
	@if [ -d /dev/shm ]; then $(GO) run ./cmd/intend-bench -n $(BENCH_N) -files /dev/shm; fi
	@if [ -d /dev/shm ]; then $(GO) run ./cmd/intend-bench -n $(BENCH_N) -files /dev/shm -external 1; fi   # P1–P5 on an executor without database credentials
	@if [ -d /dev/shm ]; then $(GO) run ./cmd/intend-bench -n $(BENCH_N) -files /dev/shm -engine server; fi   # P1–P5 on the standalone Temporal server on PostgreSQL
	@if [ -d /dev/shm ]; then for a in 2 4; do $(GO) run ./cmd/intend-bench -n $(BENCH_N) -files /dev/shm -external 1 -agents $$a; done; fi   # the horizontal curve: 2 and 4 agents, an executor each
	$(GO) run ./cmd/intend-bench -n 0 -lsm 1000   # P7: 1,000 service instances at once, then single creates
	$(GO) run ./cmd/intend-bench -n 0 -lsm 1000 -engine server   # P7 on the standalone server
	$(GO) run ./cmd/intend-bench -n 0 -preview 1000   # P13: preview of a model change over 1,000 live instances
	$(GO) run ./cmd/intend-bench -n 0 -embedded 100   # P7e: an instance with 100 embedded elements, create → up and one element updated → up
	$(GO) run ./cmd/intend-bench -n 0 -p9 5000    # P9: intend deploy of one change among 5,000 resources, whole command
	@if [ -d /dev/shm ]; then $(GO) run ./cmd/intend-bench -n 20000 -agents 1000 -files /dev/shm; fi   # issue 28: 1,000 agents of 20 resources, one embedded executor
	$(GO) run ./cmd/intend-bench -rest 10000   # issue 29: 10,000 rest::Object over 100 agents against nginx behind 20 ms per call, 100 requests in flight: create, repair, update against the ideal

bench-delay: tools ## issue 28's curve: 10,000 bench::Delay resources at 10 ms per call over 1, 4, 16, 64 and 256 agents (one pool of executors), the CPU floor (1 µs), and 1 s per call where the ideal is above that floor
	for a in 1 4 16 64 256; do $(GO) run ./cmd/intend-bench -n 10000 -delay 10ms -agents $$a || exit 1; done
	for a in 16 256; do $(GO) run ./cmd/intend-bench -n 10000 -delay 1us -agents $$a || exit 1; done
	$(GO) run ./cmd/intend-bench -n 10000 -delay 100ms -agents 16
	for a in 64 256; do $(GO) run ./cmd/intend-bench -n 10000 -delay 1s -agents $$a || exit 1; done

clean: ## remove build output and the embedded deploy's state
	rm -rf bin data examples/*/data
