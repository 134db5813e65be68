//! Pure analysis over the model: no I/O, no clock of its own (time comes with the data).
//! Imports only [`crate::model`] and its own layer.

pub mod attribution;
pub mod cadence;
pub mod client;
pub mod counts;
pub mod disruption;
pub mod engine;
pub mod flatten;
pub mod health;
pub mod lock;
pub mod maintenance;
pub mod member_changes;
pub mod poisson;
pub mod protocol;
pub mod rate;
pub mod recount;
pub mod recovery;
pub mod sampling;
pub mod trial;
pub mod windows;
