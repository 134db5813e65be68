//! The bottom layer: plain types, most of them serde, that the files on disk are made of
//! and that every layer above passes around. Nothing here imports anything above it.

/// `Display` as the state's on-disk name (its `as_str`), for the enums of this layer.
macro_rules! display_as_str {
    ($($t:ty),+) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )+};
}

pub mod baseline;
pub mod canary;
pub mod clock;
pub mod counts;
pub mod event;
pub mod kind;
pub mod measurement;
pub mod member;
pub mod metrics;
pub mod observation;
pub mod rate;
pub mod rows;
pub mod summary;
