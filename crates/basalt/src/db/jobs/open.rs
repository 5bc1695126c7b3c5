//! Opening a database: directory checks, the LOCK, the MANIFEST, and replay
//! of the WALs that were not flushed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::codec::internal::{SEQNO_MAX, SeqNo};
use crate::db::state::clock::CommitClock;
use crate::db::state::counters::Counters;
use crate::db::state::files_in_use::FilesInUse;
use crate::db::state::index_builds::IndexBuilds;
use crate::db::state::inner::DbInner;
use crate::db::state::jobs::Jobs;
use crate::db::state::lifecycle::Lifecycle;
use crate::db::state::open_trees::OpenTrees;
use crate::db::state::row_cache::RowCache;
use crate::db::state::snapshots::Snapshots;
use crate::db::state::sst_readers::SstReaders;
use crate::db::state::versions::{Memtables, Versions};
use crate::db::state::write_path::WritePath;
use crate::db::write::commit::insert_batch;
use crate::error::{Error, Result};
use crate::files::{self, FileKind};
use crate::io::Fs;
use crate::log::reader::read_log_file;
use crate::log::writer::LogWriter;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::sst::block_cache::BlockCache;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::batch;

/// Opens or creates the database at `dir`; the flush thread is not yet
/// running when this returns.
pub(crate) fn open(dir: &Path, opts: Options, read_only: bool) -> Result<DbInner> {
    validate_options(&opts)?;
    let (exists, lock) = prepare_and_lock(opts.fs.as_ref(), dir, &opts, read_only)?;
    // Everything but the lock goes through the guard (`lifecycle.rs`).
    let released = crate::io::DirectoryRelease::default();
    let fs: Arc<dyn crate::io::Fs> = Arc::new(crate::io::GuardedFs::new(opts.fs.clone(), released.clone()));
    let names = fs.list(dir)?;
    let (versions, log_number, last_seqno) = recover_versions(&fs, dir, &names, exists, read_only)?;
    // Every keyspace's merge operator must be at hand before anything
    // reads or compacts its operands (nothing is changed when one is not).
    let catalog = versions.current_version().catalog.clone();
    for (tree, name) in catalog.merge_operator_records() {
        if crate::merge::find(&opts.merge_operators, &name).is_none() {
            let keyspace = catalog.tree(tree).map_or_else(|| tree.to_string(), |t| t.name.clone());
            return Err(Error::InvalidArgument(format!(
                "keyspace {keyspace} is bound to merge operator {name:?}, which is neither a builtin nor in Options::merge_operators: register it to open this database"
            )));
        }
    }
    let wals = wals_to_replay(&names, log_number);
    let (after, marks) = versions.commit_times();
    let clock = CommitClock::new(after, marks.to_vec(), last_seqno, opts.clock.clone());
    let inner = DbInner {
        dir: dir.to_path_buf(),
        fs: fs.clone(),
        id: next_db_id(),
        lifecycle: Lifecycle::new(released, lock),
        read_only,
        versions: Versions::new(versions),
        writer: WritePath::new(LogWriter::new(Box::new(NoFile)), last_seqno),
        jobs: Jobs::new(),
        files: FilesInUse::new(),
        sst_readers: Arc::new(SstReaders::new(
            fs.clone(),
            dir.to_path_buf(),
            opts.mmap_reads,
            opts.max_open_files,
            Arc::new(BlockCache::new(opts.block_cache_bytes)),
        )),
        blob_files: Arc::new(crate::blob::BlobFiles::new(fs.clone(), dir.to_path_buf())),
        row_cache: (opts.row_cache_bytes > 0).then(|| RowCache::new(opts.row_cache_bytes)),
        snapshots: Snapshots::new(),
        clock,
        feed_index: crate::db::state::feed_index::FeedIndex::new(),
        counters: Counters::default(),
        open_trees: OpenTrees::new(),
        indexes: IndexBuilds::default(),
        opts,
    };
    inner.recover_wals(&wals, last_seqno)?;
    if !read_only {
        inner.drop_unfinished_indexes()?;
        inner.delete_obsolete_files(true)?;
    }
    Ok(inner)
}

/// The version set of the database in `dir` (whose files are `names`),
/// with the log number below which WALs are obsolete and the last seqno
/// the MANIFEST knows: recovered from the MANIFEST (a writable open then
/// starts a new one), or created for a new database.
fn recover_versions(
    fs: &Arc<dyn Fs>,
    dir: &Path,
    names: &[String],
    exists: bool,
    read_only: bool,
) -> Result<(VersionSet, u64, SeqNo)> {
    if !exists {
        // Leftovers of a creation that crashed before CURRENT was written.
        for n in names {
            if matches!(files::parse(n), Some(FileKind::Manifest(_) | FileKind::Temp)) {
                fs.remove(&dir.join(n))?;
            }
        }
        return Ok((VersionSet::create(fs.clone(), dir)?, 0, 0));
    }
    // File numbers handed out from now on start above every one in the
    // directory, whatever the MANIFEST logged.
    let max_seen = names
        .iter()
        .filter_map(|n| match files::parse(n) {
            Some(FileKind::Wal(x) | FileKind::Sst(x) | FileKind::Blob(x) | FileKind::Manifest(x)) => Some(x),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let (mut vs, rec) = VersionSet::recover(fs.clone(), dir, max_seen)?;
    check_files_present(fs.as_ref(), dir, &vs, names, rec.log_number)?;
    if !read_only {
        vs.start_new_manifest()?;
    }
    debug_assert!(vs.next_file_number() > max_seen, "a recovered set would hand out a number in use");
    Ok((vs, rec.log_number, rec.last_seqno))
}

/// The WALs at or above `log_number` among `names`, oldest first: those
/// whose writes may not be in any SST.
fn wals_to_replay(names: &[String], log_number: u64) -> Vec<u64> {
    files::wal_numbers(names).into_iter().filter(|&x| x >= log_number).collect()
}

/// Whether a database exists at `dir`, and the directory lock. A
/// read-only open writes nothing: no lock (other readers may hold the
/// database open), no database created.
fn prepare_and_lock(
    fs: &dyn Fs,
    dir: &Path,
    opts: &Options,
    read_only: bool,
) -> Result<(bool, Option<Box<dyn crate::io::FileLock>>)> {
    if read_only {
        if !fs.exists(&dir.join(files::CURRENT))? {
            return Err(Error::InvalidArgument(format!(
                "{} holds no database (no CURRENT) to open read-only",
                dir.display()
            )));
        }
        probe_for_writer(fs, dir)?;
        return Ok((true, None));
    }
    let exists = prepare_dir(fs, dir, opts)?;
    Ok((exists, Some(fs.lock(&dir.join(files::LOCK), dir)?)))
}

/// Refuses a read-only open of a database a writer holds open: its files
/// change under a reader (compactions delete them). The lock is taken and
/// released at once, so readers do not hold writers off; a reader's own
/// probe is retried past (it holds the lock for microseconds). A database
/// without a `LOCK` file (a checkpoint) has no writer; a lock that cannot
/// be taken for another reason (a read-only file system) is not a writer.
fn probe_for_writer(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let lock_path = dir.join(files::LOCK);
    if !fs.exists(&lock_path)? {
        return Ok(());
    }
    for attempt in 0..5 {
        match fs.lock(&lock_path, dir) {
            Ok(lock) => {
                drop(lock);
                return Ok(());
            }
            Err(Error::Locked(held)) if attempt == 4 => return Err(Error::Locked(held)),
            Err(Error::Locked(_)) => std::thread::sleep(std::time::Duration::from_millis(2 << attempt)),
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Checks the recovered MANIFEST against the directory before anything is
/// written: every SST it names must exist, and so must the WAL its log number
/// names (that WAL is only deleted after a later edit retires it, so its
/// absence means the MANIFEST lost its last edits).
fn check_files_present(
    fs: &dyn Fs,
    dir: &Path,
    vs: &VersionSet,
    names: &[String],
    log_number: u64,
) -> Result<()> {
    let manifest = vs.recovered_manifest().map(Path::to_path_buf).unwrap_or_default();
    let present: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let version = vs.current_version();
    let ssts = version
        .trees
        .values()
        .flat_map(crate::version::TreeVersion::all_files)
        .map(|(_, f)| ("SST", files::sst(f.number), f.size));
    let blobs = version.blobs.values().map(|b| ("blob file", files::blob(b.number), b.size));
    for (what, name, recorded) in ssts.chain(blobs) {
        if !present.contains(name.as_str()) {
            return Err(Error::corruption(&manifest, 0, format!("names {what} {name}, which is missing")));
        }
        // A shorter file read through a memory map would raise SIGBUS at
        // the first access past its end instead of an error (see
        // `io/mmap.rs`), and a blob read would read short; each SST reader
        // checks the rest of its MANIFEST entry when it opens.
        let path = dir.join(&name);
        let size = fs.open(&path)?.len();
        if size != recorded {
            return Err(Error::corruption(
                &path,
                0,
                format!("{what} of {size} bytes, the MANIFEST says {recorded}"),
            ));
        }
    }
    if log_number == 0 {
        // Only the creation edit: the database was never opened to the end,
        // so it can hold no SST and no written WAL.
        for name in names {
            let later = match files::parse(name) {
                Some(FileKind::Sst(_) | FileKind::Blob(_)) => true,
                Some(FileKind::Wal(_)) => !fs.open(&dir.join(name))?.is_empty(),
                _ => false,
            };
            if later {
                return Err(Error::corruption(
                    &manifest,
                    0,
                    format!(
                        "holds only the creation edit, but {name} was written after it: the MANIFEST lost edits"
                    ),
                ));
            }
        }
    } else if !present.contains(files::wal(log_number).as_str()) {
        return Err(Error::corruption(
            &manifest,
            0,
            format!(
                "its log number names {}, which is missing: the MANIFEST lost later edits",
                files::wal(log_number)
            ),
        ));
    }
    Ok(())
}

/// The slowest write rate the write-buffer manager may delay writers to.
const DELAYED_WRITE_BYTES_PER_SEC_MIN: u64 = 16 << 10;

fn validate_options(opts: &Options) -> Result<()> {
    let bad = |what: &str| Err(Error::InvalidArgument(what.to_string()));
    if opts.memtable_bytes_max == 0 {
        return bad("memtable_bytes_max must be positive");
    }
    if opts.immutable_memtables_max == 0 {
        return bad("immutable_memtables_max must be at least 1");
    }
    if opts.block_bytes_target == 0 {
        return bad("block_bytes_target must be positive");
    }
    if opts.table_block_bytes_target == 0 {
        return bad("table_block_bytes_target must be positive");
    }
    if opts.settled_block_bytes_target == 0 {
        return bad("settled_block_bytes_target must be positive");
    }
    for (name, limit) in [
        ("key_bytes_max", opts.key_bytes_max),
        ("value_bytes_max", opts.value_bytes_max),
        ("batch_bytes_max", opts.batch_bytes_max),
    ] {
        if limit == 0 {
            return Err(Error::InvalidArgument(format!("{name} must be positive")));
        }
    }
    if opts.batch_bytes_max > crate::log::format::PAYLOAD_BYTES_MAX - 4096 {
        return bad("batch_bytes_max may not exceed 1 GiB");
    }
    if opts.write_buffer_bytes_max == 0 {
        return bad("write_buffer_bytes_max must be positive");
    }
    if opts.write_buffer_soft_percent > 100 {
        return bad("write_buffer_soft_percent is a percentage of write_buffer_bytes_max: at most 100");
    }
    // Slower rates make one delayed write sleep for minutes (its size in
    // seconds at 1 B/s); RocksDB holds `delayed_write_rate` to the same floor.
    if opts.delayed_write_bytes_per_sec < DELAYED_WRITE_BYTES_PER_SEC_MIN {
        return Err(Error::InvalidArgument(format!(
            "delayed_write_bytes_per_sec must be at least {DELAYED_WRITE_BYTES_PER_SEC_MIN}"
        )));
    }
    if opts.blob_gc_garbage_percent == 0 || opts.blob_gc_garbage_percent > 100 {
        return bad(
            "blob_gc_garbage_percent must be 1 to 100 (0 would move every blob value at every compaction)",
        );
    }
    if opts.level_size_ratio < 2 {
        return bad("level_size_ratio must be at least 2 (deeper levels must be larger)");
    }
    // Writers wait at `l0_files_stop` for a compaction that only starts at
    // `l0_compaction_trigger`: a stop at or below the trigger waits forever
    // (the outside review's option hang). Only that is refused: a slowdown
    // below the trigger or above the stop works (it delays early, or never),
    // and without automatic compaction the L0 thresholds are not used.
    let (trigger, stop) = (opts.l0_compaction_trigger, opts.l0_files_stop);
    if opts.auto_compaction && (trigger == 0 || stop <= trigger) {
        return Err(Error::InvalidArgument(format!(
            "l0_files_stop ({stop}) must be above l0_compaction_trigger ({trigger}), which must be at least 1: \
             writers would wait at the stop for a compaction that never starts"
        )));
    }
    Ok(())
}

/// Checks what is at `dir` before anything is written there. Returns whether
/// a database exists. A file, or a non-empty directory without CURRENT
/// holding files Basalt did not write, is refused untouched.
fn prepare_dir(fs: &dyn Fs, dir: &Path, opts: &Options) -> Result<bool> {
    if !fs.exists(dir)? {
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist and create_if_missing is off",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
        return Ok(false);
    }
    if !fs.is_dir(dir)? {
        return Err(Error::InvalidArgument(format!("{} is a file, not a database directory", dir.display())));
    }
    let names = fs.list(dir)?;
    if names.iter().any(|n| n == files::CURRENT) {
        if opts.error_if_exists {
            return Err(Error::InvalidArgument(format!("a database already exists at {}", dir.display())));
        }
        return Ok(true);
    }
    let foreign = names
        .iter()
        .find(|n| !matches!(files::parse(n), Some(FileKind::Lock | FileKind::Temp | FileKind::Manifest(_))));
    if let Some(name) = foreign {
        return Err(Error::InvalidArgument(format!(
            "{} is not empty ({name}) and holds no Basalt database (no CURRENT file)",
            dir.display()
        )));
    }
    if !opts.create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "no database at {} and create_if_missing is off",
            dir.display()
        )));
    }
    Ok(false)
}

/// A number no other database opened by this process has: write batches
/// remember the database their table rows were encoded for.
fn next_db_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl DbInner {
    /// Replays the WALs into memtables, writes them to L0 SSTs, starts a
    /// fresh WAL and records all of it in one MANIFEST edit.
    fn recover_wals(&self, wals: &[u64], flushed_seqno: SeqNo) -> Result<()> {
        let mut mem = Memtable::new(0);
        let mut added = Vec::new();
        let mut blobs = Vec::new();
        let mut range_tombstones = Vec::new();
        let mut max_seqno = flushed_seqno;
        let mut logs = Vec::with_capacity(wals.len());
        for &number in wals {
            let path = self.dir.join(files::wal(number));
            let log = read_log_file(self.fs.as_ref(), &path)?;
            logs.push((path, log));
        }
        // Every WAL but the newest was synced before the next one was
        // created, so a damaged tail is a hole unless no later WAL holds a
        // record (a recovery that crashed leaves an empty newer WAL).
        let last_with_records = logs.iter().rposition(|(_, log)| !log.records.is_empty());
        for (i, (path, log)) in logs.iter().enumerate() {
            if let Some(offset) = log.torn_tail_at
                && last_with_records.is_some_and(|last| i < last)
            {
                return Err(Error::corruption(path, offset, "damaged record at the end of an older WAL"));
            }
        }
        let version = self.versions.current();
        for (path, log) in logs {
            // Each timed seal ends a commit group: its time is that of the
            // last seqno before it.
            let mut seals = log.seal_times.iter().peekable();
            for (i, (offset, payload)) in log.records.into_iter().enumerate() {
                let decoded = batch::decode(&payload, &path, offset)?;
                let seqnos: u64 = decoded.entries.iter().map(crate::wal::batch::BatchEntry::seqnos).sum();
                let last = decoded.first_seqno.saturating_add(seqnos.saturating_sub(1));
                while let Some(&&(before, ms)) = seals.peek() {
                    if before > i + 1 {
                        break;
                    }
                    if seqnos > 0 && before == i + 1 {
                        self.clock.record(last, ms);
                    }
                    seals.next();
                }
                if seqnos == 0 || decoded.first_seqno <= flushed_seqno {
                    continue;
                }
                if last > SEQNO_MAX {
                    return Err(Error::corruption(&path, offset, format!("seqno {last} out of range")));
                }
                max_seqno = max_seqno.max(last);
                insert_batch(&mem, &payload, &version, &path, offset)?;
                if !self.read_only && mem.approximate_bytes() >= self.opts.memtable_bytes_max {
                    let flushed = self.write_memtable(&[&mem])?;
                    added.extend(flushed.files);
                    blobs.extend(flushed.blob);
                    range_tombstones.extend(flushed.range_tombstones);
                    mem = Memtable::new(0);
                }
            }
        }
        if self.read_only {
            // The WALs' writes stay in memory: one memtable holds them all.
            self.versions.install_recovered_read_only(Arc::new(mem));
            self.writer.publish(max_seqno);
            return Ok(());
        }
        let flushed = self.write_memtable(&[&mem])?;
        added.extend(flushed.files);
        blobs.extend(flushed.blob);
        range_tombstones.extend(flushed.range_tombstones);
        let number = self.versions.new_file_number();
        let path = self.dir.join(files::wal(number));
        let file = self.fs.create(&path)?;
        self.fs.sync_dir(&self.dir)?;
        let edit = VersionEdit {
            log_number: Some(number),
            last_seqno: Some(max_seqno),
            files_added: added.into_iter().map(|(tree, f)| (tree, 0, f)).collect(),
            blob_files_added: blobs,
            range_tombstones_added: range_tombstones,
            ..VersionEdit::default()
        };
        let (after, marks) = self.commit_times_to_log(&version.catalog, max_seqno);
        let edit = VersionEdit { commit_times_after: after, commit_times: marks, ..edit };
        self.writer.replace_wal(file);
        self.install(Memtables::Recovered(Arc::new(Memtable::new(number))), &[], |_| Ok(Some(edit)))?;
        self.files.release_all();
        self.writer.publish(max_seqno);
        Ok(())
    }
}

/// Placeholder WAL file used only until recovery creates the real one.
struct NoFile;

impl crate::io::WritableFile for NoFile {
    fn append(&mut self, _: &[u8]) -> Result<()> {
        Err(Error::Closed("WAL not open yet".into()))
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        0
    }
}
