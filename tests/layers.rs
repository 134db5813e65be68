//! The layers of src/ hold (docs/internals.md): `model/` imports nothing above it,
//! `analysis/` only `model/` and itself, and no file imports a file that imports it back.
//! Read from the sources with plain string matching on `crate::` paths (test modules
//! excluded: a test may reach up for its fixtures).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every .rs file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: `src/io/probe.rs` -> `io::probe`, `src/io/mod.rs` -> `io`.
fn module(path: &Path) -> String {
    let rel = path.strip_prefix(src()).expect("under src").with_extension("");
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|c| c != "mod" && c != "lib")
        .collect();
    parts.join("::")
}

/// The crate's modules each file imports (the longest `crate::a::b` prefix that is a
/// module file), test modules left out.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let modules: BTreeSet<String> = all.iter().map(|p| module(p)).collect();
    let mut out = BTreeMap::new();
    for p in &all {
        let text = std::fs::read_to_string(p).expect("read");
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let me = module(p);
        let mut deps = BTreeSet::new();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            if let Some(m) =
                (1..=segs.len()).rev().map(|n| segs[..n].join("::")).find(|m| modules.contains(m))
            {
                if m != me {
                    deps.insert(m);
                }
            }
        }
        out.insert(me, deps);
    }
    out
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap_or_default()
}

#[test]
fn the_model_imports_nothing_above_it_and_analysis_only_the_model() {
    let mut wrong = Vec::new();
    for (m, deps) in imports() {
        let allowed: &[&str] = match layer(&m) {
            "model" => &["model"],
            "analysis" => &["model", "analysis"],
            _ => continue,
        };
        wrong.extend(
            deps.iter().filter(|d| !allowed.contains(&layer(d))).map(|d| format!("{m} -> {d}")),
        );
    }
    assert!(wrong.is_empty(), "imports across the layers: {wrong:#?}");
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let g = imports();
    let mut cycles = Vec::new();
    for (a, deps) in &g {
        for b in deps {
            if a < b && g.get(b).is_some_and(|d| d.contains(a)) {
                cycles.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(cycles.is_empty(), "{cycles:#?}");
}

#[test]
fn the_check_sees_the_imports_it_is_about() {
    // A guard against a check that cannot fail: the reader finds known edges.
    let g = imports();
    assert!(g["io::recorder"].contains("analysis::windows"), "{:?}", g["io::recorder"]);
    assert!(g["analysis::client"].contains("model::canary"));
    assert!(g.keys().any(|m| m == "model::baseline") && g.len() > 40, "{} modules", g.len());
}
