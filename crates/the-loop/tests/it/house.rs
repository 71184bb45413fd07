//! The house in order (#28): no module of any crate in the workspace imports, through
//! others, a module that imports it back.
//!
//! The test reads every crate's `src/` as text (no build, no dependency) and draws one
//! graph per module that has children. The rule, precisely:
//!
//! - **Modules** are what `mod` declares: file and directory modules (`a.rs`, `a/mod.rs`)
//!   and inline ones (`mod tests { … }`), from each crate root (`lib.rs`, `main.rs`,
//!   `bin/*.rs`). The nodes of one graph are the children of one module — the crate
//!   root's top-level modules (`crate::receiver`, `crate::dispatcher`), or the children of
//!   any module (`explain::wording`, `explain::fields`) — each standing for itself and
//!   everything below it.
//! - **A reference** is a path in a `use` declaration (`use crate::…`, `use super::…`,
//!   `use self::…`, or one through a child's name), or a `crate::…`/`super::…` path in code.
//!   Comments, doc links and strings are not read. A path is followed to the module that
//!   defines what it names, through named and glob re-exports (`pub use event_log::
//!   EventLog` at the root is `event_log`'s); a name nothing defines in the text (an item a
//!   macro makes) counts as the last module the path reached.
//! - **An edge** `x -> y` joins two children of the module both sit under (their nearest
//!   common one) when anything inside `x` refers to anything inside `y`. A reference to
//!   an ancestor's own items (`super::Record` from `explain::item`) is an upward edge, to
//!   the ancestor; a parent's `mod` declarations, re-exports and uses of its children are
//!   downward and never an edge. So a cycle is always sideways: siblings that know each
//!   other, directly or around a ring — an upward edge cannot close one, since nothing
//!   points back down.
//! - **A cycle** is reported as `crate: a -> b -> a`, each module by its path in the
//!   crate, starting from the least; each edge with one reference that makes it.
//!
//! [`KNOWN_CYCLES`] lists the cycles of today that are being taken apart; a cycle not in
//! it fails the test, and so does an entry that is no longer a cycle. A file under `src/`
//! that no `mod` reaches fails it too (dead code, or a module the reader missed).
//!
//! `source` reads the text (tokens, and per module its children, items, imports and
//! references); this file draws the graphs and finds their cycles.

mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use source::{ModPath, Tree};

/// loop-daemon's cycles as of #28's start, to be emptied by #28's dispatcher rooms (the
/// seam module that owns inbox marks, planned work and the dispatch traits). Remove a line
/// as its cycle goes; never add one.
const KNOWN_CYCLES: &[&str] = &[
    // `api/observe.rs` reads `service::{Ingress, liveness}`; `service/build.rs` builds the
    // API with `api::ApiToken`.
    "loop-daemon: api -> service -> api",
    // `dispatcher/queue.rs` holds `pipeline::Planned`; `pipeline.rs` reads
    // `dispatcher::DeliveryStatus`.
    "loop-daemon: dispatcher -> pipeline -> dispatcher",
    // …and around the receiver: `dispatcher/mod.rs` takes `receiver::InboxMarks`, the
    // receiver's intake reports through `pipeline::Report`.
    "loop-daemon: dispatcher -> receiver -> pipeline -> dispatcher",
    // `dispatcher/batch.rs` reads `queue::Item`; `dispatcher/queue.rs` calls `batch::taken`.
    "loop-daemon: dispatcher::batch -> dispatcher::queue -> dispatcher::batch",
    // `live_config.rs` says `receiver::UNSIGNED_WARNING` and `filter_warning`; the
    // receiver holds a `live_config::LiveConfig`.
    "loop-daemon: live_config -> receiver -> live_config",
    // `pipeline.rs` implements `receiver::Dispatch`; the intake reports `pipeline::Report`.
    "loop-daemon: pipeline -> receiver -> pipeline",
    // `receiver/intake.rs` takes `InboxMarks` from `processor`; `processor.rs` drives
    // `intake::Intake`.
    "loop-daemon: receiver::intake -> receiver::processor -> receiver::intake",
    // `service/build.rs` reads `preflight::Ingress`; `preflight.rs` reads `build`'s
    // `Environment`.
    "loop-daemon: service::build -> service::preflight -> service::build",
];

/// Every crate of the workspace: `crates/*/src`.
fn workspace_crates() -> Vec<(String, PathBuf)> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(&crates)
        .expect("the workspace's crates directory")
        .flatten()
        .map(|entry| entry.path())
        .filter(|dir| dir.join("src").is_dir())
        .map(|dir| (dir.file_name().unwrap_or_default().to_string_lossy().into_owned(), dir))
        .collect();
    found.sort();
    found
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut found = BTreeMap::new();
    let mut unread = Vec::new();
    for (name, dir) in workspace_crates() {
        let src = dir.join("src");
        let read = |rel: &str| std::fs::read_to_string(src.join(rel)).ok();
        let mut files = rust_files(&src, "");
        for (label, root) in crate_roots(&name, &src) {
            let tree = Tree::load(&root, &read);
            files.retain(|file| !tree.files.contains(file));
            found.extend(cycles(&label, &tree));
        }
        unread.extend(files.into_iter().map(|file| format!("{name}/src/{file}")));
    }
    // A file no `mod` reaches is dead code, or a module this reader missed.
    assert!(unread.is_empty(), "no `mod` declaration reaches {unread:?}");
    let new: Vec<&String> = found.keys().filter(|c| !KNOWN_CYCLES.contains(&c.as_str())).collect();
    let gone: Vec<&&str> = KNOWN_CYCLES.iter().filter(|c| !found.contains_key(**c)).collect();
    let mut report = String::new();
    for cycle in &new {
        let _ = writeln!(report, "new import cycle: {cycle}\n{}", found[*cycle]);
    }
    for cycle in &gone {
        let _ = writeln!(report, "no longer a cycle, remove it from KNOWN_CYCLES: {cycle}");
    }
    assert!(new.is_empty() && gone.is_empty(), "{report}");
}

/// The `.rs` files under `dir`, relative to the `src/` it is in (`prefix`).
fn rust_files(dir: &Path, prefix: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path, &format!("{prefix}{name}/")));
        } else if name.ends_with(".rs") {
            files.insert(format!("{prefix}{name}"));
        }
    }
    files
}

/// A crate's roots: its library or binary, and each `src/bin/*.rs` (named after it).
fn crate_roots(name: &str, src: &Path) -> Vec<(String, String)> {
    let mut roots: Vec<(String, String)> = ["lib.rs", "main.rs"]
        .into_iter()
        .filter(|root| src.join(root).is_file())
        .map(|root| (name.to_owned(), root.to_owned()))
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<String> = bins
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|file| file.ends_with(".rs"))
            .collect();
        bins.sort();
        for bin in bins {
            let label = format!("{name} (bin {})", bin.trim_end_matches(".rs"));
            roots.push((label, format!("bin/{bin}")));
        }
    }
    roots
}

// ---------------------------------------------------------------------------------------
// The graphs and their cycles.

/// Every cycle of `tree`'s graphs, as `crate: a -> b -> a`, with the references that make
/// its edges.
fn cycles(label: &str, tree: &Tree) -> BTreeMap<String, String> {
    // Per parent module: `from -> to` and one reference that makes it.
    let mut graphs: BTreeMap<ModPath, BTreeMap<(String, String), String>> = BTreeMap::new();
    for (from, module) in &tree.modules {
        for reference in &module.references {
            let Some(to) = tree.resolve(from, &reference.path, 0) else { continue };
            if to.starts_with(from) {
                continue; // itself or below: downward
            }
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let parent = from[..common].to_vec();
            let a = from[common].clone();
            let b = to.get(common).cloned().unwrap_or_default(); // "" is the parent itself
            let path = reference.path.strip_suffix(&["self".to_owned()]).unwrap_or(&reference.path);
            let witness = format!("{} in {}", path.join("::"), reference.file);
            graphs.entry(parent).or_default().entry((a, b)).or_insert(witness);
        }
    }
    let mut found = BTreeMap::new();
    for (parent, edges) in &graphs {
        let name = |node: &str| [parent.as_slice(), &[node.to_owned()]].concat().join("::");
        for cycle in elementary_cycles(edges) {
            let mut text = format!("{label}: ");
            let mut why = String::new();
            for pair in cycle.windows(2) {
                let _ = write!(text, "{} -> ", name(&pair[0]));
                let edge = (pair[0].clone(), pair[1].clone());
                let _ =
                    writeln!(why, "  {} -> {}: {}", name(&pair[0]), name(&pair[1]), edges[&edge]);
            }
            text.push_str(&name(&cycle[0]));
            found.insert(text, why);
        }
    }
    found
}

/// The elementary cycles of a small graph, each from its least node and back to it.
fn elementary_cycles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys().filter(|(_, b)| !b.is_empty()) {
        next.entry(a).or_default().push(b);
    }
    let mut cycles = Vec::new();
    for start in next.keys().copied() {
        // Paths from `start` through nodes greater than it, so each cycle is found once.
        let mut stack = vec![(vec![start], 0usize)];
        while let Some((path, tried)) = stack.pop() {
            let last = path[path.len() - 1];
            let Some(&to) = next.get(last).and_then(|n| n.get(tried)) else { continue };
            stack.push((path.clone(), tried + 1));
            if to == start {
                let mut cycle: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
                cycle.push(start.to_owned());
                cycles.push(cycle);
            } else if to > start && !path.contains(&to) {
                stack.push(([path, vec![to]].concat(), 0));
            }
        }
    }
    cycles
}

// ---------------------------------------------------------------------------------------
// The checker itself, on crates written here.

fn cycles_of(files: &[(&str, &str)]) -> Vec<String> {
    let files: BTreeMap<String, String> =
        files.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned())).collect();
    let tree = Tree::load("lib.rs", &|rel| files.get(rel).cloned());
    cycles("c", &tree).into_keys().collect()
}

#[test]
fn a_cycle_through_a_reexport_at_the_crate_root_is_found_and_named() {
    let found = cycles_of(&[
        ("lib.rs", "mod event_log; mod json_file; pub use event_log::EventLog;"),
        ("event_log/mod.rs", "use crate::json_file::remove; pub struct EventLog;"),
        ("json_file.rs", "pub fn remove() {} fn quarantine(e: &crate::EventLog) {}"),
    ]);
    assert_eq!(found, ["c: event_log -> json_file -> event_log"]);
}

#[test]
fn a_parent_and_its_children_knowing_each_other_is_no_cycle() {
    let found = cycles_of(&[
        ("lib.rs", "mod explain;"),
        (
            "explain/mod.rs",
            "mod item; pub use item::describe; pub struct Trail; use self::item::*;",
        ),
        (
            "explain/item.rs",
            "use super::Trail; pub fn describe() {}\n#[cfg(test)] mod tests { use super::*; use crate::explain::Trail; }",
        ),
    ]);
    assert_eq!(found, Vec::<String>::new());
}

#[test]
fn siblings_under_one_parent_are_a_cycle_of_their_paths_even_in_tests_and_code() {
    let found = cycles_of(&[
        ("lib.rs", "mod config;"),
        ("config/mod.rs", "mod read; mod schema;"),
        (
            "config/read.rs",
            "pub fn walk() {}\n#[cfg(test)]\nmod tests {\n    fn t() { let s = \"crate::x\"; super::super::schema::Config::default(); }\n}",
        ),
        ("config/schema/mod.rs", "mod routing; pub use routing::*; pub struct Config;"),
        (
            "config/schema/routing.rs",
            "// use crate::nothing;\nfn r() { crate::config::read::walk(); }",
        ),
    ]);
    assert_eq!(found, ["c: config::read -> config::schema -> config::read"]);
}
