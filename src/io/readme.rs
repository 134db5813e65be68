//! `report --update README.md`: the README read, its new text made by the caller (render's
//! [`crate::render::report::updated`]), and written atomically; the file is left alone when
//! nothing changed. Only the file's I/O lives here, so io never imports render.

use std::path::Path;

use crate::io::InputError;
use crate::io::run_dir::write_atomic;

/// Why a README could not be rewritten: it cannot be read or has no place for the new
/// text (its markers), or it cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Record(#[from] crate::io::run_dir::RecordError),
}

/// Rewrites `readme` with `new_text(text, its directory)` (the directory the README's
/// links are relative to), atomically. Returns whether the file changed; an `Err` of
/// `new_text` (e.g. no markers) is one line naming the file.
pub fn rewrite(
    readme: &Path,
    new_text: impl FnOnce(&str, &Path) -> Result<String, String>,
) -> Result<bool, RewriteError> {
    let text = std::fs::read_to_string(readme).map_err(|e| InputError::new(readme, e))?;
    let dir = readme.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let new = new_text(&text, dir).map_err(|e| InputError::new(readme, e))?;
    if new == text {
        return Ok(false);
    }
    write_atomic(readme, new.as_bytes())?;
    Ok(true)
}
