# leaderwatch — the two commands a newcomer runs: `make rehearse` and `make test`.
# Every install step lives here (CI runs on a fresh clone; nothing is done by hand).
# Tools that are not Debian packages go into the git-ignored .tools/ directory.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

TOOLS       := $(CURDIR)/.tools
VENV        := $(TOOLS)/venv
PIP_PINS    := kubernetes-validate==1.37.0 \
               pandas==3.1.1 matplotlib==3.11.2 nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 \
               prometheus-client==0.26.0
# The Kubernetes version the manifests are validated against: the minor of the local
# control plane (lab/go/kube's pin, KUBE_VERSION in lab/lab.mk), which is also k8s-openapi's
# feature in both crates (tests/check/manifests.rs holds them equal). One estimate of GKE's
# regular channel, said once: docs/local-cluster.md.
K8S_VERSION = 1.$(KUBE_MINOR).0
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CARGO       ?= cargo
# The oldest Rust that builds leaderwatch (Cargo.toml's rust-version): make install checks it.
RUST_VERSION := $(shell sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)

# etcd and etcdctl are built from their own Go modules by the wrapper module in lab/go/etcd,
# at the version deploy/k8s/etcd/statefulset.yaml pins (3.6.14; see deps-etcd below).
ETCD_MOD    := lab/go/etcd

export ETCD_BIN ?= $(TOOLS)/bin/etcd
export PATH := $(TOOLS)/bin:$(PATH)

.PHONY: help deps deps-apt deps-py deps-etcd build install test-dockerfile image image-apt test-image test check test-etcd test-lab test-manifests test-shell test-notebook figures bench order-file fuzz crosscheck rehearse clean-tools

help:
	@echo "make rehearse   install what is missing, build, run leaderwatch rehearse on a local 3-member etcd"
	@echo "make test       install what is missing and run the whole suite: the three tiers below, then the notebook"
	@echo "make check      tier 1, the inner loop (under 2 min warm): cargo fmt --check, clippy -D warnings on both"
	@echo "                crates, the unit tests and every test that needs no etcd, root or network, the manifests, shellcheck"
	@echo "make test-etcd  tier 2: the tests on real local etcd 3.6.14 members (tests/etcd)"
	@echo "make test-lab   tier 3 (root): acceptance, the Kubernetes tests, the image, the in-cluster tests (docs/local-cluster.md)"
	@echo "make deps       only install what is missing (shellcheck, promtool; the .tools/ venv;"
	@echo "                etcd + etcdctl 3.6.14 and the tests' independent clients lw-etcd-writer and lw-etcd-locker, built from"
	@echo "                lab/go/etcd with Go >= 1.25 and the module proxy)"
	@echo "make install    checks cargo, then cargo install --locked --path . (leaderwatch on the PATH, ~/.cargo/bin; installs nothing else)"
	@echo "make test-dockerfile  deploy/Dockerfile's build stage compiles from exactly the files it copies; base images by digest (in make test)"
	@echo "make image      the container image, daemonless (umoci, Debian packages): OCI layout target/image/oci; IMAGE_ARCH=amd64|arm64"
	@echo "make cross-bins the other architecture's binary (arm64 here), cross-compiled, dev profile (for test-cross)"
	@echo "make test-cross the amd64 and arm64 images checked: label, ELF, packages, run under qemu-user (in make test)"
	@echo "make bench      benchmarks, each figure beside its goal: size, core, soak, sample, instructions per round, Prometheus side by side, observer cost, disk use, 3/5/7 members, the image"
	@echo "make order-file rewrite build/sampler.order, the sampler's functions the release link puts first (lower RSS), from a callgrind run"
	@echo "make fuzz       fuzz /metrics extraction for FUZZ_SECONDS (default 300)"
	@echo "make crosscheck only the member-health quantile against promtool (also in make check)"
	@echo "make kube-tools build Kubernetes $(KUBE_VERSION) (control plane, kubelet, kube-proxy) and the nodes' runtime (containerd, runc, CNI, CoreDNS) from lab/go, and lw-lab (docs/local-cluster.md)"
	@echo "make kube-up    start a local cluster in the background (KUBECONFIG=.tools/lab/kubeconfig); make kube-down stops it"
	@echo "make acceptance T-056's acceptance criteria 1-8 and §6 on a fresh local cluster (in make test-lab)"
	@echo "make rehearse-kube  the GKE sitting on a fresh local cluster by leaderwatch sitting with the built image, 20 min at rest (ARGS go to sitting;"
	@echo "                AS=operator: as the operator role only, from outside the clone, the whole hand-off into data/lab-day-<UTC>/)"
	@echo "make registry   the tests' container registry (go-containerregistry's, lab/go/registry) into .tools/bin (in make kube-tools)"
	@echo "make measure-kube   leaderwatch measure from this host on a fresh local cluster, --reach pod-ip (ARGS go to measure)"
	@echo "make test-kube  leaderwatch's Kubernetes tests on the real local control plane (in make test-lab)"
	@echo "make test-faults  faults below etcd (lw-lab fault) against leaderwatch's causes (in make test-lab)"
	@echo "make fault-runs MODE=sweep|repeat  the committed fault runs: the fsync sweep, or each fault 5 times (data/fault-*)"
	@echo "make test-image the image under runc with the pods' securityContext (in make test-lab)"
	@echo "make test-in-cluster  the Job and the Deployment from the image on the local cluster, Prometheus scraping (in make test-lab)"
	@echo "make test-sitting-day the sitting from a laptop: installed, operator role only, expiring token, API restart, failures (in make test-lab)"

deps: deps-apt deps-py deps-etcd

# shellcheck for the scripts, Debian's prometheus (promtool) for the quantile cross-check,
# the alert rule's tests and the exporter's scrape test. (No protoc: etcd-client's build
# script takes the protoc-bin-vendored crate's, vendor/README.md.) `apt-get update` runs
# first because a fresh machine has no package lists.
deps-apt:
	@missing=""; \
	command -v shellcheck >/dev/null || missing="$$missing shellcheck"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --install-recommends $$missing; \
	fi

# The stamp records the pins, so changing a pin reinstalls and a second run does nothing.
deps-py: $(TOOLS)/.py-deps

$(TOOLS)/.py-deps: Makefile
	@mkdir -p $(TOOLS)/bin
	@[ -x $(VENV)/bin/python ] || python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check $(PIP_PINS)
	@ln -sf $(VENV)/bin/kubernetes-validate $(TOOLS)/bin/kubernetes-validate
	@touch $@

# etcd and etcdctl from lab/go/etcd (a wrapper module: etcd's own go.mod files carry
# replace directives, so `go install ...@v3.6.14` is refused), lw-etcd-writer
# (lab/go/etcd/writer: the tests' independent etcd client, Go's clientv3) and lw-etcd-locker
# (lab/go/etcd/locker: the tests' independent lock client, clientv3's concurrency.Mutex). The
# stamp records the sha256 of go.mod, go.sum and the two programs: touching them without a change does
# not rebuild, changing any does, and so does a missing binary. Cold (empty Go caches, 73 modules to download)
# the two builds took 43 s on 2 cores, warm 3.8 s (2026-12-01). Each binary is written beside its
# final name and renamed, so an interrupted build never leaves half a binary (nor writes
# through an old symlink into the venv).
ETCD_STAMP := $(TOOLS)/.etcd-go
ETCD_GO    := $(shell sed -n 's/^go //p' $(ETCD_MOD)/go.mod)
deps-etcd: $(ETCD_STAMP)

$(ETCD_STAMP): $(ETCD_MOD)/go.mod $(ETCD_MOD)/go.sum $(ETCD_MOD)/writer/main.go $(ETCD_MOD)/locker/main.go $(if $(and $(wildcard $(TOOLS)/bin/etcd),$(wildcard $(TOOLS)/bin/etcdctl),$(wildcard $(TOOLS)/bin/lw-etcd-writer),$(wildcard $(TOOLS)/bin/lw-etcd-locker)),,etcd-binaries-missing)
	@command -v go >/dev/null || { echo "deps: \`go\` not found on PATH: etcd 3.6.14 is built from $(ETCD_MOD) and needs Go >= $(ETCD_GO) (go.mod) and the Go module proxy" >&2; exit 1; }
	@mkdir -p $(TOOLS)/bin
	@if [ -x $(TOOLS)/bin/etcd ] && [ -x $(TOOLS)/bin/etcdctl ] && [ -x $(TOOLS)/bin/lw-etcd-writer ] && [ -x $(TOOLS)/bin/lw-etcd-locker ] && [ -f $@ ] && \
	    (cd $(ETCD_MOD) && sha256sum --status -c $@); then \
	  echo "deps: $(ETCD_MOD)/go.mod, go.sum, writer/main.go and locker/main.go unchanged, etcd not rebuilt"; touch $@; exit 0; \
	fi; \
	echo "deps: building etcd, etcdctl, lw-etcd-writer and lw-etcd-locker from $(ETCD_MOD) ($$(go env GOVERSION))"; \
	cd $(ETCD_MOD); \
	for m in etcd:go.etcd.io/etcd/server/v3 etcdctl:go.etcd.io/etcd/etcdctl/v3 lw-etcd-writer:./writer lw-etcd-locker:./locker; do \
	  b=$${m%%:*}; pkg=$${m#*:}; \
	  CGO_ENABLED=0 go build -trimpath -o $(TOOLS)/bin/$$b.new $$pkg || \
	    { echo "deps: go build $$pkg (module $(ETCD_MOD)) failed: go's error is above" >&2; rm -f $(TOOLS)/bin/$$b.new; exit 1; }; \
	  mv -f $(TOOLS)/bin/$$b.new $(TOOLS)/bin/$$b; \
	done; \
	sha256sum go.mod go.sum writer/main.go locker/main.go >$@
	@# sed, not head: head may close the pipe before etcd has written, SIGPIPE kills etcd (141)
	@# and pipefail fails the install step (seen once on a fresh clone).
	@$(TOOLS)/bin/etcd --version | sed -n 1p

.PHONY: etcd-binaries-missing
etcd-binaries-missing:

build:
	$(CARGO) build --release --locked

# leaderwatch on the PATH (cargo's bin directory, ~/.cargo/bin): `leaderwatch sitting` then
# runs from any directory and finds this checkout's data/ and README (docs/gke-sitting.md).
# Any laptop with Rust (Linux, macOS): it installs nothing else, and checks before it builds.
.PHONY: install
install:
	@command -v $(CARGO) >/dev/null || { echo "install: cargo not found: Rust $(RUST_VERSION) or newer, https://rustup.rs" >&2; exit 2; }
	@v=$$($(CARGO) --version | sed -n 's/^cargo \([0-9]*\.[0-9]*\).*/\1/p'); \
	  [ "$$(printf '%s\n%s\n' "$(RUST_VERSION)" "$$v" | sort -V | head -n1)" = "$(RUST_VERSION)" ] || \
	  { echo "install: cargo $$v is older than Rust $(RUST_VERSION) (Cargo.toml's rust-version): rustup update" >&2; exit 2; }
	$(CARGO) install --locked --path .

# The container image, built without a daemon or a pull (deploy/image/build.sh): the release
# binary and Debian 12's base-files, netbase, tzdata, ca-certificates, libc6 and libgcc-s1
# as a one-layer OCI image layout in target/image/oci (umoci), checked by skopeo, which also
# pushes it (README, "The sitting on GKE"). runc runs it in the tests.
IMAGE_DIR := $(CURDIR)/target/image
image-apt:
	@missing=""; \
	for t in umoci skopeo runc; do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "image: installing$$missing"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# IMAGE_ARCH: the nodes' architecture, amd64 (GKE's default nodes) or arm64; a binary for
# another than this machine's is cross-compiled (deploy/image/cross-build.sh: rustup's target
# and Debian's cross gcc, added if missing), and the image takes that architecture's packages.
IMAGE_ARCH ?= amd64
image: image-apt
	deploy/image/cross-build.sh $(IMAGE_ARCH) $(IMAGE_DIR)/leaderwatch release
	$(SUDO) DEB_CACHE=$(TOOLS)/debs IMAGE_ARCH=$(IMAGE_ARCH) deploy/image/build.sh $(IMAGE_DIR)/leaderwatch $(IMAGE_DIR)

# The image the tests run (target/image-test): the same recipe (deploy/image/build.sh) on
# the stripped debug binary the tests built anyway, so that make test does not pay the
# release build's fat LTO (about 5 minutes on 2 cores; docs/internals.md, "Test tiers").
# `make image` builds the one that ships, from the release binary; its size is make bench's.
TEST_IMAGE_DIR := $(CURDIR)/target/image-test
# target/debug/leaderwatch as the tests build it (the test profile): a plain `cargo build`
# would compile the crate once more under the dev profile (45 s on a fresh clone).
TEST_BIN := $(CARGO) test --locked --no-run --test check
# test-lab builds it before its lanes and runs them with TEST_IMAGE_BUILT=1: lanes side by
# side must not build it again (each build is a new tag; one lane's cluster imported the
# image under a tag the other's build had just replaced: `ctr ... not found`).
.PHONY: test-image-build
ifeq ($(TEST_IMAGE_BUILT),1)
test-image-build: ;
else
test-image-build: image-apt deps-apt
	$(TEST_BIN)
	@mkdir -p $(TEST_IMAGE_DIR)
	strip -o $(TEST_IMAGE_DIR)/leaderwatch target/debug/leaderwatch
	$(SUDO) DEB_CACHE=$(TOOLS)/debs deploy/image/build.sh $(TEST_IMAGE_DIR)/leaderwatch $(TEST_IMAGE_DIR)
endif

# deploy/Dockerfile's build stage compiles from exactly the files it copies (no engine
# needed: deploy/image/check-dockerfile.sh lays them out and runs cargo check there, and
# shows that leaving the sitting's manifests out fails). make test runs it beside the lab.
.PHONY: test-dockerfile
test-dockerfile: deps-apt
	deploy/image/check-dockerfile.sh

# The other architecture's binary (arm64 here) in the dev profile, cross-compiled by make
# image's route, for test-cross. make test builds it beside the lab, before test-etcd (a
# fresh clone's is three minutes of compiling, which the lab's tests need not wait for).
# (This machine's own architecture is the tests' image, test-image-build.)
CROSS_DIR := $(CURDIR)/target/image-cross
CROSS_ARCH := $(if $(filter arm64,$(shell dpkg --print-architecture 2>/dev/null)),amd64,arm64)
.PHONY: cross-bins
cross-bins:
	deploy/image/cross-build.sh $(CROSS_ARCH) $(CROSS_DIR)/$(CROSS_ARCH)/leaderwatch dev

# The images for both architectures, checked by deploy/image/check-cross.sh: this machine's
# (the tests' image) and the other's, built by make image's route (cross-build.sh, then
# build.sh) in the dev profile: each one's label, its binary's and libc's ELF machine, its
# packages' architecture, the binary run under qemu-user with the image's own libraries,
# and a binary of the wrong architecture refused. make test runs it beside the lab.
.PHONY: test-cross test-cross-steps
test-cross: image-apt test-image-build cross-bins
	@$(MAKE) --no-print-directory test-cross-steps

# What test-cross runs once its images' binaries are built: make test calls it beside the
# lab, where rebuilding the tests' image (which the lab's clusters import) is not allowed.
test-cross-steps:
	@command -v qemu-aarch64 >/dev/null && command -v qemu-x86_64 >/dev/null || \
	  { $(SUDO) apt-get update -qq; DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends qemu-user; }
	SUDO=$(SUDO) DEB_CACHE=$(TOOLS)/debs deploy/image/check-cross.sh $(CROSS_DIR) $(TEST_IMAGE_DIR)

# The image under runc as the kubelet runs it (tests/lab/image.rs; root, runc, umoci).
test-image: test-image-build deps
	LEADERWATCH_IMAGE_DIR=$(TEST_IMAGE_DIR) $(CARGO) test --locked --test lab -- --ignored image::

# The tiers (docs/internals.md, "Test tiers"). `make test` runs check first and stops if it
# fails, then test-etcd and test-notebook beside test-lab (test-beside-lab); each prints
# one line: passed or FAILED, its time and how many tests passed, and under a FAILED line
# each failed test with where and why it panicked (.ci/failures.awk), so the end of a CI
# log, which is what CI keeps, names them. $(call tier,NAME,TARGETS) runs `make TARGETS`, its output also in
# target/tier-NAME.log.
define tier
@mkdir -p target; s=$$(date +%s); \
if $(MAKE) --no-print-directory $(2) 2>&1 | tee target/tier-$(1).log; then r=passed; else r=FAILED; fi; \
n=$$(awk '/^test result:/ {p += $$4} /^acceptance: [0-9]+ PASS/ {a += $$2} END {printf "%d tests passed", p; if (a) printf ", %d acceptance criteria", a}' target/tier-$(1).log); \
line="make $(1): $$r in $$(( $$(date +%s) - s )) s ($$n; log: target/tier-$(1).log)"; \
echo "$$line"; echo "$$line" >>target/test-summary.txt; \
if [ $$r = FAILED ]; then awk -f .ci/failures.awk target/tier-$(1).log | tee -a target/test-summary.txt; fi; \
[ $$r = passed ]
endef

test:
	@mkdir -p target; : >target/test-summary.txt; s=$$(date +%s); r=0; \
	$(MAKE) --no-print-directory deps && $(MAKE) --no-print-directory check && \
	  $(MAKE) --no-print-directory test-beside-lab || r=$$?; \
	echo; cat target/test-summary.txt; \
	echo "make test: $$([ $$r = 0 ] && echo passed || echo FAILED) in $$(( $$(date +%s) - s )) s"; exit $$r

# After check, test-etcd and then the notebook run beside test-lab's lanes a and c, and
# its lane b (the faults) starts when they are done (lab/lab.mk); the Dockerfile's check,
# a cargo check at a lower priority, comes after. The lab's tests mostly wait on probes,
# grace periods and scrapes, and the sides share no port, no directory and no cluster. The
# etcd side writes into
# target/test-beside-lab.log (its tiers' own logs as well); it is printed if it fails. The
# builds both need come first. Both must pass. A Ctrl-C reaches both, as they run in make's
# process group. Under `bash -e` (.SHELLFLAGS) each exit status is taken with `|| x=$?`:
# a bare `wait` that failed ended the recipe before the etcd side's log was printed (CI,
# stop 56), and a failed lane a would have left the other lanes running.
test-beside-lab: kube-tools test-image-build deps
	@# Every build first (on a fresh machine, Kubernetes' Go builds take minutes), so no
	@# compiler shares the cores with a timed test.
	$(CARGO) test --locked --no-run --test etcd --test lab
	@rm -f target/beside-lab.done; \
	( r=0; { nice -n 10 $(MAKE) --no-print-directory cross-bins && $(MAKE) --no-print-directory test-etcd && \
	    $(MAKE) --no-print-directory test-notebook; } || r=$$?; \
	  echo $$r >target/beside-lab.done; \
	  if [ $$r = 0 ]; then nice -n 5 $(MAKE) --no-print-directory test-dockerfile || r=$$?; fi; \
	  if [ $$r = 0 ]; then nice -n 10 $(MAKE) --no-print-directory test-cross-steps || r=$$?; fi; exit $$r ) \
	  >target/test-beside-lab.log 2>&1 & b=$$!; \
	l=0; $(MAKE) --no-print-directory test-lab LAB_LANE_B_AFTER=$(CURDIR)/target/beside-lab.done || l=$$?; \
	e=0; wait $$b || e=$$?; \
	if [ $$e != 0 ]; then echo "test-etcd or test-notebook failed (target/test-beside-lab.log):"; \
	  tail -n 150 target/test-beside-lab.log; fi; \
	[ $$l = 0 ] && [ $$e = 0 ]

# Tier 1, the inner loop: no etcd, no root, no network. deps-apt brings shellcheck and
# promtool; deps-py the venv kubernetes-validate runs in.
check:
	$(call tier,check,check-steps)

.PHONY: check-steps test-etcd-steps test-lab-steps
check-steps: deps-apt deps-py
	$(CARGO) fmt --check
	$(CARGO) fmt --check --manifest-path lab/Cargo.toml
	@# tests/etcd and tests/lab are `test = false` (plain cargo test skips them), and
	@# --all-targets leaves them out even beside --test: linted in a call of their own
	@# (regression: lint in both had gone unseen since they were split off).
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) clippy --locked --test etcd --test lab -- -D warnings
	$(CARGO) clippy --locked --manifest-path lab/Cargo.toml --all-targets -- -D warnings
	@# The #[ignore]d tests of tests/check need promtool, which deps-apt installed.
	$(CARGO) test --locked --lib --bins --test check -- --include-ignored
	$(CARGO) test --locked --manifest-path lab/Cargo.toml --bins
	@$(MAKE) --no-print-directory test-manifests test-shell

# Tier 2: real local etcd 3.6.14 members (deps-etcd builds them); the exporter's test
# (#[ignore]d in plain cargo test) also needs Debian's prometheus and the venv's
# prometheus_client.
test-etcd:
	$(call tier,test-etcd,test-etcd-steps)

test-etcd-steps: deps
	$(CARGO) test --locked --test etcd -- --include-ignored

# Tier 3 (root): the local cluster, the image under runc and as pods (lab/lab.mk).
test-lab:
	$(call tier,test-lab,test-lab-steps)

# Benchmarks (not tests), about 40 minutes (14 of them building): binary size, the core (3/5/7 members), a 100k-round
# soak, `sample` as a user runs it, Prometheus side by side (Debian's prometheus package,
# installed by deps-apt) over 60 s and 300 s, the observer cost on the members, and the
# continuous sampler's disk use (5 minutes at 1 s, bytes per row, gzip, --retain 30d). Each
# appends its figures, with their goals, to $(BENCH_SUMMARY), printed at the end.
BENCH_SUMMARY := $(CURDIR)/target/bench-summary.md
# The sampler's link order (build/sampler.order, read by build.rs): regenerate after the
# code or the dependencies changed much; `make bench` shows what it is worth (peak RSS).
order-file: deps build
	@[ -x /usr/bin/valgrind ] || { $(SUDO) apt-get update -qq; DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq valgrind; }
	bench/order-file.sh

bench: deps build image
	@[ -x /usr/bin/time ] && [ -x /usr/bin/valgrind ] || { $(SUDO) apt-get update -qq; DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq time valgrind; }
	@printf '| figure | measured | goal | |\n|---|---|---|---|\n' >$(BENCH_SUMMARY)
	@b=$$(stat -c %s target/release/leaderwatch); \
	  echo "| release binary (target/release/leaderwatch) | $$b bytes | <= 12,000,000 bytes | $$([ $$b -le 12000000 ] && echo met || echo 'NOT met') |" >>$(BENCH_SUMMARY)
	BENCH_SUMMARY=$(BENCH_SUMMARY) $(CARGO) bench --locked --bench core
	BENCH_SUMMARY=$(BENCH_SUMMARY) $(CARGO) bench --locked --bench soak
	@# cargo bench's profile (thin LTO, no link order) also writes target/release/leaderwatch:
	@# the scripts below measure the release binary, so cargo puts it back (nothing is rebuilt).
	$(CARGO) build --release --locked
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/sample-cost.sh
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/instructions.sh
	@# The benchmark runs its own Prometheus on a free port; a daemon on :9090 is left alone.
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/prometheus-vs-leaderwatch.sh
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/observer-cost.sh
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/lock-client.sh
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/disk-use.sh
	BENCH_SUMMARY=$(BENCH_SUMMARY) bench/members-scaling.sh
	BENCH_SUMMARY=$(BENCH_SUMMARY) IMAGE_DIR=$(IMAGE_DIR) $(if $(SUDO),$(SUDO) -E) bench/image.sh
	@v=$$($(ETCD_BIN) --version | sed -n 's/^etcd Version: //p'); \
	  echo; echo "make bench: every figure against its goal (local loopback, etcd $$v, $$(nproc) vCPU, $$(date -u +%FT%TZ))"; cat $(BENCH_SUMMARY)

# The member-health quantile against Prometheus's own histogram_quantile (promtool test
# rules, Debian's prometheus package, installed by deps-apt).
crosscheck: deps-apt
	$(CARGO) test --locked --test check -- --include-ignored health_props::

# Fuzzes /metrics extraction (cargo-fuzz; stable rustc with RUSTC_BOOTSTRAP for -Z flags).
FUZZ_SECONDS ?= 300
fuzz: deps
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	mkdir -p fuzz/corpus/metrics_extract && cp tests/fixtures/metrics-etcd-*.txt fuzz/corpus/metrics_extract/
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run metrics_extract -- -max_total_time=$(FUZZ_SECONDS) -max_len=262144

test-manifests: deps-py
	@# kubernetes-validate has no schemas for Managed Prometheus CRDs (PodMonitoring, Rules):
	@# those files are checked by typed tests (tests/check/leaderwatch_deploy.rs) instead.
	kubernetes-validate --strict -k $(K8S_VERSION) $$(find deploy/k8s -name '*.yaml' | sort | xargs grep -L '^apiVersion: monitoring.googleapis.com/')
	@# Negative control: the validator must reject an unknown field, or the line above proves nothing.
	@if kubernetes-validate --strict -k $(K8S_VERSION) tests/fixtures/invalid-statefulset.yaml >/dev/null 2>&1; then \
	  echo "FAIL: kubernetes-validate --strict accepted tests/fixtures/invalid-statefulset.yaml"; exit 1; \
	else echo "ok: kubernetes-validate --strict rejects an unknown field"; fi
	@# Acceptance criterion 7: standard-rwo appears nowhere in the etcd manifests.
	@if grep -n 'standard-rwo' deploy/k8s/etcd/*; then \
	  echo "FAIL: standard-rwo found under deploy/k8s/etcd (spec 5.7)"; exit 1; \
	else echo "ok: no standard-rwo under deploy/k8s/etcd"; fi

# Executes notebooks/baseline.ipynb on every committed run (headless, nbclient).
test-notebook: deps-py
	$(VENV)/bin/python tests/run_notebook.py

# Regenerates the notebook from notebooks/make_notebook.py and the figures of every run
# under data/ (or of RUNS="path/to/baseline.json ...").
RUNS ?= $(wildcard data/*/baseline.json)
figures: deps-py
	$(VENV)/bin/python notebooks/make_notebook.py
	@for r in $(RUNS); do d=$$(cd $$(dirname $$r) && pwd); echo "figures: $$d"; \
	  RUN_DIR=$$d $(VENV)/bin/python -c 'import nbformat; from nbclient import NotebookClient; nb = nbformat.read("notebooks/baseline.ipynb", as_version=4); NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()'; done

test-shell: deps-apt
	shellcheck deploy/k8s/apply.sh deploy/k8s/leaderwatch/baseline-from-log.sh deploy/image/rootfs.sh deploy/image/build.sh deploy/image/cross-build.sh deploy/image/check-cross.sh deploy/image/check-dockerfile.sh tests/stubs/kubectl .ci/run
	shellcheck -x bench/image.sh lab/in-cluster-sitting.sh lab/fault-runs.sh
	@# Negative control: an unquoted expansion must be caught, or the line above proves nothing.
	@t=$$(mktemp); printf '#!/bin/sh\nrm -rf $$1/cache\n' >"$$t"; \
	  if shellcheck "$$t" >/dev/null; then rm -f "$$t"; echo "test-shell: shellcheck passed a script with an unquoted \$$1" >&2; exit 1; fi; \
	  rm -f "$$t"; echo "test-shell: shellcheck refuses an unquoted \$$1 (negative control)"

# A full sitting on a local 3-member etcd (60 s at rest, SIGTERM + restart of the leader,
# 30 s settle) into data/rehearsal-<target>-<method>-<UTC time>/, then the baseline table.
# Pass options through ARGS, e.g. `make rehearse ARGS="--target follower --method sigkill"`.
rehearse: deps build
	./target/release/leaderwatch rehearse $(ARGS)

clean-tools:
	rm -rf $(TOOLS)
include lab/lab.mk
