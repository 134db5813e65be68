//! Links the release binary with the sampler's code first (build/sampler.order, written by
//! `make order-file`): the functions a `leaderwatch sample` run executes, ~1.2 MiB, sit
//! together at the start of .text instead of spread over 8 MiB, so the pages the kernel
//! maps around each one (64 KiB at a time) hold little else. Peak RSS of `sample` 10.5 ->
//! 5.9 MiB (docs/benchmarks.md). Names the current code no longer has are skipped by the
//! linker; a stale file costs memory, never correctness.

fn main() {
    let order = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("build/sampler.order");
    println!("cargo:rerun-if-changed={}", order.display());
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    // rust-lld is the linker there (Rust >= 1.90); GNU ld has no --symbol-ordering-file.
    let lld = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    if release && lld {
        if order.is_file() {
            println!(
                "cargo:rustc-link-arg-bin=leaderwatch=-Wl,--symbol-ordering-file={},--no-warn-symbol-ordering",
                order.display()
            );
        }
        // The link map bench/order-file.sh reads: <target>/release/leaderwatch.map.
        if let Some(release_dir) = std::env::var_os("OUT_DIR")
            .map(std::path::PathBuf::from)
            .and_then(|out| out.ancestors().nth(3).map(|d| d.join("leaderwatch.map")))
        {
            println!("cargo:rustc-link-arg-bin=leaderwatch=-Wl,-Map={}", release_dir.display());
        }
    }
}
