//! `leaderwatch recount`: a recorded run's elections counted again (src/ops/recount.rs),
//! each changed figure printed on a line of its own (src/render/recount.rs).

use crate::Error;
use crate::cli::RecountArgs;
use crate::commands::out;

pub fn command(a: RecountArgs) -> Result<(), Error> {
    let runs = crate::ops::recount::recount(&a.paths, a.write)?;
    out(&crate::render::recount::render(&runs))
}
