//! The version set and what readers see, with one owner: `Versions`.
//! Every change to the tree's files or catalog is logged to the MANIFEST
//! and installed in one place ([`Versions::install`]), under one hold of
//! the version set, so that no two installs interleave and none replaces
//! the state with a version older than one installed meanwhile (the race
//! issue 56's schema change fell into while the install was written in
//! seven places). Its locks are taken in this file only.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::files_in_use::FilesInUse;
use super::jobs::Jobs;
use super::lifecycle::Lifecycle;
use super::write_path::WritePath;
use crate::codec::internal::SeqNo;
use crate::error::{Error, Result};
use crate::files;
use crate::io::Fs;
use crate::memtable::Memtable;
use crate::range_del::TombstoneSet;
use crate::ranked::{Rank, RankedMutex};
use crate::version::{EditFailure, Version, VersionEdit, VersionSet};

/// What readers need, swapped as one unit: the active memtable, the
/// immutable ones waiting for flush (newest first) and the current version.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    pub imms: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

impl SuperVersion {
    /// The seqno of the newest range tombstone of `tree` over `key` that a
    /// read at `read` sees, in the memtables or the version; `expired`,
    /// the tree's expiry floor (`read/ttl.rs`, 0: none), counts as one
    /// just above it (or just above `read`, for an older reader). Without
    /// range tombstones (the common case) a flag per memtable and the
    /// version's empty set answer.
    pub(crate) fn range_cover(
        &self,
        tree: crate::ids::TreeId,
        key: &[u8],
        read: SeqNo,
        expired: SeqNo,
    ) -> Option<SeqNo> {
        let mut newest = (expired > 0).then(|| expired.min(read).saturating_add(1));
        for mem in std::iter::once(&self.mem).chain(&self.imms) {
            if let Some(set) = mem.range_tombstones(tree) {
                newest = newest.max(set.covering(key, read));
            }
        }
        if let Some(t) = self.version.tree(tree)
            && !t.range_tombstones.is_empty()
        {
            newest = newest.max(t.range_tombstones.covering(key, read));
        }
        newest
    }

    /// The range tombstones of `tree` at or below `read` that meet the keys
    /// `[lo, hi]` (`hi` `None`: no end), gathered from the memtables and
    /// the version into one set, with the tree's expiry floor `expired`
    /// (0: none); `None` when there are none (a range read then takes its
    /// fast paths).
    pub(crate) fn range_tombstones(
        &self,
        tree: crate::ids::TreeId,
        (lo, hi): (&[u8], Option<&[u8]>),
        read: SeqNo,
        expired: SeqNo,
    ) -> Option<Arc<TombstoneSet>> {
        let mut sets: Vec<Arc<TombstoneSet>> =
            std::iter::once(&self.mem).chain(&self.imms).filter_map(|m| m.range_tombstones(tree)).collect();
        if expired > 0 {
            sets.push(Arc::new(TombstoneSet::expired_through(expired)));
        }
        if let Some(t) = self.version.tree(tree)
            && !t.range_tombstones.is_empty()
        {
            sets.push(t.range_tombstones.clone());
        }
        sets.retain(|s| s.meets(lo, hi, read));
        match sets.as_slice() {
            [] => None,
            [only] if only.tombstones().iter().all(|t| t.seqno <= read) => Some(only.clone()),
            _ => Some(Arc::new(TombstoneSet::union(sets.iter().map(AsRef::as_ref), Some(read)))),
        }
    }
    /// The memtables (active first, then the immutable ones) holding
    /// entries of `tree`.
    pub(crate) fn memtables_holding(&self, tree: crate::ids::TreeId) -> impl Iterator<Item = &Arc<Memtable>> {
        std::iter::once(&self.mem).chain(&self.imms).filter(move |m| m.holds_tree(tree))
    }

    /// This super version with `version` installed and the memtables as
    /// `memtables` says.
    fn with(&self, version: Arc<Version>, memtables: Memtables<'_>) -> SuperVersion {
        let (mem, imms) = match memtables {
            Memtables::Keep => (self.mem.clone(), self.imms.clone()),
            Memtables::Flushed(flushed) => {
                let imms = self.imms.iter().filter(|m| !flushed.iter().any(|f| Arc::ptr_eq(m, f)));
                (self.mem.clone(), imms.cloned().collect())
            }
            Memtables::Fresh => (Arc::new(Memtable::new(self.mem.wal_number())), self.imms.clone()),
            Memtables::Recovered(mem) => (mem, Vec::new()),
        };
        SuperVersion { mem, imms, version }
    }

    /// This super version with its active memtable made immutable and an
    /// empty one on WAL `wal` in its place.
    fn switched(&self, wal: u64, version: Arc<Version>) -> SuperVersion {
        let mut imms = Vec::with_capacity(self.imms.len() + 1);
        imms.push(self.mem.clone());
        imms.extend(self.imms.iter().cloned());
        SuperVersion { mem: Arc::new(Memtable::new(wal)), imms, version }
    }
}

/// Memtable memory of one super version ([`Versions::memtable_bytes`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemtableBytes {
    pub active: usize,
    pub total: usize,
    pub immutables: usize,
}

/// What an install does to the memtables readers see.
pub(crate) enum Memtables<'a> {
    /// Nothing: the edit changes files or the catalog only.
    Keep,
    /// Drops the immutable memtables a flush wrote: their rows are in the
    /// edit's files now.
    Flushed(&'a [Arc<Memtable>]),
    /// Gives the new version a memtable no reader of an older super
    /// version holds (a schema change: such a reader must never find a row
    /// written under the new version). An empty active memtable is
    /// replaced by a new one on the same WAL; one with entries is switched
    /// to a new WAL. The caller owns the write path.
    Fresh,
    /// Only this memtable: recovery's, on the WAL it just created.
    Recovered(Arc<Memtable>),
}

/// The parts of the database an install works with besides the versions.
pub(crate) struct InstallParts<'a> {
    pub read_only: bool,
    pub lifecycle: &'a Lifecycle,
    pub jobs: &'a Jobs,
    pub files: &'a FilesInUse,
    pub writer: &'a WritePath,
    pub fs: &'a dyn Fs,
    pub dir: &'a Path,
}

impl InstallParts<'_> {
    /// Refuses an edit no open database may log now. A read-only open logs
    /// nothing (and must not reach the MANIFEST or rewrite CURRENT); once
    /// the directory is released, the MANIFEST may be another handle's.
    fn check_loggable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly(format!("{} was opened read-only", self.dir.display())));
        }
        if self.lifecycle.is_released() {
            return Err(Error::Closed("the database is closed: its MANIFEST is no longer written".into()));
        }
        Ok(())
    }

    /// A failed MANIFEST write leaves the file's durable contents unknown
    /// (a failed fsync may have kept the edit's bytes, which recovery would
    /// replay), so, as after a failed WAL sync, writes stop: nothing
    /// acknowledged later can be lost to an edit the caller was told
    /// failed. An edit refused before anything was written (it does not
    /// apply to the current version) only fails its caller.
    fn edit_failed(&self, failure: EditFailure) -> Error {
        match failure {
            EditFailure::Refused(e) => e,
            EditFailure::Unwritten(e) => self.jobs.fail(e),
        }
    }
}

/// The version set as an install's edit is made under its hold: the
/// current version, and file numbers (for the edit's own names, such as a
/// new tree's id).
pub(crate) struct Held<'a> {
    set: &'a mut VersionSet,
}

impl Held<'_> {
    /// The version the edit will apply to.
    pub(crate) fn current(&self) -> &Version {
        self.set.current_version()
    }

    /// A number never handed out before (file numbers and tree ids share
    /// the counter, so a tree id is never reused).
    pub(crate) fn new_file_number(&mut self) -> u64 {
        self.set.new_file_number()
    }

    /// Forgets the MANIFEST's commit-time marks older than every history
    /// window (see [`VersionSet::forget_commit_times_before`]).
    pub(crate) fn forget_commit_times_before(&mut self, ms: u64) {
        self.set.forget_commit_times_before(ms);
    }

    /// Whether the MANIFEST holds commit-time marks.
    pub(crate) fn has_commit_times(&self) -> bool {
        self.set.has_commit_times()
    }
}

/// The owner of the version set (the MANIFEST, the catalog and the files
/// of every tree) and of the super version readers load.
pub(crate) struct Versions {
    /// Held by every install from before its edit is made until the state
    /// is replaced, and by every read of the live and held file sets.
    set: RankedMutex<VersionSet>,
    /// What reads see. Readers load it without a lock or a reference-count
    /// update (arc-swap's thread-local debts), where a `RwLock<Arc<_>>`
    /// made every lookup write two shared cache lines that parallel readers
    /// bounced between cores.
    current: arc_swap::ArcSwap<SuperVersion>,
    /// Replacements of `current` one at a time, so none is lost: installs
    /// replace it under `set`, memtable switches (which change no version)
    /// without.
    replacing: RankedMutex<()>,
}

impl Versions {
    /// `set` as recovered or created, read through an empty super version
    /// until recovery installs the first one.
    pub(crate) fn new(set: VersionSet) -> Versions {
        Versions {
            set: RankedMutex::new(Rank::Versions, set),
            current: arc_swap::ArcSwap::from_pointee(SuperVersion {
                mem: Arc::new(Memtable::new(0)),
                imms: Vec::new(),
                version: Arc::new(Version::default()),
            }),
            replacing: RankedMutex::new(Rank::SuperVersion, ()),
        }
    }

    /// The current super version, for a short read (a lookup).
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<SuperVersion>> {
        self.current.load()
    }

    /// The current super version, owned (iterators keep it).
    pub(crate) fn load_full(&self) -> Arc<SuperVersion> {
        self.current.load_full()
    }

    /// Bytes held by the memtables of one super version that was current
    /// while they were read. Summing the sizes of a super version loaded
    /// earlier would add an immutable memtable a flush has meanwhile
    /// released to the active one's newer size, a total no moment had (the
    /// write-buffer test saw 27 KB "over" the budget that way). A super
    /// version is never stored twice, so finding the same one before and
    /// after the reads proves it was current in between; only the active
    /// memtable grows, and only while it is current.
    pub(crate) fn memtable_bytes(&self) -> MemtableBytes {
        loop {
            let sv = self.current.load_full();
            let active = sv.mem.approximate_bytes();
            let total = active + sv.imms.iter().map(|m| m.approximate_bytes()).sum::<usize>();
            if Arc::ptr_eq(&sv, &self.current.load()) {
                return MemtableBytes { active, total, immutables: sv.imms.len() };
            }
        }
    }

    /// The version set's current version, registered as handed out (its
    /// files stay while the caller holds it). During recovery it is newer
    /// than the installed super version's.
    pub(crate) fn current(&self) -> Arc<Version> {
        self.set.lock().current()
    }

    /// A number never handed out before, for a file or a tree.
    pub(crate) fn new_file_number(&self) -> u64 {
        self.set.lock().new_file_number()
    }

    /// A file number, held from collection until `files.release` (under
    /// the same hold of the set, so no collection sees it in neither set).
    pub(crate) fn new_file_number_held(&self, files: &FilesInUse) -> u64 {
        let mut set = self.set.lock();
        let n = set.new_file_number();
        files.hold([n]);
        n
    }

    /// Holds `numbers` from collection if `check` of the current version
    /// says so (a compaction's inputs, while they are still in its tree);
    /// under the hold of the set, as the collection reads its live and held
    /// sets, so each input is seen in one or the other.
    pub(crate) fn hold_if(
        &self,
        files: &FilesInUse,
        numbers: &[u64],
        check: impl FnOnce(&Version) -> Result<bool>,
    ) -> Result<bool> {
        let set = self.set.lock();
        let hold = check(set.current_version())?;
        if hold {
            files.hold(numbers.iter().copied());
        }
        Ok(hold)
    }

    /// Gives held files back to the collection (a job that installed
    /// nothing, or whose inputs are gone from the version).
    pub(crate) fn release(&self, files: &FilesInUse, numbers: &[u64]) {
        let _set = self.set.lock();
        files.release(numbers);
    }

    /// What the collection of obsolete files reads in one hold of the set:
    /// files live in any version handed out, files jobs hold, the log
    /// number below which WALs are obsolete, and the next file number (no
    /// file at or above it is this handle's).
    pub(crate) fn collectable(&self, files: &FilesInUse) -> Collectable {
        let mut set = self.set.lock();
        Collectable {
            live: set.live_files(),
            held: files.held(),
            log_number: set.log_number(),
            numbered_below: set.next_file_number(),
            manifest: set.manifest_number(),
        }
    }

    /// A checkpoint's start, in one hold of the set: the current version
    /// (its files stay while held), and an edit recreating it that names a
    /// new WAL, with the MANIFEST number to write it under; the counters
    /// match the version.
    pub(crate) fn checkpoint_edit(&self) -> (Arc<Version>, VersionEdit, u64) {
        let mut set = self.set.lock();
        let version = set.current();
        let wal_number = set.new_file_number();
        let manifest_number = set.new_file_number();
        let mut edit = set.snapshot_edit_with_counters(wal_number);
        edit.next_file_number = Some(manifest_number + 1);
        (version, edit, manifest_number)
    }

    /// Logs and installs the edit `make` returns from the set as it is
    /// under this hold (`None`: nothing to install), changes the memtables
    /// as `memtables` says in the same replacement of the state, then gives
    /// `releasing` (files the job held until the version named them) back
    /// to the collection. Returns the installed version. Every change to
    /// the version set goes through here.
    pub(crate) fn install(
        &self,
        parts: &InstallParts<'_>,
        memtables: Memtables<'_>,
        releasing: &[u64],
        make: impl FnOnce(&mut Held<'_>) -> Result<Option<VersionEdit>>,
    ) -> Result<Option<Arc<Version>>> {
        let mut set = self.set.lock();
        let Some(edit) = make(&mut Held { set: &mut set })? else {
            parts.files.release(releasing);
            return Ok(None);
        };
        parts.check_loggable()?;
        let version = set.log_and_apply(edit).map_err(|f| parts.edit_failed(f))?;
        debug_assert!(
            std::ptr::eq(Arc::as_ptr(&version), set.current_version()),
            "an install left another version current"
        );
        let fresh = matches!(memtables, Memtables::Fresh);
        let switch_to = match memtables {
            Memtables::Fresh if !self.current.load().mem.is_empty() => Some(set.new_file_number()),
            _ => None,
        };
        match switch_to {
            Some(wal) => self.switch_memtable_to(parts, wal, Some(version.clone()))?,
            None => self.replace(|sv| sv.with(version.clone(), memtables)),
        }
        // A schema change's version comes with a memtable of its own: no
        // row in it was written under another version. (The caller owns
        // the write path: nothing is written meanwhile.)
        debug_assert!(!fresh || self.current.load().mem.is_empty(), "a fresh memtable holds rows");
        parts.files.release(releasing);
        Ok(Some(version))
    }

    /// Installs a read-only open's state: the version set's current version
    /// with `mem`, every write the WALs held (nothing is logged: a
    /// read-only open writes nothing).
    pub(crate) fn install_recovered_read_only(&self, mem: Arc<Memtable>) {
        let version = self.set.lock().current();
        self.replace(|_| SuperVersion { mem, imms: Vec::new(), version });
    }

    /// Makes the active memtable immutable and starts a new one with a new
    /// WAL; the version stays. The caller owns the write path.
    pub(crate) fn switch_memtable(&self, parts: &InstallParts<'_>) -> Result<()> {
        if self.current.load().mem.is_empty() {
            return Ok(());
        }
        let wal = self.new_file_number();
        self.switch_memtable_to(parts, wal, None)
    }

    /// Makes the active memtable immutable and starts a new one on the same
    /// WAL: no file is created or synced. The flush of the old memtable
    /// then keeps the WAL (the active memtable still names it), and
    /// recovery skips its flushed records by seqno, as it does those of a
    /// flush that ran before a crash. The caller owns the write path.
    pub(crate) fn switch_memtable_on_wal(&self, parts: &InstallParts<'_>) {
        let sv = self.current.load();
        if sv.mem.is_empty() {
            return;
        }
        let wal = sv.mem.wal_number();
        drop(sv);
        self.replace(|sv| sv.switched(wal, sv.version.clone()));
        parts.jobs.wake();
    }

    /// Switches to a new WAL numbered `wal` and a memtable on it, installing
    /// `version` in the same replacement when given.
    fn switch_memtable_to(
        &self,
        parts: &InstallParts<'_>,
        wal: u64,
        version: Option<Arc<Version>>,
    ) -> Result<()> {
        let path = parts.dir.join(files::wal(wal));
        let created = parts.fs.create(&path).and_then(|f| {
            // The new WAL's directory entry must be durable before any
            // synced write in it is acknowledged.
            parts.fs.sync_dir(parts.dir)?;
            Ok(f)
        });
        let file = created.map_err(|e| parts.jobs.fail(e))?;
        parts.writer.switch_wal(file).map_err(|e| parts.jobs.fail(e))?;
        self.replace(|sv| sv.switched(wal, version.unwrap_or_else(|| sv.version.clone())));
        parts.jobs.wake();
        Ok(())
    }

    /// Logs the file numbers handed out, if the directory is still this
    /// handle's and its MANIFEST writable (no earlier failure, not a
    /// read-only open), then gives the directory up (`lifecycle.rs`), in
    /// one hold of the set: no install runs after.
    /// A compaction or index build running on a caller's thread may hold
    /// numbers of files it has not created yet: the next owner of the
    /// directory must start above them.
    pub(crate) fn release_directory(&self, parts: &InstallParts<'_>) -> Result<()> {
        let mut set = self.set.lock();
        if parts.lifecycle.is_released() {
            return Ok(());
        }
        // Decided under the hold of the set, after every install that ran:
        // without a writable MANIFEST (an earlier failure, a read-only
        // open) there is nothing to log.
        let log = !parts.jobs.failed() && !parts.read_only;
        let logged = if log {
            set.log_file_numbers().map_err(|f| match f {
                EditFailure::Refused(e) | EditFailure::Unwritten(e) => parts.jobs.fail(e),
            })
        } else {
            Ok(())
        };
        parts.lifecycle.release();
        logged
    }

    /// Replaces the super version with `f(current)`.
    fn replace(&self, f: impl FnOnce(&SuperVersion) -> SuperVersion) {
        let _replacing = self.replacing.lock();
        let next = f(&self.current.load());
        self.current.store(Arc::new(next));
    }
}

/// What the collection of obsolete files reads ([`Versions::collectable`]).
pub(crate) struct Collectable {
    pub live: HashSet<u64>,
    pub held: HashSet<u64>,
    pub log_number: u64,
    pub numbered_below: u64,
    pub manifest: u64,
}
