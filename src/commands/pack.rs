//! `leaderwatch pack`: a run directory as a tar stream with its checksums on stdout (what
//! the sitting's fetch pod runs; src/io/pack.rs).

use crate::Result;
use crate::cli::PackArgs;

/// `leaderwatch pack DIR` from its arguments.
pub fn command(a: PackArgs) -> Result<()> {
    Ok(crate::io::pack::pack(&a.dir, &mut std::io::stdout().lock())?)
}
