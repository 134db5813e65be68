//! The commands, one file each, named after the subcommand: each turns its arguments
//! into options, makes one call to the layer below (src/ops/ for the commands that run
//! something), and prints the result. [`cli`] is the command line.

pub mod compare;
pub mod measure;
pub mod pack;
pub mod preflight;
pub mod rate;
pub mod recount;
pub mod rehearse;
pub mod report;
pub mod sample;
pub mod sitting;

use crate::Error;

/// Writes `text` to stdout: a closed pipe or a full disk is [`Error::Stdout`] (exit 3),
/// where print! would panic.
pub fn out(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes()).and_then(|()| o.flush()).map_err(Error::Stdout)
}
