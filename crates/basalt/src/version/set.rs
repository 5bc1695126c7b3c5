//! The version set: the current [`Version`], the counters that must survive
//! a restart (next file number, log number, last seqno) and the MANIFEST
//! that logs every change.
//!
//! CURRENT names the live MANIFEST. It is replaced atomically: write
//! `CURRENT.tmp`, fsync it, rename it over CURRENT, fsync the directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use super::edit::VersionEdit;
use super::version::Version;
use crate::catalog::{DEFAULT_KEYSPACE, TreeKindRecord};
use crate::codec::internal::SeqNo;
use crate::error::{Error, Result};
use crate::files;
use crate::ids::DEFAULT_TREE;
use crate::io::Fs;
use crate::log::reader::read_log_file;
use crate::log::writer::LogWriter;

/// A MANIFEST larger than this is replaced by a fresh one holding a single
/// snapshot edit, so recovery never replays an unbounded log.
const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// Commit-time marks kept before the older half is thinned to every other
/// mark (the times of those commits become upper bounds two marks wide):
/// 2^21 marks are 35 minutes of commits in every millisecond, 32 MiB.
pub const COMMIT_MARKS_MAX: usize = 1 << 21;

/// Drops every other mark of the older half of `marks`: each dropped
/// mark's commits then map to the next mark's time, an upper bound.
pub fn thin_commit_marks(marks: &mut Vec<(SeqNo, u64)>) {
    let half = marks.len() / 2;
    let mut i = 0;
    marks.retain(|_| {
        let keep = i >= half || i % 2 == 1;
        i += 1;
        keep
    });
}

/// The versions of one database and the MANIFEST that records them.
pub struct VersionSet {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    current: Arc<Version>,
    /// Versions handed out that may still be in use (for obsolete-file GC).
    handed_out: Vec<Weak<Version>>,
    /// `None` after a failed MANIFEST write: the next edit starts a new one.
    manifest: Option<LogWriter>,
    manifest_number: u64,
    /// The MANIFEST read by recovery, until a new one is written.
    manifest_path: Option<PathBuf>,
    next_file_number: u64,
    /// The next file number as the MANIFEST last recorded it: numbers from
    /// here to `next_file_number` were handed out but a reopen would not
    /// know it ([`VersionSet::log_file_numbers`]).
    next_file_number_logged: u64,
    log_number: u64,
    last_seqno: SeqNo,
    /// The commit-time marks the MANIFEST holds (`db/state/clock.rs`),
    /// ascending: rewritten into every new MANIFEST.
    commit_times: Vec<(SeqNo, u64)>,
    /// They time every commit after this seqno.
    commit_times_after: SeqNo,
}

/// Why [`VersionSet::log_and_apply`] installed nothing.
#[derive(Debug)]
pub enum EditFailure {
    /// The edit does not apply to the current version; nothing was
    /// written, and the MANIFEST is as it was.
    Refused(Error),
    /// Writing the MANIFEST failed: what of the edit is durable is
    /// unknown (a failed fsync may have kept its bytes).
    Unwritten(Error),
}

impl From<EditFailure> for Error {
    fn from(failure: EditFailure) -> Error {
        match failure {
            EditFailure::Refused(e) | EditFailure::Unwritten(e) => e,
        }
    }
}

/// What recovery found in the MANIFEST.
#[derive(Debug, Clone, Copy)]
pub struct Recovered {
    /// WALs numbered at or above this must be replayed.
    pub log_number: u64,
    /// Last seqno known to be in SSTs.
    pub last_seqno: SeqNo,
}

impl VersionSet {
    /// Creates the MANIFEST and CURRENT of a new database with the default tree.
    pub fn create(fs: Arc<dyn Fs>, dir: &Path) -> Result<VersionSet> {
        let mut vs = VersionSet::empty(fs, dir);
        let edit = VersionEdit {
            trees_created: vec![(DEFAULT_TREE, DEFAULT_KEYSPACE.to_string())],
            tree_kinds: vec![(DEFAULT_TREE, TreeKindRecord::Keyspace)],
            ..VersionEdit::default()
        };
        vs.current = Arc::new(vs.current.apply(&edit, Path::new(files::CURRENT), 0)?);
        vs.write_new_manifest()?;
        Ok(vs)
    }

    fn empty(fs: Arc<dyn Fs>, dir: &Path) -> VersionSet {
        VersionSet {
            fs,
            dir: dir.to_path_buf(),
            current: Arc::new(Version::default()),
            handed_out: Vec::new(),
            manifest: None,
            manifest_number: 0,
            manifest_path: None,
            next_file_number: 1,
            next_file_number_logged: 0,
            log_number: 0,
            last_seqno: 0,
            commit_times: Vec::new(),
            commit_times_after: 0,
        }
    }

    /// Reads CURRENT and replays the MANIFEST it names; writes nothing (call
    /// [`VersionSet::start_new_manifest`] once the caller has checked the
    /// result against the directory). `max_file_number_seen` is the
    /// largest file number in the directory; new numbers start above it.
    pub fn recover(
        fs: Arc<dyn Fs>,
        dir: &Path,
        max_file_number_seen: u64,
    ) -> Result<(VersionSet, Recovered)> {
        let mut vs = VersionSet::empty(fs, dir);
        let current_path = dir.join(files::CURRENT);
        let current = vs.fs.read_all(&current_path)?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(files::parse(s), Some(files::FileKind::Manifest(_))))
            .ok_or_else(|| Error::corruption(&current_path, 0, "CURRENT does not name a MANIFEST"))?;
        let manifest_path = dir.join(name);
        if !vs.fs.exists(&manifest_path)? {
            return Err(Error::corruption(
                &current_path,
                0,
                format!("CURRENT names {name}, which does not exist"),
            ));
        }
        let log = read_log_file(vs.fs.as_ref(), &manifest_path)?;
        let mut version = Version::default();
        for (offset, payload) in &log.records {
            let edit = VersionEdit::decode(payload, &manifest_path, *offset)?;
            version = version.apply(&edit, &manifest_path, *offset)?;
            vs.absorb_counters(&edit);
        }
        if log.records.is_empty() {
            return Err(Error::corruption(&manifest_path, 0, "MANIFEST holds no version edit"));
        }
        vs.next_file_number = vs.next_file_number.max(max_file_number_seen + 1);
        vs.current = Arc::new(version);
        for n in vs.current.file_numbers() {
            vs.next_file_number = vs.next_file_number.max(n + 1);
        }
        let recovered = Recovered { log_number: vs.log_number, last_seqno: vs.last_seqno };
        vs.manifest_path = Some(manifest_path);
        Ok((vs, recovered))
    }

    /// After recovery: writes a fresh MANIFEST holding the recovered state
    /// and points CURRENT at it.
    pub fn start_new_manifest(&mut self) -> Result<()> {
        self.write_new_manifest()
    }

    /// The MANIFEST recovery read (before a new one is started).
    pub fn recovered_manifest(&self) -> Option<&Path> {
        self.manifest_path.as_deref()
    }

    fn absorb_counters(&mut self, edit: &VersionEdit) {
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(s) = edit.last_seqno {
            self.last_seqno = self.last_seqno.max(s);
        }
        // Marks that do not follow on from those held (history was off in
        // between: the commits of the gap have no time) replace them.
        if edit.commit_times_cleared
            || !edit.commit_times.is_empty()
                && self.commit_times.last().is_none_or(|&(s, _)| edit.commit_times_after > s)
        {
            self.commit_times.clear();
            self.commit_times_after = edit.commit_times_after;
        }
        // Marks only grow; a mark at or below the last one (a checkpoint's
        // copy, replayed) adds nothing.
        let last = self.commit_times.last().copied();
        self.commit_times.extend(
            edit.commit_times.iter().filter(|&&(s, t)| last.is_none_or(|(ls, lt)| s > ls && t >= lt)),
        );
        if self.commit_times.len() > COMMIT_MARKS_MAX {
            thin_commit_marks(&mut self.commit_times);
        }
    }

    /// Whether the MANIFEST holds commit-time marks.
    pub fn has_commit_times(&self) -> bool {
        !self.commit_times.is_empty()
    }

    /// The commit-time marks the MANIFEST holds, and the seqno after
    /// which they time every commit.
    pub fn commit_times(&self) -> (SeqNo, &[(SeqNo, u64)]) {
        (self.commit_times_after, &self.commit_times)
    }

    /// Forgets the marks before the last one at or before `ms` (older
    /// commits are out of every history window): the next MANIFEST is
    /// written without them.
    pub fn forget_commit_times_before(&mut self, ms: u64) {
        if ms == u64::MAX {
            // Every mark: no tree keeps history.
            self.commit_times.clear();
            return;
        }
        let keep_from = self.commit_times.partition_point(|&(_, t)| t <= ms).saturating_sub(1);
        if let Some(&(s, _)) = keep_from.checked_sub(1).and_then(|i| self.commit_times.get(i)) {
            self.commit_times_after = s;
        }
        self.commit_times.drain(..keep_from);
    }

    /// Writes a new MANIFEST holding the whole current state, points CURRENT
    /// at it, and removes the previous one.
    fn write_new_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let path = self.dir.join(files::manifest(number));
        let mut edit = self.current.snapshot_edit();
        edit.log_number = Some(self.log_number);
        edit.last_seqno = Some(self.last_seqno);
        edit.next_file_number = Some(self.next_file_number);
        edit.commit_times.clone_from(&self.commit_times);
        edit.commit_times_after = self.commit_times_after;
        let payload = edit.encode();
        check_record_bytes(payload.len(), "the MANIFEST's snapshot of the catalog and files")?;
        let mut writer = LogWriter::new(self.fs.create(&path)?);
        writer.append([payload.as_slice()])?;
        writer.sync()?;
        self.set_current(number)?;
        self.next_file_number_logged = self.next_file_number;
        let old = std::mem::replace(&mut self.manifest_number, number);
        self.manifest = Some(writer);
        if old != 0 {
            // The old MANIFEST is unreachable once CURRENT moved; failing to
            // delete it only leaves a file the next open removes.
            let _ = self.fs.remove(&self.dir.join(files::manifest(old)));
        }
        Ok(())
    }

    fn set_current(&self, manifest_number: u64) -> Result<()> {
        let tmp = self.dir.join(files::current_temp());
        let mut f = self.fs.create(&tmp)?;
        f.append(format!("{}\n", files::manifest(manifest_number)).as_bytes())?;
        f.sync()?;
        drop(f);
        self.fs.rename(&tmp, &self.dir.join(files::CURRENT))?;
        self.fs.sync_dir(&self.dir)
    }

    /// Reserves a file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// The number the next [`VersionSet::new_file_number`] hands out: no
    /// file of this set's has a number at or above it.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// Logs the next file number if numbers were handed out since the
    /// MANIFEST last recorded it, so that whoever opens the database next
    /// starts above every number this set gave out — including those of
    /// files not yet created, which a directory listing would not show.
    pub fn log_file_numbers(&mut self) -> std::result::Result<(), EditFailure> {
        if self.next_file_number_logged >= self.next_file_number {
            return Ok(());
        }
        self.log_and_apply(VersionEdit::default()).map(drop)
    }

    /// Logs `edit` durably to the MANIFEST, then installs the version it
    /// produces. On error nothing is installed.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> std::result::Result<Arc<Version>, EditFailure> {
        let manifest_path = self.dir.join(files::manifest(self.manifest_number));
        let next = self.current.apply(&edit, &manifest_path, 0).map_err(EditFailure::Refused)?;
        // What every edit the engine makes keeps true (a refused edit came
        // from the caller's bug, and so does a broken invariant).
        debug_assert!(
            next.broken_invariant().is_none(),
            "edit breaks the version: {:?}",
            next.broken_invariant()
        );
        debug_assert!(
            edit.files_added.iter().all(|(_, _, f)| f.number < self.next_file_number)
                && edit.blob_files_added.iter().all(|b| b.number < self.next_file_number),
            "an edit adds a file whose number was never handed out"
        );
        edit.next_file_number = Some(self.next_file_number);
        let payload = edit.encode();
        check_record_bytes(payload.len(), "the MANIFEST edit").map_err(EditFailure::Refused)?;
        let too_big = self.manifest.as_ref().is_none_or(|m| m.len() > MANIFEST_BYTES_MAX);
        let saved = (self.current.clone(), self.log_number, self.last_seqno);
        self.current = Arc::new(next);
        self.absorb_counters(&edit);
        let written = if too_big { self.write_new_manifest() } else { self.append_edit(&payload) };
        if let Err(e) = written {
            self.manifest = None;
            (self.current, self.log_number, self.last_seqno) = saved;
            return Err(EditFailure::Unwritten(e));
        }
        self.next_file_number_logged = self.next_file_number_logged.max(edit.next_file_number.unwrap_or(0));
        Ok(self.current())
    }

    fn append_edit(&mut self, payload: &[u8]) -> Result<()> {
        let Some(m) = self.manifest.as_mut() else {
            return Err(Error::Closed("MANIFEST writer is gone".into()));
        };
        m.append([payload])?;
        m.sync()
    }

    /// The current version; the set remembers it was handed out so its files
    /// are not deleted while a reader holds it.
    pub fn current(&mut self) -> Arc<Version> {
        self.handed_out.retain(|w| w.strong_count() > 0);
        self.handed_out.push(Arc::downgrade(&self.current));
        self.current.clone()
    }

    /// File numbers referenced by the current version or any version still
    /// held by a reader.
    pub fn live_files(&mut self) -> std::collections::HashSet<u64> {
        self.handed_out.retain(|w| w.strong_count() > 0);
        let mut live: std::collections::HashSet<u64> = self.current.file_numbers().collect();
        for v in self.handed_out.iter().filter_map(Weak::upgrade) {
            live.extend(v.file_numbers());
        }
        live
    }

    /// The current version, without registering it as handed out.
    pub fn current_version(&self) -> &Version {
        &self.current
    }

    /// An edit recreating the current version with the set's counters,
    /// naming `log_number` as the WAL to replay (a checkpoint's MANIFEST).
    pub fn snapshot_edit_with_counters(&self, log_number: u64) -> VersionEdit {
        let mut edit = self.current.snapshot_edit();
        edit.log_number = Some(log_number);
        edit.last_seqno = Some(self.last_seqno);
        edit.next_file_number = Some(self.next_file_number);
        edit.commit_times.clone_from(&self.commit_times);
        edit.commit_times_after = self.commit_times_after;
        edit
    }

    /// WALs numbered below this are obsolete.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Number of the live MANIFEST.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }
}

/// Refuses a record over the log's limit before anything is written:
/// recovery reads a longer one as a torn tail and would drop it, and
/// every record after it, without a word.
fn check_record_bytes(len: usize, what: &str) -> Result<()> {
    if len > crate::log::format::PAYLOAD_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "{what} would take {len} bytes, over a log record's limit of {} bytes",
            crate::log::format::PAYLOAD_BYTES_MAX
        )));
    }
    Ok(())
}
