//! `report --update README.md`: the rendered tables spliced between the README's markers,
//! written atomically; the file is left alone when nothing changed.

use std::path::Path;

use crate::Error;
use crate::io::record::write_atomic;
use crate::model::rate::BaselineFile;
use crate::render::report::{render, splice};

/// `report --update README.md`: splices the tables in, atomically. Returns whether the
/// file changed.
pub fn update(readme: &Path, baselines: &[BaselineFile]) -> Result<bool, Error> {
    let text = std::fs::read_to_string(readme)
        .map_err(|e| Error::Usage(format!("{}: {e}", readme.display())))?;
    let dir = readme.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let table = render(baselines, Some(dir));
    let new =
        splice(&text, &table).map_err(|e| Error::Usage(format!("{}: {e}", readme.display())))?;
    if new == text {
        return Ok(false);
    }
    write_atomic(readme, new.as_bytes())?;
    Ok(true)
}
