//! `leaderwatch recount`: a recorded run's elections counted again (src/ops/recount.rs),
//! each changed figure printed on a line of its own.

use crate::Error;
use crate::cli::RecountArgs;
use crate::commands::out;

pub fn command(a: RecountArgs) -> Result<(), Error> {
    let runs = crate::ops::recount::recount(&a.paths, a.write)?;
    let mut text = String::new();
    for r in &runs {
        let file = r.file.display();
        for c in &r.outcome.changes {
            text.push_str(&format!(
                "{file}: terms {} -> {}: {} {} -> {}\n",
                c.terms.0, c.terms.1, c.field, c.recorded, c.recounted
            ));
        }
        for u in &r.outcome.unmatched {
            text.push_str(&format!("{file}: {u} (left as recorded)\n"));
        }
        let said = match (r.outcome.changes.len(), r.written) {
            (0, _) => "unchanged".to_owned(),
            (n, true) => format!("{n} figure(s) changed, written"),
            (n, false) => format!("{n} figure(s) differ, not written (--write rewrites it)"),
        };
        text.push_str(&format!("{file}: {said}\n"));
        if r.rate_rewritten {
            text.push_str(&format!(
                "{file}: its rate.json written again from the recounted causes\n"
            ));
        }
    }
    out(&text)
}
