//! The layout rules of `src/db/` that the compiler cannot check
//! (docs/architecture.md, "The database's parts and their locks"): a new
//! version is logged and installed in one place, and every lock of the
//! database's shared state is taken in the file of the part that owns it.
//! Each rule fails on a copy of the code it forbids.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).expect("read the source tree") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

fn db_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/db")
}

/// The lines of `text` outside comments, numbered from 1.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim_start().starts_with("//"))
}

/// Where `text` (a file at `path`, relative to `src/db`) calls
/// `log_and_apply` outside the one install.
fn installs_outside_versions(rel: &Path, text: &str) -> Vec<String> {
    if rel == Path::new("state/versions.rs") {
        return Vec::new();
    }
    code_lines(text)
        .filter(|(_, l)| l.contains("log_and_apply("))
        .map(|(n, l)| format!("{}:{n}: {}", rel.display(), l.trim()))
        .collect()
}

/// Where `text` (a file at `path`, relative to `src/db`) takes a lock
/// outside `state/`: every shared lock belongs to a part there. The
/// `Db` facade's thread handles and test hooks are the exceptions.
fn locks_outside_state(rel: &Path, text: &str) -> Vec<String> {
    if rel.starts_with("state") {
        return Vec::new();
    }
    code_lines(text)
        .filter(|(_, l)| l.contains(".lock()") && !l.contains("threads.lock()") && !l.contains("HOOK"))
        .map(|(n, l)| format!("{}:{n}: {}", rel.display(), l.trim()))
        .collect()
}

#[test]
fn versions_are_installed_in_one_place() {
    let mut found = Vec::new();
    for (path, text) in sources(&db_dir()) {
        let rel = path.strip_prefix(db_dir()).expect("under src/db");
        found.extend(installs_outside_versions(rel, &text));
    }
    assert!(found.is_empty(), "log_and_apply outside Versions::install:\n{}", found.join("\n"));
}

#[test]
fn locks_are_taken_by_their_owners_only() {
    let mut found = Vec::new();
    for (path, text) in sources(&db_dir()) {
        let rel = path.strip_prefix(db_dir()).expect("under src/db");
        found.extend(locks_outside_state(rel, &text));
    }
    assert!(found.is_empty(), "locks taken outside their owner in state/:\n{}", found.join("\n"));
}

/// The two rules catch what they are for: a second install written in a
/// job, and a part's lock taken by a room above.
#[test]
fn the_rules_fail_on_the_code_they_forbid() {
    let copy = "        let version = self.versions.lock().log_and_apply(edit)?;\n";
    assert_eq!(installs_outside_versions(Path::new("jobs/flush.rs"), copy).len(), 1);
    assert_eq!(locks_outside_state(Path::new("jobs/flush.rs"), copy).len(), 1);
    assert!(installs_outside_versions(Path::new("state/versions.rs"), copy).is_empty());
    assert!(locks_outside_state(Path::new("state/versions.rs"), copy).is_empty());
    let commented = "        // self.versions.lock().log_and_apply(edit)\n";
    assert!(installs_outside_versions(Path::new("jobs/flush.rs"), commented).is_empty());
}
