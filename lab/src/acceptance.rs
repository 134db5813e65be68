//! T-056's acceptance criteria on a fresh local cluster (filled in below).
use crate::error::Result;
use crate::lab::Options;
use std::path::Path;

pub async fn run(_opts: &Options, _repo: &Path, _keep: bool) -> Result<()> {
    Err(crate::error::Error::Command("acceptance: not written yet".into()))
}
