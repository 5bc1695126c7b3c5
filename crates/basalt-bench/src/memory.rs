//! The equal-memory mode. "The same 64 MiB cache" is not the same memory:
//! engines that read through memory maps (Basalt, LMDB, SQLite with
//! `mmap_size`) or through `pread` into the OS page cache use every free
//! page of the machine on top of their own cache. In this mode a job's
//! read phases run a second time with everything they touch — heap, page
//! cache, mapped pages — held to one limit, the same for every engine, by
//! a memory cgroup (the kernel charges a page-cache page to the cgroup of
//! the process that reads it in, and reclaims within the cgroup at its
//! limit).
//!
//! The sequence, in the job's own process: close the engine, write back
//! and drop the database's pages from the page cache (`fsync` and
//! `POSIX_FADV_DONTNEED` on every file), join the cgroup the parent made
//! for the job, reopen the engine. Memory the process held before joining
//! (the harness's tables) stays charged where it was, so the limit bounds
//! what the reopened engine and its reads use.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::engine::Result;

/// A memory limit for a job's second pass of read phases.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryLimit {
    /// The limit, in bytes.
    pub bytes: u64,
    /// The job's cgroup directory, made by the parent before the job
    /// starts and removed after it ends.
    pub cgroup: PathBuf,
}

impl MemoryLimit {
    /// The suffix of the workload names measured under this limit
    /// (`omendb@128MiB`).
    pub fn suffix(&self) -> String {
        format!("@{}MiB", self.bytes >> 20)
    }
}

/// Which cgroup interface the machine mounts for memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// cgroup v1: `memory.limit_in_bytes`, `memory.max_usage_in_bytes`.
    V1,
    /// cgroup v2: `memory.max`, `memory.peak`.
    V2,
}

/// This process's memory cgroup directory and its interface.
fn own_cgroup() -> Result<(PathBuf, Version)> {
    let table = std::fs::read_to_string("/proc/self/cgroup")?;
    for line in table.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if controllers.split(',').any(|c| c == "memory") {
            let dir = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
            return Ok((dir, Version::V1));
        }
    }
    let unified = table.lines().find_map(|l| l.strip_prefix("0::"));
    if let Some(path) = unified {
        let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
        if dir.join("memory.max").exists() || dir.join("cgroup.subtree_control").exists() {
            return Ok((dir, Version::V2));
        }
    }
    Err("no memory cgroup is mounted for this process".into())
}

fn version_of(dir: &Path) -> Version {
    if dir.join("memory.limit_in_bytes").exists() { Version::V1 } else { Version::V2 }
}

/// Makes the cgroup `name` under this process's memory cgroup with a
/// limit of `bytes`. Fails with the reason (no cgroup, no permission, no
/// memory controller below this cgroup) when the machine does not allow
/// it: equal-memory mode then cannot run here.
pub fn create(name: &str, bytes: u64) -> Result<PathBuf> {
    let (parent, version) = own_cgroup()?;
    let dir = parent.join(name);
    let made = std::fs::create_dir(&dir)
        .and_then(|()| {
            let file = match version {
                Version::V1 => "memory.limit_in_bytes",
                Version::V2 => "memory.max",
            };
            std::fs::write(dir.join(file), bytes.to_string())
        })
        .and_then(|()| match version {
            // No swap here, but where there is, swapped-out pages must not
            // escape the limit.
            Version::V1 if dir.join("memory.memsw.limit_in_bytes").exists() => {
                std::fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string())
            }
            Version::V2 if dir.join("memory.swap.max").exists() => {
                std::fs::write(dir.join("memory.swap.max"), "0")
            }
            _ => Ok(()),
        });
    if let Err(e) = made {
        let _ = std::fs::remove_dir(&dir);
        return Err(format!(
            "equal-memory mode needs a memory cgroup this process may create ({}): {e}",
            dir.display()
        )
        .into());
    }
    Ok(dir)
}

/// Moves this process (every thread) into the cgroup `dir`.
pub fn join(dir: &Path) -> Result<()> {
    let mut procs = std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs"))?;
    procs.write_all(std::process::id().to_string().as_bytes())?;
    Ok(())
}

/// The most memory the cgroup `dir` has held (heap, page cache and mapped
/// pages charged to it), in bytes.
pub fn peak_bytes(dir: &Path) -> Option<u64> {
    let file = match version_of(dir) {
        Version::V1 => "memory.max_usage_in_bytes",
        Version::V2 => "memory.peak",
    };
    std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
}

/// Removes the cgroup `dir` once its processes have exited (the kernel
/// moves what is still charged to it to the parent).
pub fn remove(dir: &Path) {
    // A cgroup with no process left can be removed; retry briefly while
    // the kernel finishes the exit of the last one.
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Writes back and drops from the OS page cache every file under `dir`,
/// so the reads that follow start from the disk and every page they bring
/// in is charged to the reader's cgroup (a page already cached stays
/// charged to whoever read it first, outside any limit). The engine must
/// be closed: pages still mapped by a process are not dropped.
pub fn evict(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            evict(&entry.path())?;
        } else if kind.is_file() {
            let file = std::fs::File::open(entry.path())?;
            file.sync_all()?;
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_walks_subdirectories_and_keeps_the_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let path = dir.path().join("sub").join("data");
        std::fs::write(&path, vec![7u8; 4 << 20]).expect("write");
        let _ = std::fs::read(&path).expect("read");
        evict(dir.path()).expect("evict");
        assert_eq!(std::fs::read(&path).expect("read back").len(), 4 << 20, "the data stays");
    }

    #[test]
    fn suffix_names_the_limit() {
        let limit = MemoryLimit { bytes: 128 << 20, cgroup: PathBuf::new() };
        assert_eq!(limit.suffix(), "@128MiB");
    }
}
