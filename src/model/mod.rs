//! The bottom layer: plain types, most of them serde, that the files on disk are made of
//! and that every layer above passes around. Nothing here imports anything above it.

pub mod baseline;
pub mod canary;
pub mod clock;
pub mod counts;
pub mod event;
pub mod measurement;
pub mod member;
pub mod metrics;
pub mod observation;
pub mod rate;
pub mod summary;
