//! The layers of src/ hold (docs/internals.md): each layer imports only the layers below it
//! (model < analysis < io, render < k8s/ < ops < the commands), and no file reaches itself
//! through a circle of imports, in src/ or in the lab crate (lab/src). Read from the sources
//! with plain string matching on `crate::` and `super::` paths, grouped ones (`crate::{a,
//! b::c}`) expanded (test modules excluded: a test may reach up for its fixtures).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn root(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
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
fn module(src: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(src).expect("under src").with_extension("");
    let parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|c| c != "mod" && c != "lib")
        .collect();
    parts.join("::")
}

/// The paths a use tree stands for: `{a::b, c::{d, e}}` -> a::b, c::d, c::e.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        // `a as b` names a.
        let path = tree.split_whitespace().next().unwrap_or_default();
        return vec![path.trim_end_matches("::").to_owned()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| {
            if p == "self" {
                prefix.trim_end_matches("::").to_owned()
            } else {
                format!("{prefix}{p}")
            }
        })
        .collect()
}

/// The use tree that starts at `text` (after `crate::`): up to the first character that
/// cannot be part of a path, braces balanced.
fn use_tree(text: &str) -> &str {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            _ if depth > 0 || c.is_ascii_alphanumeric() || c == '_' || c == ':' => {}
            _ => return &text[..i],
        }
    }
    text
}

/// What an import of an item of the crate root (lib.rs: the crate's `Error`, `Result`) is
/// recorded as.
const ROOT: &str = "crate";

/// The modules each file of the crate at `src` imports (for each path, the longest prefix
/// that is a module file), test modules left out.
fn imports(src: &Path) -> Graph {
    let mut all = Vec::new();
    files(src, &mut all);
    let modules: BTreeSet<String> = all.iter().map(|p| module(src, p)).collect();
    let mut out = BTreeMap::new();
    for p in &all {
        let text = std::fs::read_to_string(p).expect("read");
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        // Comments name modules without importing them (doc links among them).
        let text: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let me = module(src, p);
        // `super::` from a file module is its parent (from a mod.rs, the mod.rs's parent).
        let parent = me.rsplit_once("::").map(|(a, _)| a.to_owned()).unwrap_or_default();
        let mut deps = BTreeSet::new();
        for (anchor, base) in [("crate::", String::new()), ("super::", parent)] {
            for (i, _) in text.match_indices(anchor) {
                // `some_crate::x` is not `crate::x`.
                let before = text[..i].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                for path in expand(use_tree(&text[i + anchor.len()..])) {
                    let full = if base.is_empty() { path } else { format!("{base}::{path}") };
                    let segs: Vec<&str> = full.split("::").filter(|s| !s.is_empty()).collect();
                    // No module of that name: an item of the crate root (lib.rs), such
                    // as the crate's `Error`, which is the commands' and ops' own.
                    let m = (1..=segs.len())
                        .rev()
                        .map(|n| segs[..n].join("::"))
                        .find(|m| modules.contains(m))
                        .unwrap_or_else(|| ROOT.to_owned());
                    if m != me && !(m == ROOT && me.is_empty()) && !segs.is_empty() {
                        deps.insert(m);
                    }
                }
            }
        }
        out.insert(me, deps);
    }
    out
}

/// The layer a module of src/ belongs to, lowest first: 0 model, 1 analysis, 2 io and
/// render (neither imports the other), 3 k8s/, 4 the commands (and the crate root).
fn layer(module: &str) -> (u8, &str) {
    match module.split("::").next().unwrap_or_default() {
        "model" => (0, "model"),
        "analysis" => (1, "analysis"),
        "io" => (2, "io"),
        "render" => (2, "render"),
        "k8s" => (3, "k8s"),
        // The crate root's items (`Error`, `Result`) are the commands' and ops': the
        // layers below return their own errors, which the root's `Error` wraps.
        "ops" | ROOT => (4, "ops"),
        _ => (5, "commands"),
    }
}

/// Every import of a module from a layer above its own, or from the other layer of its
/// level (io and render).
fn upward(g: &Graph) -> Vec<String> {
    let mut wrong = Vec::new();
    for (m, deps) in g {
        let (lm, nm) = layer(m);
        for d in deps {
            let (ld, nd) = layer(d);
            if lm < 5 && (ld > lm || (ld == lm && nd != nm)) {
                wrong.push(format!("{m} -> {d}"));
            }
        }
    }
    wrong
}

/// The circles of imports: each strongly connected set of two or more modules.
fn circles(g: &Graph) -> Vec<Vec<String>> {
    // Which modules each reaches; a circle is the set that reach each other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for d in g.get(&m).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reaches {
        if !r.contains(*m) || out.iter().any(|c| c.contains(m)) {
            continue;
        }
        let circle: Vec<String> = r
            .iter()
            .filter(|o| reaches.get(o).is_some_and(|ro| ro.contains(*m)))
            .cloned()
            .collect();
        out.push(circle);
    }
    out
}

#[test]
fn every_layer_imports_only_the_layers_below_it() {
    let wrong = upward(&imports(&root("src")));
    assert!(wrong.is_empty(), "imports across the layers: {wrong:#?}");
}

#[test]
fn no_file_reaches_itself_through_its_imports() {
    let c = circles(&imports(&root("src")));
    assert!(c.is_empty(), "circles of imports in src/: {c:#?}");
}

#[test]
fn the_lab_has_no_circle_of_imports_either() {
    // Regression: lab/src/net.rs -> lab.rs -> kubelet/ -> net.rs (the process kubelet of old).
    let c = circles(&imports(&root("lab/src")));
    assert!(c.is_empty(), "circles of imports in lab/src: {c:#?}");
}

#[test]
fn the_check_sees_the_imports_it_is_about() {
    // Guards against a check that cannot fail: the reader finds known edges (grouped ones
    // too), and the rules catch a planted upward import and a circle of three.
    let g = imports(&root("src"));
    assert!(g["analysis::engine"].contains("analysis::windows"), "{:?}", g["analysis::engine"]);
    assert!(g["analysis::client"].contains("model::canary"));
    assert!(
        g["commands::rehearse"].contains("render::report"),
        "crate::{{render::report, ..}}: {:?}",
        g["commands::rehearse"]
    );
    assert!(g.keys().any(|m| m == "model::baseline") && g.len() > 40, "{} modules", g.len());
    let lab = imports(&root("lab/src"));
    assert!(lab["lab"].contains("node"), "{:?}", lab["lab"]);
    assert!(
        g["k8s::maintenance"].contains("k8s::preflight"),
        "super:: too: {:?}",
        g["k8s::maintenance"]
    );

    let planted = |edges: &[(&str, &str)]| -> Graph {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry((*a).to_owned()).or_default().insert((*b).to_owned());
            g.entry((*b).to_owned()).or_default();
        }
        g
    };
    assert_eq!(
        upward(&planted(&[("io::readme", "render::report")])),
        ["io::readme -> render::report"]
    );
    assert_eq!(upward(&planted(&[("analysis::x", "io::y")])).len(), 1);
    assert!(
        upward(&planted(&[("commands::sitting", "render::report"), ("io::a", "model::b")]))
            .is_empty()
    );
    assert_eq!(upward(&planted(&[("k8s::job", "cli")])).len(), 1);
    // ops is below the commands: the library they call never reaches back for their args.
    assert_eq!(upward(&planted(&[("ops::sitting", "cli")])).len(), 1);
    assert!(upward(&planted(&[("commands::sitting", "ops::sitting")])).is_empty());
    // The crate's Error, read from the sources: a lower layer naming it is upward.
    assert!(g["ops::drive"].contains(ROOT), "crate::{{Error, Result}}: {:?}", g["ops::drive"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("io")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "pub mod io;\npub enum Error {}\n").expect("lib.rs");
    std::fs::write(src.join("io/mod.rs"), "pub mod read;\n").expect("mod.rs");
    std::fs::write(src.join("io/read.rs"), "use crate::{Error, io};\nfn f() {}\n").expect("read");
    assert_eq!(upward(&imports(src)), ["io::read -> crate"]);
    let c =
        circles(&planted(&[("net", "lab"), ("lab", "kubelet"), ("kubelet", "net"), ("x", "net")]));
    assert_eq!(c, [vec!["kubelet".to_owned(), "lab".to_owned(), "net".to_owned()]]);
    assert_eq!(expand("{a::b, c::{d, self}}"), ["a::b", "c::d", "c"]);
}

/// The modules docs/internals.md draws on each floor ("Layers and the data path": the
/// first `text` block), words in parentheses left out.
fn drawn_floors(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let section = doc.split("## Layers and the data path").nth(1).expect("the section");
    let block = section.split("```text\n").nth(1).and_then(|b| b.split("```").next());
    let mut floors: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut floor = String::new();
    for line in block.expect("the drawing").lines() {
        let mut text = String::new();
        let mut depth = 0;
        for c in line.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                c if depth == 0 => text.push(c),
                _ => {}
            }
        }
        let mut words = text.split_whitespace();
        if !line.starts_with(' ') {
            floor = words.next().unwrap_or_default().to_owned();
        }
        floors.entry(floor.clone()).or_default().extend(words.map(str::to_owned));
    }
    floors
}

/// The modules of `src/<floor>/`: its files and directories, `mod.rs` aside.
fn modules_of(floor: &str) -> BTreeSet<String> {
    std::fs::read_dir(root("src").join(floor))
        .expect("floor dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().trim_end_matches(".rs").to_owned())
        .filter(|m| m != "mod")
        .collect()
}

#[test]
fn the_drawing_in_internals_md_names_every_module_and_only_those() {
    let doc = std::fs::read_to_string(root("docs/internals.md")).expect("internals.md");
    let floors = drawn_floors(&doc);
    let names: Vec<&str> = floors.keys().map(String::as_str).collect();
    assert_eq!(names, ["analysis", "commands", "io", "k8s", "model", "ops", "render"]);
    for (floor, drawn) in &floors {
        assert_eq!(
            drawn,
            &modules_of(floor),
            "docs/internals.md's {floor} floor against src/{floor}/"
        );
    }
    // It can fail: a module left out, or one that is not there.
    let planted = doc.replace(" registry ", " ").replace("measurement", "measurement gone");
    let p = drawn_floors(&planted);
    assert!(!p["io"].contains("registry") && p["model"].contains("gone"));
    assert_ne!(p["io"], modules_of("io"));
}
