//! Links the release binary with the sampler's code first (build/sampler.order, written by
//! `make order-file`): the functions a `leaderwatch sample` run executes, ~1.2 MiB, sit
//! together at the start of .text instead of spread over 8 MiB, so the pages the kernel
//! maps around each one (64 KiB at a time) hold little else. Peak RSS of `sample` 10.5 ->
//! 5.9 MiB (docs/benchmarks.md). Names the current code no longer has are skipped by the
//! linker; a stale file costs memory, never correctness.
//!
//! Also sets `LEADERWATCH_COMMIT`, the commit the binary is built from (src/model/build.rs):
//! the environment's `LEADERWATCH_COMMIT` where a build has no git (deploy/Dockerfile's build
//! argument), else `git rev-parse HEAD`, else `unknown`. A sitting compares the image's with
//! its own before anything is evicted.

fn main() {
    commit();
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

/// `cargo:rustc-env=LEADERWATCH_COMMIT=...`, rerun when HEAD moves.
fn commit() {
    println!("cargo:rerun-if-env-changed=LEADERWATCH_COMMIT");
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-C", dir])
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let given = std::env::var("LEADERWATCH_COMMIT").ok().filter(|c| !c.trim().is_empty());
    let commit = given.or_else(|| git(&["rev-parse", "HEAD"])).unwrap_or_else(|| "unknown".into());
    // HEAD, the branch it names and packed-refs: a commit or a checkout moves one of them.
    // Only files that exist: a missing one would rerun this on every build.
    let mut watch = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for w in watch {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w])
            && std::path::Path::new(&p).exists()
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rustc-env=LEADERWATCH_COMMIT={}", commit.trim());
}
