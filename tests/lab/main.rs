//! The `lab` tier's Rust tests (`make test-lab` runs them with `make acceptance`): the local
//! Kubernetes cluster (lw-lab, real control plane v1.35.4) and the image under runc. They
//! need root, runc and `make kube-tools`, so each is `#[ignore]`d and run by name:
//! `make test-kube` (kube::, autopilot::), `make test-image` (image::), `make test-in-cluster`
//! (in_cluster::, sitting_day::).

#[path = "../support/mod.rs"]
mod support;

mod autopilot;
mod faults;
mod image;
mod in_cluster;
mod kube;
mod sitting_day;
