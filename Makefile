# Shale's build. `make run` and `make test` are the whole set-up on a fresh machine.
GO        ?= go
BIN       := bin/shale
DATA_DIR  ?= $(CURDIR)/data
PKGS      := ./...
# Fuzz targets run for FUZZTIME each; `make fuzz FUZZTIME=5m` for a longer session.
FUZZTIME  ?= 10s

.PHONY: all build run test test-deps test-k8s image bench fuzz lint proto clean chaos sim

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN) ./cmd/shale

# A single node (broker and controller in one process) on localhost:9092, data under ./data.
run: build
	$(BIN) serve --log.dirs=$(DATA_DIR)

# Installs what the tests need when it is missing, then vets and runs every test with -race,
# then the deployment's tests (test-k8s).
test: test-deps build
	$(GO) vet $(PKGS)
	$(GO) test -race -timeout 25m $(PKGS)
	$(MAKE) sim SEEDS=300
	$(MAKE) test-k8s

# The deterministic simulation (tests/sim, README "Simulation"): SEEDS seeds from
# SIM_START, without -race (`make test` also runs 20 under -race). A failing seed prints
# the command that replays it and the end of its event trace.
SEEDS     ?= 1000
SIM_START ?= 1
sim:
	$(GO) test -count=1 -timeout 0 -run 'TestSimulation$$' ./tests/sim/ -sim.seeds=$(SEEDS) -sim.start=$(SIM_START)

# The Helm chart and the image (tests/k8s, a module of its own so that Helm's and
# Kubernetes' dependencies stay out of go.mod): lint and render, strict decoding, a real
# kube-apiserver (built once into ~/.cache/shale by tests/k8s/build-apiserver.sh), the
# image built and inspected, and a rolling restart of the chart's configuration run as
# processes in network namespaces (root).
test-k8s: build
	@bash tests/k8s/build-apiserver.sh
	cd tests/k8s && $(GO) vet ./... && SHALE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 20m ./...

# The container image (deploy/image/Containerfile) with buildah, else podman; no registry
# is involved. IMAGE names it.
IMAGE     ?= localhost/shale:dev
image: build
	@bash deploy/image/build.sh $(IMAGE) $(BIN)

test-deps:
	@bash tests/deps.sh

# Fault injection against real processes in network namespaces (root; see README "Chaos
# testing"): both layouts, CHAOS_FAULTS faults each, the acks=1 demonstration, and the
# data-safety faults (topic recreated, DeleteRecords then a leader kill, retention under a
# lagging follower; alone: SHALE_CHAOS=data).
CHAOS_FAULTS ?= 11
# Then the power-cut run (FUSE; see tests/powerloss): POWERCUT_CUTS cuts of all three nodes
# (`make test` runs a short version: two cuts).
POWERCUT_CUTS ?= 10
chaos: test-deps build
	SHALE_CHAOS=full SHALE_CHAOS_FAULTS=$(CHAOS_FAULTS) SHALE_BIN=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -v -timeout 50m -run '^TestChaos' ./tests/chaos/
	POWERCUT=1 POWERCUT_CUTS=$(POWERCUT_CUTS) SHALE_BIN=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -v -timeout 30m ./tests/powerloss/...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2x ./log/
	$(BIN) bench compare --duration 5s

# Issue 25's scenarios, data on disk under .tmp/ (bench/RESULTS.md): e2e at half of peak
# for 120 s after more than the dirty limit, RF=1 and RF=3, writeback on and off, beside
# the null broker (about 15 minutes); a catch-up reader of a cold log beside tailing
# consumers (about 3 minutes).
.PHONY: bench-sustained bench-coldread
bench-sustained: build
	bench/sustained.sh
bench-coldread: build
	bench/coldread.sh

# Issue 29 (bench/RESULTS.md): a cluster link's copy throughput and a mirror's lag at half
# of the source's peak, two one-node clusters on loopback (about 5 minutes).
.PHONY: bench-mirror
bench-mirror: build
	bench/mirror.sh

# Issue 26 (bench/RESULTS.md): produce throughput while uploading, remote against local
# reads, and a wiped broker's rejoin with and without tiering, against a real S3 server
# (versitygw, built into ~/.cache/shale once; about 6 minutes, up to 25 GB under .tmp/).
.PHONY: bench-tiered
bench-tiered: build
	bench/tiered.sh

fuzz:
	@bash tests/fuzz.sh $(FUZZTIME)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

proto:
	@bash controller/proto/generate.sh

clean:
	rm -rf bin $(DATA_DIR)
