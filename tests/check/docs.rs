//! The docs cannot drift from the code. For README.md, every docs/*.md and every
//! deploy/**/README.md:
//!
//! - **commands**: every shell command line in a fenced block labelled `sh`, `bash`, `shell`,
//!   `console` or unlabelled (a `console` block: only its `$ ` lines), and every inline code
//!   span in the prose, is split into simple commands (at `|`, `||`, `&&`, `;`, `&`), after
//!   dropping `# comments` and `$(...)` substitutions and joining `\` continuation lines.
//!   Leading `NAME=value` assignments and `sudo`/`env`/`time`/`nohup`/`exec` are skipped.
//!   Then:
//!   - `make T...`: every target T (a word that is not an assignment or an option) must be a
//!     rule's target in the Makefile or a file it includes (lab/lab.mk);
//!   - `leaderwatch SUB ...` (also `target/release/leaderwatch`, `target/debug/leaderwatch`,
//!     with or without `./`): SUB must be a subcommand listed by `leaderwatch --help` of the
//!     binary this test run built, and every `--flag` (or `--flag=value`) of that command
//!     must be listed by `leaderwatch SUB --help`; `leaderwatch --flag` is checked against
//!     the top-level help. Short options (`-o`, `-n`) are not checked.
//!
//!   A bare `leaderwatch` or `make` (a name in prose, no subcommand or target) is not a
//!   command. Placeholders and shell variables (`<ctx>`, `$PROJECT`, `data/gke-*/...`) are
//!   fine as long as the subcommand and the flags are literal; a command whose name is a
//!   variable (`$LW measure`) is not recognised, so the docs do not use one. Lines for
//!   `lw-lab` and `kubectl` (and every other program) are not checked. `text`, `json`,
//!   `promql` blocks are output or another language and are not read.
//! - **links**: every relative markdown link or image `[x](path)`, `[x](path#anchor)`,
//!   `[x](#anchor)` outside code must name an existing file or directory (relative to the
//!   page), and an anchor into a markdown page must be one of its headings' GitHub slugs
//!   (lowercased, spaces to `-`, every character but letters, digits, `-` and `_` dropped;
//!   a repeated heading gets `-1`, `-2`, ...). Links with a scheme (`https://`) are not
//!   followed.
//!
//! Each check has a negative control on an in-memory page (a made-up target, subcommand,
//! flag, file and anchor must each be reported), and the real pages must yield commands and
//! links at all, so the test cannot pass vacuously.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::{self, repo};

/// A command or link found on a page, with its 1-based line.
#[derive(Debug, Clone)]
struct Found {
    line: usize,
    text: String,
}

/// What a page holds that can drift.
#[derive(Debug, Default)]
struct Page {
    /// Shell command lines: from fenced blocks, and inline code spans.
    commands: Vec<Found>,
    /// Link targets outside code.
    links: Vec<Found>,
    /// Heading texts, in order.
    headings: Vec<String>,
}

/// The fenced blocks whose lines are shell commands.
fn is_shell_block(info: &str) -> bool {
    matches!(info, "" | "sh" | "bash" | "shell" | "console")
}

fn scan(text: &str) -> Page {
    let mut page = Page::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    // The prose block being gathered (consecutive non-blank lines outside fences).
    let mut prose: Vec<(usize, &str)> = Vec::new();
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("```") {
            scan_prose(&prose, &mut page);
            prose.clear();
            let info = rest.split_whitespace().next().unwrap_or("").to_owned();
            let console = info == "console";
            let mut pending: Option<(usize, String)> = None;
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                if is_shell_block(&info) {
                    let l = lines[i].trim();
                    let (start, acc) = match pending.take() {
                        Some((start, mut acc)) => {
                            acc.push(' ');
                            acc.push_str(l);
                            (start, acc)
                        }
                        None => match l.strip_prefix("$ ") {
                            Some(c) => (i + 1, c.to_owned()),
                            None if console => (i + 1, String::new()),
                            None => (i + 1, l.to_owned()),
                        },
                    };
                    if let Some(head) = acc.strip_suffix('\\') {
                        pending = Some((start, head.trim_end().to_owned()));
                    } else if !acc.trim().is_empty() {
                        page.commands.push(Found { line: start, text: acc });
                    }
                }
                i += 1;
            }
            if let Some((start, acc)) = pending {
                page.commands.push(Found { line: start, text: acc });
            }
            i += 1; // the closing fence
            continue;
        }
        if trimmed.is_empty() {
            scan_prose(&prose, &mut page);
            prose.clear();
        } else if let Some(h) = heading(trimmed) {
            scan_prose(&prose, &mut page);
            prose.clear();
            page.headings.push(h.to_owned());
            prose.push((i + 1, line));
            scan_prose(&prose, &mut page);
            prose.clear();
        } else {
            prose.push((i + 1, line));
        }
        i += 1;
    }
    scan_prose(&prose, &mut page);
    page
}

/// An ATX heading's text (`## Text`), without the hashes.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
        Some(line[hashes..].trim().trim_end_matches('#').trim())
    } else {
        None
    }
}

/// One paragraph (or table, or heading): its inline code spans are commands, its
/// `](target)` outside code are links.
fn scan_prose(block: &[(usize, &str)], page: &mut Page) {
    if block.is_empty() {
        return;
    }
    // The paragraph as one string, and the line each byte came from.
    let mut text = String::new();
    let mut line_of = Vec::new();
    for (n, l) in block {
        for _ in 0..=l.len() {
            line_of.push(*n);
        }
        text.push_str(l);
        text.push('\n');
    }
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            let run = b[i..].iter().take_while(|c| **c == b'`').count();
            let fence = "`".repeat(run);
            let from = i + run;
            // The closing run: exactly as many backticks.
            let mut j = from;
            let mut close = None;
            while let Some(k) = text[j..].find(&fence) {
                let at = j + k;
                let after = b[at + run..].iter().take_while(|c| **c == b'`').count();
                if after == 0 && (at == 0 || b[at - 1] != b'`') {
                    close = Some(at);
                    break;
                }
                j = at + run + after;
            }
            match close {
                Some(end) => {
                    let code = text[from..end].replace('\n', " ");
                    page.commands.push(Found { line: line_of[from], text: code.trim().to_owned() });
                    i = end + run;
                }
                None => i = from,
            }
            continue;
        }
        if b[i] == b']' && b.get(i + 1) == Some(&b'(') {
            let from = i + 2;
            let mut depth = 1;
            let mut end = from;
            while end < b.len() && depth > 0 {
                match b[end] {
                    b'(' => depth += 1,
                    b')' => depth -= 1,
                    b'\n' => break,
                    _ => {}
                }
                if depth > 0 {
                    end += 1;
                }
            }
            if depth == 0 {
                // `(path "title")`: the target is the first word.
                let target = text[from..end].split_whitespace().next().unwrap_or("");
                let target = target.trim_start_matches('<').trim_end_matches('>');
                page.links.push(Found { line: line_of[i], text: target.to_owned() });
                i = end + 1;
                continue;
            }
        }
        i += 1;
    }
}

/// `line` without its `# comment` and `$(...)` substitutions, split into simple commands,
/// each a list of words (quotes removed, quoted spaces kept).
fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = line.chars().collect();
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut i = 0;
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else if q == '"' && c == '$' && chars.get(i + 1) == Some(&'(') {
                i = skip_substitution(&chars, i);
                continue;
            } else {
                word.push(c);
            }
            i += 1;
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                in_word = true;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                i = skip_substitution(&chars, i);
                in_word = true;
                continue;
            }
            '#' if !in_word => break,
            '|' | '&' | ';' => {
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            c => {
                word.push(c);
                in_word = true;
            }
        }
        i += 1;
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

/// The index after the `)` that closes the `$(` at `i`.
fn skip_substitution(chars: &[char], i: usize) -> usize {
    let mut depth = 0;
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    j
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The command's name and its arguments, past assignments and wrappers.
fn command(words: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while i < words.len()
        && (is_assignment(&words[i])
            || matches!(words[i].as_str(), "sudo" | "env" | "time" | "nohup" | "exec"))
    {
        i += 1;
    }
    words.get(i).map(|w| (w.as_str(), &words[i + 1..]))
}

fn is_leaderwatch(name: &str) -> bool {
    let name = name.strip_prefix("./").unwrap_or(name);
    matches!(name, "leaderwatch" | "target/release/leaderwatch" | "target/debug/leaderwatch")
}

fn is_target_name(w: &str) -> bool {
    !w.is_empty()
        && w.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && w.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// What the commands may name: make targets and leaderwatch's subcommands and flags.
struct Known {
    targets: BTreeSet<String>,
    /// Subcommand -> its long flags; "" is the top level.
    flags: BTreeMap<String, BTreeSet<String>>,
}

/// How many commands of each kind a page's check looked at.
#[derive(Debug, Default, Clone, Copy)]
struct Checked {
    make: usize,
    leaderwatch: usize,
}

/// The problems with a page's commands, each naming the page and line.
fn check_commands(name: &str, page: &Page, known: &Known) -> (Vec<String>, Checked) {
    let mut problems = Vec::new();
    let mut checked = Checked::default();
    for found in &page.commands {
        for words in simple_commands(&found.text) {
            let Some((cmd, args)) = command(&words) else { continue };
            let at = format!("{name}:{}: `{}`", found.line, found.text);
            if cmd == "make" {
                let targets: Vec<&String> = args
                    .iter()
                    .filter(|a| !a.starts_with('-') && !is_assignment(a) && is_target_name(a))
                    .collect();
                if !targets.is_empty() {
                    checked.make += 1;
                }
                for t in targets {
                    if !known.targets.contains(t.as_str()) {
                        problems.push(format!(
                            "{at}: `make {t}`: no such target in the Makefile or lab/lab.mk"
                        ));
                    }
                }
            } else if is_leaderwatch(cmd) {
                let Some(sub) = args.first() else { continue };
                let (sub, flags_from) =
                    if sub.starts_with('-') { ("", 0) } else { (sub.as_str(), 1) };
                checked.leaderwatch += 1;
                let Some(allowed) = known.flags.get(sub) else {
                    let subs: Vec<&str> =
                        known.flags.keys().map(String::as_str).filter(|k| !k.is_empty()).collect();
                    problems.push(format!(
                        "{at}: `leaderwatch {sub}`: no such subcommand (--help lists {})",
                        subs.join(", ")
                    ));
                    continue;
                };
                for a in &args[flags_from..] {
                    let Some(flag) = a.strip_prefix("--") else { continue };
                    let flag = flag.split('=').next().unwrap_or("");
                    if flag.is_empty() {
                        continue; // `--`: the end of the options
                    }
                    if !allowed.contains(flag) {
                        problems.push(format!(
                            "{at}: `--{flag}` is not a flag of `leaderwatch {sub}` (its --help)"
                        ));
                    }
                }
            }
        }
    }
    (problems, checked)
}

/// GitHub's anchor for a heading: lowercased, spaces to `-`, every character but letters,
/// digits, `-` and `_` dropped (a link's text stays, its target goes).
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](target)` -> `text`
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](").and_then(|m| rest[open + m..].find(')').map(|c| (m, c))) {
            Some((m, c)) => {
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..open + m]);
                rest = &rest[open + m + c + 1..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a page's headings give, repeated headings numbered as GitHub does.
fn anchors(page: &Page) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for h in &page.headings {
        let s = slug(h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 { s.clone() } else { format!("{s}-{n}") });
        *n += 1;
    }
    out
}

/// The problems with a page's relative links. `page_path` is the page's path relative to
/// the repository root; `read` gives a markdown file's text by that kind of path (None:
/// no such file), `exists` whether a path is a file or directory.
fn check_links(
    page_path: &str,
    page: &Page,
    read: &dyn Fn(&str) -> Option<String>,
    exists: &dyn Fn(&str) -> bool,
) -> (Vec<String>, usize) {
    let mut problems = Vec::new();
    let mut checked = 0;
    let dir = Path::new(page_path).parent().unwrap_or(Path::new(""));
    for link in &page.links {
        let t = link.text.as_str();
        if t.is_empty() || t.contains("://") || t.starts_with("mailto:") {
            continue;
        }
        checked += 1;
        let (path, anchor) = match t.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (t, None),
        };
        let at = format!("{page_path}:{}: link `{t}`", link.line);
        let target =
            if path.is_empty() { page_path.to_owned() } else { normalise(&dir.join(path)) };
        if target.starts_with("../") {
            problems.push(format!("{at}: points outside the repository ({target})"));
            continue;
        }
        if !exists(&target) {
            problems.push(format!("{at}: no such file or directory ({target})"));
            continue;
        }
        if let Some(anchor) = anchor.filter(|a| !a.is_empty()) {
            if !target.ends_with(".md") {
                continue;
            }
            let Some(text) = read(&target) else {
                problems.push(format!("{at}: cannot read {target}"));
                continue;
            };
            let have = anchors(&scan(&text));
            if !have.contains(anchor) {
                problems.push(format!("{at}: {target} has no heading with the anchor #{anchor}"));
            }
        }
    }
    (problems, checked)
}

/// `a/b/../c` -> `a/c`, without touching the file system; a leading `..` stays.
fn normalise(p: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if parts.last().is_some_and(|l| l != "..") {
                    parts.pop();
                } else {
                    parts.push("..".to_owned());
                }
            }
            c => parts.push(c.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

/// The rule targets of `file` and of the files it includes (paths relative to the root).
fn make_targets(root: &Path, file: &str, out: &mut BTreeSet<String>) {
    let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut in_define = false;
    for line in text.lines() {
        if line.starts_with("define ") {
            in_define = true;
        } else if line.starts_with("endef") {
            in_define = false;
        }
        if in_define || line.starts_with('\t') || line.starts_with('#') {
            continue;
        }
        if let Some(inc) = line.strip_prefix("include ") {
            for f in inc.split_whitespace() {
                make_targets(root, f, out);
            }
            continue;
        }
        let Some((head, rest)) = line.split_once(':') else { continue };
        if rest.starts_with('=') || rest.starts_with(":=") || head.contains('=') {
            continue; // an assignment (`:=`, `::=`), not a rule
        }
        for t in head.split_whitespace() {
            if !t.contains('$') && !t.contains('%') && !t.starts_with('.') {
                out.insert(t.to_owned());
            }
        }
    }
}

/// The long flags an `--help` output lists (each option line's leading flag words).
fn help_flags(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') || line.len() == t.len() {
            continue;
        }
        for w in t.split_whitespace() {
            let w = w.trim_end_matches(',');
            if let Some(f) = w.strip_prefix("--") {
                let f: String =
                    f.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
                flags.insert(f);
            } else if !(w.starts_with('-') || w.starts_with('<') || w.starts_with('[')) {
                break;
            }
        }
    }
    flags
}

/// The subcommands `leaderwatch --help` lists under `Commands:`.
fn help_subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn help(args: &[&str]) -> String {
    let out = support::leaderwatch().args(args).output().expect("run leaderwatch --help");
    assert!(out.status.success(), "leaderwatch {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The Makefile's targets and the built binary's subcommands and flags, read once.
fn known() -> &'static Known {
    static KNOWN: OnceLock<Known> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut targets = BTreeSet::new();
        make_targets(&repo(""), "Makefile", &mut targets);
        let top = help(&["--help"]);
        let mut flags = BTreeMap::from([(String::new(), help_flags(&top))]);
        for sub in help_subcommands(&top) {
            let h = if sub == "help" { String::new() } else { help(&[&sub, "--help"]) };
            flags.insert(sub, help_flags(&h));
        }
        Known { targets, flags }
    })
}

/// README.md, docs/*.md and every README.md under deploy/, relative to the root.
fn doc_files() -> Vec<String> {
    let root = repo("");
    let mut files = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut stack = vec![PathBuf::from("deploy")];
    let mut deploy = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(root.join(&d)).expect("deploy/").flatten() {
            let rel = d.join(e.file_name());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(rel);
            } else if e.file_name() == "README.md" {
                deploy.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    deploy.sort();
    files.extend(deploy);
    files
}

fn read_repo(rel: &str) -> Option<String> {
    std::fs::read_to_string(repo(rel)).ok()
}

fn exists_in_repo(rel: &str) -> bool {
    repo(rel).exists()
}

#[test]
fn every_make_target_subcommand_and_flag_in_the_docs_exists() {
    let known = known();
    assert!(known.targets.contains("rehearse") && known.targets.contains("acceptance"));
    assert!(known.flags.get("measure").is_some_and(|f| f.contains("reach") && f.contains("out")));
    let mut problems = Vec::new();
    let mut total = Checked::default();
    for f in doc_files() {
        let page = scan(&read_repo(&f).expect("doc file"));
        let (p, c) = check_commands(&f, &page, known);
        problems.extend(p);
        total.make += c.make;
        total.leaderwatch += c.leaderwatch;
    }
    assert!(
        problems.is_empty(),
        "{} command(s) in the docs name what does not exist:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // Not vacuous: the pages do hold commands, and the scanner finds them.
    assert!(total.make >= 10, "only {} make commands found in the docs", total.make);
    assert!(total.leaderwatch >= 10, "only {} leaderwatch commands found", total.leaderwatch);
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut problems = Vec::new();
    let mut total = 0;
    for f in doc_files() {
        let page = scan(&read_repo(&f).expect("doc file"));
        let (p, n) = check_links(&f, &page, &read_repo, &exists_in_repo);
        problems.extend(p);
        total += n;
    }
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the docs:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(total >= 20, "only {total} relative links found in the docs");
}

/// A page with one right and one wrong of each kind, for the negative controls.
const CONTROL: &str = r#"# Control page

## Second: `make` it (again)

```sh
make check                                  # exists
make no-such-target-for-the-docs-test       # does not
make rehearse ARGS="--target follower"
target/release/leaderwatch measure --reach=dns --target follower \
    --out data/gke-$(date -u +%Y%m%dT%H%M%SZ)
leaderwatch measure --no-such-flag-for-the-docs-test --out x
leaderwatch no-such-subcommand --out x
kubectl -n dlock logs -f job/leaderwatch-measure --not-a-leaderwatch-flag
```

```console
$ leaderwatch report --no-such-report-flag x
leaderwatch output --whatever
```

```text
leaderwatch measure --flags-in-output-are-not-checked
```

Prose: `leaderwatch rate --no-such-rate-flag data/` and `make no-such-inline-target`,
the name `leaderwatch` and `make` alone.

[ok](docs/trial.md#the-disruptor) [ok too](#second-make-it-again) [dir](deploy/k8s)
[no file](docs/no-such-page.md) [no anchor](docs/trial.md#no-such-heading)
[no self anchor](#no-such-section) [web](https://example.com/x#y)
![no image](data/no-such-figure.png)
"#;

#[test]
fn negative_control_a_made_up_target_subcommand_or_flag_is_reported() {
    let page = scan(CONTROL);
    let (problems, checked) = check_commands("control.md", &page, known());
    let all = problems.join("\n");
    for expected in [
        "`make no-such-target-for-the-docs-test`: no such target",
        "`make no-such-inline-target`: no such target",
        "`--no-such-flag-for-the-docs-test` is not a flag of `leaderwatch measure`",
        "`leaderwatch no-such-subcommand`: no such subcommand",
        "`--no-such-report-flag` is not a flag of `leaderwatch report`",
        "`--no-such-rate-flag` is not a flag of `leaderwatch rate`",
    ] {
        assert!(all.contains(expected), "not reported: {expected}\nreported:\n{all}");
    }
    // And nothing else: the right commands, kubectl, output lines and text blocks pass.
    assert_eq!(problems.len(), 6, "reported:\n{all}");
    assert_eq!(checked.make, 4, "make commands checked");
    assert_eq!(checked.leaderwatch, 5, "leaderwatch commands checked");
}

#[test]
fn negative_control_a_broken_link_or_anchor_is_reported() {
    let page = scan(CONTROL);
    let read = |p: &str| if p == "control.md" { Some(CONTROL.to_owned()) } else { read_repo(p) };
    let exists = |p: &str| p == "control.md" || exists_in_repo(p);
    let (problems, checked) = check_links("control.md", &page, &read, &exists);
    let all = problems.join("\n");
    for expected in [
        "link `docs/no-such-page.md`: no such file",
        "link `docs/trial.md#no-such-heading`: docs/trial.md has no heading",
        "link `#no-such-section`: control.md has no heading",
        "link `data/no-such-figure.png`: no such file",
    ] {
        assert!(all.contains(expected), "not reported: {expected}\nreported:\n{all}");
    }
    assert_eq!(problems.len(), 4, "reported:\n{all}");
    assert_eq!(checked, 7, "relative links checked (the https one is not)");
}

#[test]
fn slugs_follow_githubs_rules() {
    for (heading, slug_) in [
        ("Quickstart", "quickstart"),
        (
            "A real Kubernetes control plane on this machine: `make acceptance`, `make rehearse-kube`",
            "a-real-kubernetes-control-plane-on-this-machine-make-acceptance-make-rehearse-kube",
        ),
        ("PVCs outlive the StatefulSet — teardown", "pvcs-outlive-the-statefulset--teardown"),
        ("Measuring leader changes (ADR-005)", "measuring-leader-changes-adr-005"),
        (
            "How a sitting ends: `status` and `incomplete_reason`",
            "how-a-sitting-ends-status-and-incomplete_reason",
        ),
        ("See [the docs](docs/x.md) now", "see-the-docs-now"),
    ] {
        assert_eq!(slug(heading), slug_, "{heading}");
    }
    let page = scan("# A\n\n## A\n\n```sh\n# not a heading\n```\n\n### A\n");
    assert_eq!(
        anchors(&page),
        BTreeSet::from(["a".to_owned(), "a-1".to_owned(), "a-2".to_owned()])
    );
}

#[test]
fn the_shell_splitter_keeps_quotes_and_drops_comments_and_substitutions() {
    let c = simple_commands(
        r#"A=1 make kube-up; export K=$PWD/x && leaderwatch measure --environment "a, b" --out d-$(date -u +%s) # --no"#,
    );
    let words: Vec<Vec<&str>> = c.iter().map(|w| w.iter().map(String::as_str).collect()).collect();
    assert_eq!(
        words,
        vec![
            vec!["A=1", "make", "kube-up"],
            vec!["export", "K=$PWD/x"],
            vec!["leaderwatch", "measure", "--environment", "a, b", "--out", "d-"],
        ]
    );
}

/// data/README.md names every events.csv kind and source the code can write (the enums in
/// src/model/event.rs), so a reader of the files finds each word explained.
#[test]
fn every_event_kind_and_source_is_in_data_readme() {
    use leaderwatch::model::event::{EventKind, Source};
    let text = std::fs::read_to_string(support::repo("data/README.md")).expect("data/README.md");
    let names =
        EventKind::ALL.iter().map(|k| k.as_str()).chain(Source::ALL.iter().map(|s| s.as_str()));
    let missing: Vec<&str> = names.filter(|n| !text.contains(&format!("`{n}`"))).collect();
    assert!(missing.is_empty(), "data/README.md does not name: {missing:?}");
    assert!(EventKind::ALL.len() > 50, "the list is the enum's, not empty");
}

/// One runbook (docs/gke-sitting.md, `leaderwatch sitting`): no page has the sitting's Job
/// applied by hand, an older route that skips the checks, the build check and the fetch.
#[test]
fn no_doc_applies_the_sitting_job_by_hand() {
    let mut files = doc_files();
    files.extend(["tasks/README.md".to_owned(), "data/README.md".to_owned()]);
    let by_hand = |line: &str| {
        line.contains("kubectl")
            && (line.contains(" apply") || line.contains(" create"))
            && line.contains("job-measure")
    };
    let mut found = Vec::new();
    for f in &files {
        let Some(text) = read_repo(f) else { continue };
        let mut in_code = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
            } else if in_code && by_hand(line) {
                found.push(format!("{f}:{}: {line}", i + 1));
            }
        }
    }
    assert!(found.is_empty(), "the Job applied by hand (use `leaderwatch sitting`): {found:?}");
    // Negative control: the line tasks/README.md once had is caught.
    assert!(by_hand(
        "kubectl apply -f deploy/k8s/leaderwatch/rbac.yaml -f deploy/k8s/leaderwatch/job-measure.yaml"
    ));
}
