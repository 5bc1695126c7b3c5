//! Reads the versions of the peer crates from the workspace's Cargo.lock,
//! so that every result names the exact library it measured.

const CRATES: [(&str, &str); 6] = [
    ("redb", "REDB"),
    ("fjall", "FJALL"),
    ("heed", "HEED"),
    ("rusqlite", "RUSQLITE"),
    ("rocksdb", "ROCKSDB"),
    ("leveldb-sys", "LEVELDB"),
];

fn main() {
    let lock_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    println!("cargo:rerun-if-changed={lock_path}");
    let lock = std::fs::read_to_string(lock_path).unwrap_or_default();
    for (name, var) in CRATES {
        let needle = format!("name = \"{name}\"\nversion = \"");
        let version = lock
            .find(&needle)
            .and_then(|at| lock[at + needle.len()..].split('"').next())
            .unwrap_or("unknown");
        println!("cargo:rustc-env=BENCH_VERSION_{var}={version}");
    }
}
