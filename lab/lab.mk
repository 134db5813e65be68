# The local Kubernetes cluster (docs/local-cluster.md), included by the Makefile.
#   make kube-tools   build Kubernetes (lab/go/kube: the control plane, kubectl, kubelet,
#                     kube-proxy) and the nodes' runtime (lab/go/node: containerd, runc, CNI
#                     plugins, CoreDNS), install iproute2/iptables/libseccomp-dev, build lw-lab
#   make kube-up      start a cluster in the background; KUBECONFIG=.tools/lab/kubeconfig
#   make kube-down    stop it (and remove what a killed run left behind)
#   make acceptance   T-056's acceptance criteria 1-8 and §6 on a fresh cluster (in make test-lab)

KUBE_MOD     := lab/go/kube
# The pinned version is the one lab/go/kube/go.mod requires (lw-lab reads the same line).
KUBE_VERSION := $(shell sed -n 's|^\tk8s.io/kubernetes \(v[^ ]*\).*|\1|p' $(KUBE_MOD)/go.mod)
KUBE_MINOR   := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_BIN     := $(TOOLS)/kube-$(KUBE_VERSION)/bin
KUBE_STAMP   := $(TOOLS)/.kube-go-$(KUBE_VERSION)
KUBE_CMDS    := kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
# The nodes' runtime, each from its own upstream module (one wrapper module each, so that
# no project's dependencies are raised by another's): the versions are the wrappers' pins.
NODE_MOD     := lab/go/node
NODE_BIN     := $(TOOLS)/node/bin
NODE_STAMP   := $(TOOLS)/.node-go
NODE_SUMS    := $(foreach m,containerd runc cni coredns slowfs,$(NODE_MOD)/$(m)/go.mod $(NODE_MOD)/$(m)/go.sum) $(NODE_MOD)/slowfs/main.go
NODE_CMDS    := containerd containerd-shim-runc-v2 ctr runc bridge host-local loopback portmap coredns pause lw-slowfs
pin           = $(shell sed -n 's|^\t$(1) \(v[^ ]*\).*|\1|p' $(NODE_MOD)/$(2)/go.mod)
CONTAINERD_VERSION := $(call pin,github.com/containerd/containerd/v2,containerd)
LW_LAB       := lab/target/debug/lw-lab
# What `kubectl version` and the API server's /version report (upstream sets these too).
KUBE_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) -X $(p).gitTreeState=clean -X $(p).buildDate=1970-01-01T00:00:00Z)

.PHONY: kube-tools kube-apt kube-binaries kube-binaries-missing node-binaries lw-lab kube-up kube-down acceptance test-kube test-faults fault-runs test-in-cluster test-sitting-day rehearse-kube measure-kube
kube-binaries-missing:

kube-tools: kube-apt kube-binaries node-binaries lw-lab deps-etcd registry

# The tests' container registry (lab/go/registry: go-containerregistry's cmd/registry, in
# memory), into .tools/bin/lw-registry; rebuilt when its module's pins change. The sitting
# day pushes images into it and the sitting reads their platforms from it. Cold: about 45 s.
REGISTRY_MOD := lab/go/registry
.PHONY: registry
registry: $(TOOLS)/bin/lw-registry
$(TOOLS)/bin/lw-registry: $(REGISTRY_MOD)/go.mod $(REGISTRY_MOD)/go.sum
	@mkdir -p $(TOOLS)/bin
	cd $(REGISTRY_MOD) && CGO_ENABLED=0 go build -trimpath -o $@.new github.com/google/go-containerregistry/cmd/registry
	@mv -f $@.new $@

# iproute2 makes the bridge and the nodes' network namespaces; iptables is kube-proxy's
# (and conntrack its cleanup tool); libseccomp-dev and pkg-config build runc with seccomp;
# umoci assembles the OCI images imported into the nodes' containerd.
kube-apt:
	@missing=""; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v iptables >/dev/null || missing="$$missing iptables"; \
	command -v conntrack >/dev/null || missing="$$missing conntrack"; \
	command -v umoci >/dev/null || missing="$$missing umoci"; \
	command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	[ -f /usr/include/seccomp.h ] || missing="$$missing libseccomp-dev"; \
	[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || missing="$$missing libc6-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "kube-tools: installing$$missing"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

kube-binaries: $(KUBE_STAMP)

# Rebuilt only when the pinned version (a new stamp name) or go.mod/go.sum change, or a
# binary is missing. Cold on 2 cores: see docs/local-cluster.md ("How it is built"); warm: seconds.
$(KUBE_STAMP): $(KUBE_MOD)/go.mod $(KUBE_MOD)/go.sum $(if $(strip $(foreach c,$(KUBE_CMDS),$(if $(wildcard $(KUBE_BIN)/$(c)),,x))),kube-binaries-missing)
	@command -v go >/dev/null || { echo "kube-tools: \`go\` not found on PATH: Kubernetes $(KUBE_VERSION) is built from $(KUBE_MOD) and needs Go >= $$(sed -n 's/^go //p' $(KUBE_MOD)/go.mod) and the Go module proxy" >&2; exit 3; }
	@mkdir -p $(KUBE_BIN)
	@if [ -f $@ ] && (cd $(KUBE_MOD) && sha256sum --status -c $@) && \
	    (for c in $(KUBE_CMDS); do [ -x $(KUBE_BIN)/$$c ] || exit 1; done); then \
	  echo "kube-tools: $(KUBE_MOD) unchanged, Kubernetes $(KUBE_VERSION) not rebuilt"; touch $@; exit 0; \
	fi; \
	echo "kube-tools: building Kubernetes $(KUBE_VERSION) ($(KUBE_CMDS)) from $(KUBE_MOD) with $$(go env GOVERSION)"; \
	start=$$(date +%s); \
	cd $(KUBE_MOD) && CGO_ENABLED=0 go build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $(KUBE_BIN)/.new/ \
	  $(foreach c,$(KUBE_CMDS),k8s.io/kubernetes/cmd/$(c)) || \
	  { echo "kube-tools: go build of k8s.io/kubernetes $(KUBE_VERSION) (module $(KUBE_MOD)) failed: go's error is above" >&2; rm -rf $(KUBE_BIN)/.new; exit 3; }; \
	for c in $(KUBE_CMDS); do mv -f $(KUBE_BIN)/.new/$$c $(KUBE_BIN)/$$c; done; rmdir $(KUBE_BIN)/.new; \
	sha256sum go.mod go.sum >$@; \
	echo "kube-tools: built in $$(( $$(date +%s) - start )) s: $$(cd $(KUBE_BIN) && du -b $(KUBE_CMDS) | awk '{printf "%s %.0f MB, ", $$2, $$1/1e6}')"
	@$(KUBE_BIN)/kube-apiserver --version

node-binaries: $(NODE_STAMP)

# Same scheme as Kubernetes': rebuilt when a wrapper's go.mod/go.sum change or a binary is
# missing. runc needs cgo (libseccomp); the rest are static. Versions are stamped as the
# upstream Makefiles stamp them. Cold on 2 cores: see docs/local-cluster.md.
$(NODE_STAMP): $(NODE_SUMS) $(if $(strip $(foreach c,$(NODE_CMDS),$(if $(wildcard $(NODE_BIN)/$(c)),,x))),kube-binaries-missing)
	@command -v go >/dev/null || { echo "kube-tools: \`go\` not found on PATH: the nodes' runtime is built from $(NODE_MOD) and needs Go and the Go module proxy" >&2; exit 3; }
	@mkdir -p $(NODE_BIN)
	@if [ -f $@ ] && sha256sum --status -c $@ && \
	    (for c in $(NODE_CMDS); do [ -x $(NODE_BIN)/$$c ] || exit 1; done); then \
	  echo "kube-tools: $(NODE_MOD) unchanged, the nodes' runtime not rebuilt"; touch $@; exit 0; \
	fi; \
	start=$$(date +%s); \
	build() { mod=$$1 tags=$$2 ldflags=$$3; shift 3; echo "kube-tools: building $${*##*/} from $(NODE_MOD)/$$mod"; \
	  (cd $(NODE_MOD)/$$mod && go build -trimpath -tags "$$tags" -ldflags "-s -w $$ldflags" -o $(NODE_BIN)/.new/ "$$@") || \
	  { echo "kube-tools: go build in $(NODE_MOD)/$$mod failed: go's error is above" >&2; rm -rf $(NODE_BIN)/.new; exit 3; }; }; \
	CGO_ENABLED=0 build containerd no_btrfs "-X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" \
	  $(foreach c,containerd containerd-shim-runc-v2 ctr,github.com/containerd/containerd/v2/cmd/$(c)); \
	CGO_ENABLED=1 build runc seccomp "" github.com/opencontainers/runc; \
	CGO_ENABLED=0 build cni "" "" $(foreach p,main/bridge main/loopback ipam/host-local meta/portmap,github.com/containernetworking/plugins/plugins/$(p)); \
	CGO_ENABLED=0 build coredns "" "" github.com/coredns/coredns; \
	: "The slow disk of lw-lab fault disk: a passthrough FUSE filesystem (hanwen/go-fuse), ours"; \
	CGO_ENABLED=0 build slowfs "" "" .; \
	: "The pods' sandbox: Kubernetes' own pause.c, in the module the control plane is built from, compiled as its build/pause/Makefile does"; \
	pause=$$(cd $(KUBE_MOD) && go mod download -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')/build/pause; \
	echo "kube-tools: compiling pause $$(sed -n 's/^TAG ?= //p' $$pause/Makefile) from $$pause/linux/pause.c"; \
	gcc -Os -Wall -Werror -static -DVERSION=v$$(sed -n 's/^TAG ?= //p' $$pause/Makefile) -o $(NODE_BIN)/.new/pause $$pause/linux/pause.c; \
	for c in $(NODE_CMDS); do mv -f $(NODE_BIN)/.new/$$c $(NODE_BIN)/$$c; done; rmdir $(NODE_BIN)/.new; \
	sha256sum $(NODE_SUMS) >$@; \
	echo "kube-tools: the nodes' runtime built in $$(( $$(date +%s) - start )) s"
	@# sed reads to the end: `| head -1` exits after one line and, under pipefail, a version
	@# printer still writing its second line died of SIGPIPE (make test failed: Error 141).
	@$(NODE_BIN)/containerd --version; $(NODE_BIN)/runc --version | sed -n 1p; $(NODE_BIN)/coredns -version | sed -n 1p

# The harness has its own Cargo.lock and target/ (not in leaderwatch's dependency graph).
# Its unit tests run in make check, its faults test (root) in make test-lab.
lw-lab: deps-apt
	$(CARGO) build --locked --manifest-path lab/Cargo.toml

kube-up: kube-tools
	$(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab up --detach

kube-down:
	@if [ -x $(LW_LAB) ]; then $(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab down; else echo "kube-down: $(LW_LAB) not built, nothing to stop"; fi

# The debug binary is enough for its preflight check, and make test has built it already
# (the release build's fat LTO would add minutes to every CI run).
acceptance: kube-tools deps-apt
	$(TEST_BIN)
	$(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab acceptance --repo $(CURDIR) --leaderwatch target/debug/leaderwatch

# The Kubernetes tests of leaderwatch on the real control plane (tests/lab/kube.rs), and the
# negative control of the lab's Autopilot admission rules (tests/lab/autopilot.rs); ignored
# in plain cargo test because they need root, runc and the built cluster.
test-kube: kube-tools deps
	$(CARGO) test --locked --test lab -- --ignored kube:: autopilot::

# Faults below etcd (lw-lab fault: a slow disk, a starved CPU, a leader cut off both ways
# and one way, a follower cut off, a frozen leader, a lost node) under leaderwatch sample,
# each election's cause held against the harness's own fault log (tests/lab/faults.rs):
# one test, one cluster, the faults one after another.
test-faults: kube-tools deps
	$(CARGO) test --locked --test lab -- --ignored faults::

# The committed fault runs (lab/fault-runs.sh, on a fresh cluster with --disk-faults):
# make fault-runs MODE=sweep (added fsync latency, MINUTES per point) or MODE=repeat (each
# fault REPEATS times on the leader) or MODE=node (the leader's node lost REPEATS times past
# the node controller's grace period, then once past the pods' 300 s toleration: about 20
# minutes); the runs go to data/fault-<mode>-<UTC>/.
fault-runs: kube-tools build
	lab/fault-runs.sh $(MODE)

# The GKE sitting rehearsed on a fresh local cluster by the command a user runs on GKE:
# `leaderwatch sitting` with the image make image built (lab/in-cluster-sitting.sh): 20 min
# at rest, a follower evicted, 5 min settle, the run fetched into data/kube-in-cluster-*.
# ARGS go to leaderwatch sitting, e.g. make rehearse-kube ARGS="--target leader".
# AS=operator: as operator-rbac.yaml's role only, from outside the clone, its whole hand-off
# into data/lab-day-<UTC>/ (lab/in-cluster-sitting.sh says what it holds).
rehearse-kube: kube-tools image
	LW_AS=$(AS) lab/in-cluster-sitting.sh $(ARGS)

# `leaderwatch measure` run from this host against a fresh local cluster (--reach pod-ip,
# the ServiceAccount's token), as the committed maintenance runs were made. ARGS go to
# measure, e.g. make measure-kube ARGS="--method rolling-restart".
measure-kube: kube-tools build
	$(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab measure --repo $(CURDIR) -- $(ARGS)

# leaderwatch's own Job and Deployment from its image on the local cluster, Prometheus
# scraping the sampler (tests/lab/in_cluster.rs; root, runc, umoci, the built image).
test-in-cluster: kube-tools test-image-build deps
	LEADERWATCH_IMAGE_DIR=$(TEST_IMAGE_DIR) $(CARGO) test --locked --test lab -- --ignored in_cluster::

# The sitting day from a laptop (tests/lab/sitting_day.rs): leaderwatch installed with
# `cargo install --path .`, run from another directory as a user bound to
# operator-rbac.yaml only, its token expiring; --dry-run through an API server restart; a
# longer outage detaches; a wrong image, a refused pod and the Job's own preflight failing
# each end the sitting with one line.
test-sitting-day: kube-tools test-image-build deps
	LEADERWATCH_IMAGE_DIR=$(TEST_IMAGE_DIR) $(CARGO) test --locked --test lab -- --ignored sitting_day::

# Tier 3 of make test (the Makefile's test-lab prints its summary line): first what a run
# killed outright left on this machine is removed (`up` refuses such leftovers by name, and
# a killed CI job or session leaves them for the next make test; a live cluster's are never
# touched), then lw-lab's own faults (a missing tool, a namespace a killed run left), then
# the clusters in three lanes side by side, each lane one cluster at a time in a directory
# of its own (LW_LAB_TEST_DIR). Lane a holds the tests that time probes and elections on
# the real nodes; lane b, the faults, waits for the file LAB_LANE_B_AFTER names, if any
# (make test runs test-etcd and the notebook first, so that the CPU-bound notebook never
# runs beside a fault: docs/internals.md); lane c holds the tests that mostly wait on Jobs,
# grace periods and scrapes, at a lower priority (nice LAB_LANE_C_NICE: its cluster and
# everything it starts), so that its bursts (a bring-up, cargo install) yield to the
# others. Lanes b and c write into target/test-lab-b.log and -c.log, printed when all end.
# Every build comes first, and the lanes build nothing (TEST_IMAGE_BUILT).
LAB_LANE_A := acceptance test-kube
LAB_LANE_B := test-faults
LAB_LANE_C := test-sitting-day test-in-cluster test-image
LAB_LANE_C_NICE ?= 5
test-lab-steps: kube-tools test-image-build deps
	$(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab-test down
	$(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab-test-b down
	$(LW_LAB) --tools $(TOOLS) --dir $(TOOLS)/lab-test-c down
	$(CARGO) test --locked --manifest-path lab/Cargo.toml --test faults
	$(CARGO) test --locked --no-run --test check --test lab
	@{ if [ -n "$(LAB_LANE_B_AFTER)" ]; then while [ ! -e "$(LAB_LANE_B_AFTER)" ]; do sleep 2; done; fi; \
	  LW_LAB_TEST_DIR=$(TOOLS)/lab-test-b $(MAKE) --no-print-directory TEST_IMAGE_BUILT=1 $(LAB_LANE_B); } \
	  >target/test-lab-b.log 2>&1 & b=$$!; \
	LW_LAB_TEST_DIR=$(TOOLS)/lab-test-c nice -n $(LAB_LANE_C_NICE) $(MAKE) --no-print-directory TEST_IMAGE_BUILT=1 $(LAB_LANE_C) \
	  >target/test-lab-c.log 2>&1 & c=$$!; \
	a=0; $(MAKE) --no-print-directory TEST_IMAGE_BUILT=1 $(LAB_LANE_A) || a=$$?; \
	rb=0; wait $$b || rb=$$?; rc=0; wait $$c || rc=$$?; \
	echo "--- lane b ($(LAB_LANE_B)): $$([ $$rb = 0 ] && echo passed || echo FAILED); its log, target/test-lab-b.log:"; \
	cat target/test-lab-b.log; \
	echo "--- lane c ($(LAB_LANE_C)): $$([ $$rc = 0 ] && echo passed || echo FAILED); its log, target/test-lab-c.log:"; \
	cat target/test-lab-c.log; \
	[ $$a = 0 ] && [ $$rb = 0 ] && [ $$rc = 0 ]
