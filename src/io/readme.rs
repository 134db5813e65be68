//! `report --update README.md`: the README read, its new text made by the caller (render's
//! [`crate::render::report::updated`]), and written atomically; the file is left alone when
//! nothing changed. Only the file's I/O lives here, so io never imports render.

use std::path::Path;

use crate::Error;
use crate::io::run_dir::write_atomic;

/// Rewrites `readme` with `new_text(text, its directory)` (the directory the README's
/// links are relative to), atomically. Returns whether the file changed; an `Err` of
/// `new_text` (e.g. no markers) is one line naming the file.
pub fn rewrite(
    readme: &Path,
    new_text: impl FnOnce(&str, &Path) -> Result<String, String>,
) -> Result<bool, Error> {
    let text = std::fs::read_to_string(readme).map_err(|e| Error::input(readme, e))?;
    let dir = readme.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let new = new_text(&text, dir).map_err(|e| Error::input(readme, e))?;
    if new == text {
        return Ok(false);
    }
    write_atomic(readme, new.as_bytes())?;
    Ok(true)
}
