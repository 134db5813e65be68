//! `leaderwatch recount`'s output: each changed figure on a line of its own, then what
//! became of each run.

use crate::analysis::recount::Recounted;

/// `FILE: terms A -> B: FIELD RECORDED -> RECOUNTED` for each change, the elections left
/// as recorded, and one line per run.
pub fn render(runs: &[Recounted]) -> String {
    let mut text = String::new();
    for r in runs {
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
    text
}
