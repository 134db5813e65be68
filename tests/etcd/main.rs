//! The `etcd` tier (`make test-etcd`): the tests on real local etcd 3.6.14 members (the
//! version deploy/k8s/etcd/statefulset.yaml pins, `make deps` builds it into .tools/bin;
//! a missing binary fails, never skips), with the fake API server and the misbehaving
//! members where a real counterpart cannot produce the fault. Every test that starts a
//! cluster takes support's cluster lock: one cluster at a time, so that CPU contention
//! between clusters on 2 cores cannot cause elections.

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod baseline_from_log;
mod canary_vs_writer;
mod core_etcd;
mod exporter;
mod kube_fake;
mod lock_canary;
mod rehearse_cli;
mod rotation;
mod sample_cli;
mod tls;
mod trial_faults;
mod trial_protocol;
