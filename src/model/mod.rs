//! The bottom layer: plain types, most of them serde, that the files on disk are made of
//! and that every layer above passes around, and `named!`: an enum whose every variant
//! has one name (on disk, on the command line). Nothing here imports anything above it.

/// Declares an enum whose variants each have one name, the one the files (and, for a
/// flag's value, the command line) use: `as_str`, `Display`, `FromStr` and serde's reading
/// and writing all go through it, so the files keep their words and the code gets a type.
macro_rules! named {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vm])* $v,)+ }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &[$name] = &[$($name::$v,)+];

            /// Its one name (on disk, and as a flag's value).
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s,)+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($name::$v),)+
                    other => Err(format!("unknown {} {other:?}", stringify!($name))),
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
// For the enums of the layers above (`crate::model::named!`).
pub(crate) use named;

pub mod baseline;
pub mod build;
pub mod canary;
pub mod clock;
pub mod counts;
pub mod event;
pub mod exit;
pub mod lock;
pub mod measurement;
pub mod member;
pub mod metrics;
pub mod observation;
pub mod rate;
pub mod summary;
