//! In-memory file system for tests, with simulated power loss.
//!
//! [`MemFs`] owns a tree of directories and files held in memory. Per file it
//! tracks which bytes a `sync` made durable, and per directory which entries a
//! `sync_dir` made durable. [`MemFs::crash`] builds the state a machine would
//! find after power loss, in the manner of `RocksDB`'s `FaultInjectionTestFS`
//! and Pebble's strict `MemFS`. It can also freeze (fail every mutation from
//! some point on), fail syncs, and fail the n-th call of any kind of operation
//! once or forever (see [`Fault`]), so tests can stop a workload at every step.
//!
//! Paths are keys: `.` components are dropped, `..` is not resolved.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::faults::{Fault, FaultError, Faults, OpKind};
use super::fs::{FileLock, Fs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// How a simulated crash treats file data that was not synced. Directory
/// entries not made durable by `sync_dir` are always undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashMode {
    /// Every file keeps exactly its synced bytes; all unsynced appends are
    /// lost.
    DropUnsynced,
    /// Every file with unsynced appends keeps its synced bytes, then a random
    /// number of its complete unsynced appends (in order), then a random-length
    /// prefix of the next append: the write torn by the power loss. Bytes that
    /// were never written never appear.
    TearLastWrite,
    /// Like [`CrashMode::TearLastWrite`], but the torn append keeps its full
    /// length with its lost remainder read back as zeros, as on a file system
    /// that extended the file size but never wrote the data.
    TearWithZeros,
}

impl CrashMode {
    /// Every mode, for tests that try each.
    pub const ALL: [CrashMode; 3] =
        [CrashMode::DropUnsynced, CrashMode::TearLastWrite, CrashMode::TearWithZeros];
}

/// The error of every mutation while frozen.
const FROZEN: &str = "simulated crash: file system frozen";

/// The error of `sync` and `sync_dir` while [`MemFs::fail_syncs`] is on.
const SYNC_FAILED: &str = "simulated fsync failure";

/// A file's contents, shared by its directory entries and open handles, so a
/// rename moves the file under any open writer.
type InodeRef = Arc<Mutex<Inode>>;

#[derive(Default)]
struct Inode {
    /// Live bytes, visible to readers as soon as they are appended.
    data: Vec<u8>,
    /// Length of the prefix of `data` made durable by a sync.
    synced_len: usize,
    /// End offsets of the non-empty appends since the last sync, ascending.
    /// Invariant: the last one is `data.len()`; when empty, `data.len()` is
    /// `synced_len`.
    unsynced_ends: Vec<usize>,
}

impl Inode {
    fn new_ref(data: Vec<u8>) -> InodeRef {
        let synced_len = data.len();
        Arc::new(Mutex::new(Inode { data, synced_len, unsynced_ends: Vec::new() }))
    }

    /// The bytes a power loss leaves of this file.
    fn after_crash(&self, mode: CrashMode, rng: &mut SplitMix64) -> Vec<u8> {
        let ends = &self.unsynced_ends;
        if mode == CrashMode::DropUnsynced || ends.is_empty() {
            return self.data[..self.synced_len].to_vec();
        }
        let complete = rng.up_to(ends.len());
        let start = if complete == 0 { self.synced_len } else { ends[complete - 1] };
        let mut out = self.data[..start].to_vec();
        if let Some(&end) = ends.get(complete) {
            // Appends are recorded only when non-empty, so end > start and
            // the torn prefix is strictly shorter than the append.
            let kept = rng.up_to(end - start - 1);
            out.extend_from_slice(&self.data[start..start + kept]);
            if mode == CrashMode::TearWithZeros {
                out.resize(end, 0);
            }
        }
        out
    }
}

/// A directory: its live entries and those a crash would find.
#[derive(Default)]
struct Dir {
    live: BTreeMap<String, InodeRef>,
    /// The entries as of the last `sync_dir`.
    durable: BTreeMap<String, InodeRef>,
}

struct State {
    /// Every directory; directories are durable once created. Ordered so a
    /// crash visits files in a fixed order and replays from its seed.
    dirs: BTreeMap<PathBuf, Dir>,
    /// Paths with a live [`FileLock`].
    locks: HashSet<PathBuf>,
    /// Mutating operations that succeeded so far.
    ops: u64,
    /// Mutations fail once `ops` reaches this.
    freeze_at: Option<u64>,
    /// `sync` and `sync_dir` fail while set.
    fail_syncs: bool,
    /// Call counters and injected faults.
    faults: Faults,
}

impl State {
    /// A state holding `dirs` plus the roots of absolute and relative paths.
    fn new(mut dirs: BTreeMap<PathBuf, Dir>) -> State {
        dirs.entry(PathBuf::new()).or_default();
        dirs.entry(PathBuf::from("/")).or_default();
        State {
            dirs,
            locks: HashSet::new(),
            ops: 0,
            freeze_at: None,
            fail_syncs: false,
            faults: Faults::default(),
        }
    }

    /// Counts a call of `op` on `path`; fails it if a fault targets it.
    /// With `BASALT_FAULT_TRACE` set, prints where each injected failure
    /// happened, to find the engine code that mishandled it.
    fn check_fault(&mut self, op: OpKind, path: &Path) -> Result<()> {
        match self.faults.on_call(op) {
            Some(error) => {
                if std::env::var_os("BASALT_FAULT_TRACE").is_some() {
                    eprintln!(
                        "injected fault: {op:?} {}: {}",
                        path.display(),
                        std::backtrace::Backtrace::force_capture()
                    );
                }
                Err(fault_error(path, error))
            }
            None => Ok(()),
        }
    }

    fn check_not_frozen(&self, path: &Path) -> Result<()> {
        if self.freeze_at.is_some_and(|at| self.ops >= at) {
            return Err(io_error(path, ErrorKind::Other, FROZEN));
        }
        Ok(())
    }

    fn check_sync(&self, path: &Path) -> Result<()> {
        if self.fail_syncs {
            return Err(io_error(path, ErrorKind::Other, SYNC_FAILED));
        }
        Ok(())
    }

    /// The directory `dir` (normalized), or `NotFound` naming `path`.
    fn dir_mut(&mut self, dir: &Path, path: &Path) -> Result<&mut Dir> {
        self.dirs.get_mut(dir).ok_or_else(|| not_found(path))
    }

    /// The live file at the normalized `path`, if any.
    fn file_at(&self, path: &Path) -> Option<&InodeRef> {
        let name = path.file_name()?.to_string_lossy();
        self.dirs.get(path.parent()?)?.live.get(name.as_ref())
    }

    /// The live file at `path`, or `NotFound`.
    fn lookup(&self, path: &Path) -> Result<InodeRef> {
        self.file_at(&normalize(path)).cloned().ok_or_else(|| not_found(path))
    }

    /// Binds `name` in `dir` to `inode`; the directory must exist and `name`
    /// must not be a subdirectory.
    fn bind(&mut self, dir: &Path, name: String, inode: InodeRef, path: &Path) -> Result<()> {
        if self.dirs.contains_key(&dir.join(&name)) {
            return Err(io_error(path, ErrorKind::IsADirectory, "is a directory"));
        }
        self.dir_mut(dir, path)?.live.insert(name, inode);
        Ok(())
    }

    fn create_dir_all(&mut self, path: &Path) -> Result<()> {
        let norm = normalize(path);
        let mut missing = Vec::new();
        for dir in norm.ancestors() {
            if self.dirs.contains_key(dir) {
                break;
            }
            if self.file_at(dir).is_some() {
                return Err(io_error(path, ErrorKind::NotADirectory, "not a directory"));
            }
            missing.push(dir.to_path_buf());
        }
        for dir in missing {
            self.dirs.insert(dir, Dir::default());
        }
        Ok(())
    }

    fn rename(&mut self, from: &Path, to: &Path) -> Result<()> {
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        if !self.dirs.contains_key(&to_dir) {
            return Err(not_found(to));
        }
        let inode = self.lookup(from)?;
        if (&from_dir, &from_name) == (&to_dir, &to_name) {
            return Ok(());
        }
        self.bind(&to_dir, to_name, inode, to)?;
        self.dir_mut(&from_dir, from)?.live.remove(&from_name);
        Ok(())
    }

    /// Names of the entries of the normalized `dir`: files and subdirectories.
    fn list(&self, dir: &Path, path: &Path) -> Result<Vec<String>> {
        let entries = self.dirs.get(dir).ok_or_else(|| not_found(path))?;
        let mut names: Vec<String> = entries.live.keys().cloned().collect();
        let subdirs = self.dirs.keys().filter(|p| p.parent() == Some(dir));
        names.extend(subdirs.filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned())));
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// The state a crash of the process (not the machine) leaves: every live
    /// entry and every appended byte, now all durable.
    fn after_process_crash(&self) -> State {
        let mut copies: HashMap<*const Mutex<Inode>, InodeRef> = HashMap::new();
        let mut dirs = BTreeMap::new();
        for (path, dir) in &self.dirs {
            let mut entries = BTreeMap::new();
            for (name, inode) in &dir.live {
                let copy = copies
                    .entry(Arc::as_ptr(inode))
                    .or_insert_with(|| Inode::new_ref(inode.lock().data.clone()));
                entries.insert(name.clone(), Arc::clone(copy));
            }
            dirs.insert(path.clone(), Dir { live: entries.clone(), durable: entries });
        }
        State::new(dirs)
    }

    /// The state a power loss leaves: durable entries, crashed file bytes.
    fn after_crash(&self, mode: CrashMode, seed: u64) -> State {
        let mut rng = SplitMix64(seed);
        // Keyed by inode address, so a file under two durable names (a rename
        // synced in one directory only) stays one file with one tear.
        let mut copies: HashMap<*const Mutex<Inode>, InodeRef> = HashMap::new();
        let mut dirs = BTreeMap::new();
        for (path, dir) in &self.dirs {
            let mut entries = BTreeMap::new();
            for (name, inode) in &dir.durable {
                let copy = copies
                    .entry(Arc::as_ptr(inode))
                    .or_insert_with(|| Inode::new_ref(inode.lock().after_crash(mode, &mut rng)));
                entries.insert(name.clone(), Arc::clone(copy));
            }
            dirs.insert(path.clone(), Dir { live: entries.clone(), durable: entries });
        }
        State::new(dirs)
    }
}

/// Runs a mutating operation of kind `kind`: fails if frozen or if a fault
/// targets it, counts it if it succeeds.
fn mutate<T>(
    state: &Mutex<State>,
    kind: OpKind,
    path: &Path,
    op: impl FnOnce(&mut State) -> Result<T>,
) -> Result<T> {
    let mut state = state.lock();
    state.check_not_frozen(path)?;
    state.check_fault(kind, path)?;
    let out = op(&mut state)?;
    state.ops += 1;
    Ok(out)
}

fn fault_error(path: &Path, error: FaultError) -> Error {
    let (kind, what) = error.kind_and_message();
    io_error(path, kind, what)
}

fn io_error(path: &Path, kind: ErrorKind, what: &str) -> Error {
    Error::io(path, std::io::Error::new(kind, what))
}

fn not_found(path: &Path) -> Error {
    io_error(path, ErrorKind::NotFound, "no such file or directory")
}

/// The key of `path`: its components without `.`.
fn normalize(path: &Path) -> PathBuf {
    path.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

/// Splits a file path into its normalized directory and its name.
fn split(path: &Path) -> Result<(PathBuf, String)> {
    let norm = normalize(path);
    match (norm.parent(), norm.file_name()) {
        (Some(dir), Some(name)) => Ok((dir.to_path_buf(), name.to_string_lossy().into_owned())),
        _ => Err(io_error(path, ErrorKind::InvalidInput, "not a file path")),
    }
}

/// splitmix64: a tiny PRNG, so a crash replays from its seed without a
/// dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..=max`; the modulo bias does not matter for tests.
    fn up_to(&mut self, max: usize) -> usize {
        (self.next_u64() % (max as u64 + 1)) as usize
    }
}

/// An in-memory file system that simulates power loss; see the module docs.
///
/// Clones share one file system. [`MemFs::crash`] returns an independent one.
#[derive(Clone)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

impl MemFs {
    /// An empty file system: only the root `/` and the empty path (the root
    /// of relative paths) exist.
    pub fn new() -> MemFs {
        MemFs::from_state(State::new(BTreeMap::new()))
    }

    fn from_state(state: State) -> MemFs {
        MemFs { state: Arc::new(Mutex::new(state)) }
    }

    /// A new, independent file system holding what a machine would find after
    /// losing power now: only directory entries made durable by `sync_dir`,
    /// each file cut to its synced bytes and then treated as `mode` says.
    /// Random choices come from `seed`, so a crash replays exactly. The copy
    /// has no locks, is not frozen and counts operations from zero.
    #[must_use]
    pub fn crash(&self, mode: CrashMode, seed: u64) -> MemFs {
        MemFs::from_state(self.state.lock().after_crash(mode, seed))
    }

    /// A new, independent file system holding what the disk holds after the
    /// process died now and the operating system wrote its cache back: every
    /// live entry and every appended byte, all durable. Like
    /// [`MemFs::crash`], the copy has no locks, faults or freeze.
    #[must_use]
    pub fn process_crash(&self) -> MemFs {
        MemFs::from_state(self.state.lock().after_process_crash())
    }

    /// Makes every mutating operation (create, append, flush, sync, rename,
    /// remove, `create_dir_all`, `sync_dir`) fail, as if the machine died,
    /// once `ops` more of them have succeeded. Reads keep working.
    pub fn freeze_after(&self, ops: u64) {
        let mut state = self.state.lock();
        state.freeze_at = Some(state.ops.saturating_add(ops));
    }

    /// Lifts [`MemFs::freeze_after`].
    pub fn unfreeze(&self) {
        self.state.lock().freeze_at = None;
    }

    /// True when mutating operations fail.
    pub fn is_frozen(&self) -> bool {
        let state = self.state.lock();
        state.freeze_at.is_some_and(|at| state.ops >= at)
    }

    /// Mutating operations that succeeded so far.
    pub fn mutating_ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// While `on`, `sync` and `sync_dir` fail with an I/O error and make
    /// nothing durable.
    pub fn fail_syncs(&self, on: bool) {
        self.state.lock().fail_syncs = on;
    }

    /// Arms `fault`: its `nth` counts calls of its kind from now on. Several
    /// faults may be armed at once; the first that matches a call fails it.
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.inject(fault);
    }

    /// Disarms every injected fault (counters keep counting).
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Calls of kind `op` so far, failed ones included.
    pub fn calls(&self, op: OpKind) -> u64 {
        self.state.lock().faults.calls(op)
    }

    /// Calls failed by injected faults so far.
    pub fn faults_fired(&self) -> u64 {
        self.state.lock().faults.fired()
    }

    /// Calls of a sync kind (`sync`, `sync_dir`) failed by injected faults.
    pub fn sync_faults_fired(&self) -> u64 {
        self.state.lock().faults.fired_syncs()
    }

    /// Sorted names of the files (not subdirectories) in `dir`; empty when
    /// `dir` does not exist.
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        let state = self.state.lock();
        state.dirs.get(&normalize(dir)).map(|d| d.live.keys().cloned().collect()).unwrap_or_default()
    }

    /// The live bytes of the file at `path`.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state.lock();
        state.file_at(&normalize(path)).map(|inode| inode.lock().data.clone())
    }

    /// The live length of the file at `path`.
    pub fn file_len(&self, path: &Path) -> Option<u64> {
        let state = self.state.lock();
        state.file_at(&normalize(path)).map(|inode| inode.lock().data.len() as u64)
    }

    /// Replaces the contents of the file at `path` (created, with its parent
    /// directories, if missing) with `bytes`, made durable with its directory
    /// entry. An existing file is rewritten in place, so open readers see the
    /// new bytes: this is how corruption tests flip bytes on disk. Neither
    /// frozen nor counted as an operation.
    pub fn write_file_synced(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let (dir, name) = split(path)?;
        let mut state = self.state.lock();
        state.create_dir_all(&dir)?;
        let inode = match state.file_at(&normalize(path)) {
            Some(inode) => Arc::clone(inode),
            None => Inode::new_ref(Vec::new()),
        };
        {
            let mut file = inode.lock();
            file.data = bytes.to_vec();
            file.synced_len = bytes.len();
            file.unsynced_ends.clear();
        }
        state.bind(&dir, name.clone(), Arc::clone(&inode), path)?;
        state.dir_mut(&dir, path)?.durable.insert(name, inode);
        Ok(())
    }
}

impl Default for MemFs {
    fn default() -> MemFs {
        MemFs::new()
    }
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // File contents are left out: they can be large.
        let state = self.state.lock();
        let files: usize = state.dirs.values().map(|d| d.live.len()).sum();
        f.debug_struct("MemFs")
            .field("dirs", &state.dirs.len())
            .field("files", &files)
            .field("ops", &state.ops)
            .field("freeze_at", &state.freeze_at)
            .field("fail_syncs", &state.fail_syncs)
            .field("faults_fired", &state.faults.fired())
            .finish_non_exhaustive()
    }
}

struct MemWritableFile {
    state: Arc<Mutex<State>>,
    inode: InodeRef,
    path: PathBuf,
    len: u64,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let appended = mutate(&self.state, OpKind::Append, &self.path, |_| {
            append_to(&self.inode, data);
            Ok(())
        });
        if let Err(e) = appended {
            if is_no_space(&e) {
                // A write cut short by a full disk: its first half landed.
                // `len` stays, as the real file's does after a failed write.
                append_to(&self.inode, &data[..data.len() / 2]);
            }
            return Err(e);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Appended bytes are visible at once; a flush only counts.
        mutate(&self.state, OpKind::Flush, &self.path, |_| Ok(()))
    }

    fn sync(&mut self) -> Result<()> {
        mutate(&self.state, OpKind::Sync, &self.path, |state| {
            state.check_sync(&self.path)?;
            let mut file = self.inode.lock();
            file.synced_len = file.data.len();
            file.unsynced_ends.clear();
            Ok(())
        })
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// Appends `data` to a file as one unsynced write.
fn append_to(inode: &InodeRef, data: &[u8]) {
    let mut file = inode.lock();
    file.data.extend_from_slice(data);
    if !data.is_empty() {
        let end = file.data.len();
        file.unsynced_ends.push(end);
    }
}

/// Whether `e` is an injected out-of-space error.
fn is_no_space(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == ErrorKind::StorageFull)
}

struct MemRandomAccessFile {
    state: Arc<Mutex<State>>,
    inode: InodeRef,
    path: PathBuf,
    /// The length when opened; reads stop there.
    len: u64,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let past_end = || {
            Error::corruption(
                &self.path,
                offset,
                format!("read of {len} bytes past end of file ({} bytes)", self.len),
            )
        };
        self.state.lock().check_fault(OpKind::Read, &self.path)?;
        if offset.checked_add(len as u64).is_none_or(|end| end > self.len) {
            return Err(past_end());
        }
        let file = self.inode.lock();
        // The file only shrinks under `write_file_synced`; that is past the
        // end too.
        let start = usize::try_from(offset).map_err(|_| past_end())?;
        let bytes = start.checked_add(len).and_then(|end| file.data.get(start..end));
        bytes.map(<[u8]>::to_vec).ok_or_else(past_end)
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// A copy of the file as it is now: like a real map of a file nobody
    /// changes. Counted as a read for fault injection.
    fn map(&self) -> Result<Option<bytes::Bytes>> {
        let len = usize::try_from(self.len).map_err(|_| Error::InvalidArgument("file too large".into()))?;
        self.read_at(0, len).map(|data| Some(bytes::Bytes::from(data)))
    }
}

/// Releases its path in the owning file system when dropped.
struct MemFileLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl Fs for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let (dir, name) = split(path)?;
        // A new inode: writers and readers of a replaced file keep the old one.
        let inode = Inode::new_ref(Vec::new());
        mutate(&self.state, OpKind::Create, path, |state| state.bind(&dir, name, Arc::clone(&inode), path))?;
        Ok(Box::new(MemWritableFile {
            state: Arc::clone(&self.state),
            inode,
            path: path.to_path_buf(),
            len: 0,
        }))
    }

    fn open(&self, path: &Path) -> Result<Box<dyn RandomAccessFile>> {
        let inode = {
            let mut state = self.state.lock();
            state.check_fault(OpKind::Open, path)?;
            state.lookup(path)?
        };
        let len = inode.lock().data.len() as u64;
        Ok(Box::new(MemRandomAccessFile {
            state: Arc::clone(&self.state),
            inode,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        mutate(&self.state, OpKind::Rename, from, |state| state.rename(from, to))
    }

    /// A second directory entry for the same inode (counted as a `Create`:
    /// it makes a directory entry, durable after `sync_dir`).
    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        let (dir, name) = split(to)?;
        mutate(&self.state, OpKind::Create, to, |state| {
            if state.file_at(&normalize(to)).is_some() {
                return Err(io_error(to, ErrorKind::AlreadyExists, "file exists"));
            }
            let inode = state.lookup(from)?;
            state.bind(&dir, name, inode, to)
        })
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let (dir, name) = split(path)?;
        mutate(&self.state, OpKind::Remove, path, |state| {
            state.dir_mut(&dir, path)?.live.remove(&name).map(|_| ()).ok_or_else(|| not_found(path))
        })
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::List, dir)?;
        state.list(&normalize(dir), dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let norm = normalize(path);
        let mut state = self.state.lock();
        state.check_fault(OpKind::Stat, path)?;
        Ok(state.dirs.contains_key(&norm) || state.file_at(&norm).is_some())
    }

    fn is_dir(&self, path: &Path) -> Result<bool> {
        let mut state = self.state.lock();
        state.check_fault(OpKind::Stat, path)?;
        Ok(state.dirs.contains_key(&normalize(path)))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        mutate(&self.state, OpKind::CreateDir, path, |state| state.create_dir_all(path))
    }

    /// Removes the directory, its files and every directory below it at
    /// once, durably (as directories are durable once created).
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        let norm = normalize(path);
        mutate(&self.state, OpKind::Remove, path, |state| {
            state.dirs.retain(|dir, _| !dir.starts_with(&norm));
            Ok(())
        })
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let norm = normalize(path);
        mutate(&self.state, OpKind::SyncDir, path, |state| {
            state.check_sync(path)?;
            let dir = state.dir_mut(&norm, path)?;
            dir.durable.clone_from(&dir.live);
            Ok(())
        })
    }

    /// Like the real lock, creates an empty file at `path` if missing; that
    /// is neither frozen nor counted as a mutating operation.
    fn lock(&self, path: &Path, dir: &Path) -> Result<Box<dyn FileLock>> {
        let (parent, name) = split(path)?;
        let key = normalize(path);
        let mut state = self.state.lock();
        state.check_fault(OpKind::Lock, path)?;
        if state.file_at(&key).is_none() {
            state.bind(&parent, name, Inode::new_ref(Vec::new()), path)?;
        }
        if !state.locks.insert(key.clone()) {
            return Err(Error::Locked(dir.to_path_buf()));
        }
        Ok(Box::new(MemFileLock { state: Arc::clone(&self.state), path: key }))
    }
}

#[cfg(test)]
mod tests;
