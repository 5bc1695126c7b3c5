//! What a commit group does, led by one writer of the queue
//! (`state/write_path.rs` runs the queue): room in the memtables, schema
//! and conflict checks, index upkeep, one WAL append (and at most one
//! fsync) for the whole group, memtable inserts, and the new seqno
//! published. Also the memtable switch, the exclusive writer right, and
//! the decoding of WAL records into memtables that recovery shares.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::catalog::TreeKind;
use crate::codec::internal::{Kind, SEQNO_MAX, SeqNo, pack_trailer};
use crate::db::state::inner::DbInner;
use crate::db::state::jobs::Interrupted;
use crate::db::state::versions::SuperVersion;
use crate::db::state::write_path::{ConflictCheck, Request};
use crate::db::write::index_upkeep::GroupOverlay;
use crate::db::write::write_buffer::{self, StallAction, WriteBufferState};
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::memtable::{ENTRY_OVERHEAD_BYTES, MemInserter, Memtable};
use crate::range_del::RangeTombstone;
use crate::row::{self, layout::TableLayout};
use crate::version::Version;
use crate::wal::batch::{self, BatchEntry, EncodedRows, WriteBatch};

/// How often a stalled writer re-checks the write-buffer state even without
/// a notification from the background threads.
const STALL_RECHECK: std::time::Duration = std::time::Duration::from_millis(50);

impl DbInner {
    /// Commits `batch`; returns once it is in the memtable (and durable, if
    /// `sync`).
    pub(crate) fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        self.write_checked(batch, sync, None)
    }

    /// [`DbInner::write`] of a transaction's batch, refused with
    /// [`Error::Conflict`] (nothing written) when `check` fails at commit.
    pub(crate) fn write_checked(
        &self,
        batch: WriteBatch,
        sync: bool,
        check: Option<ConflictCheck>,
    ) -> Result<()> {
        if self.read_only {
            return self.check_writable();
        }
        self.validate(&batch)?;
        // A transaction that wrote nothing but read keys for update still
        // has its reads checked, in the queue like any commit.
        if batch.is_empty() && check.as_ref().is_none_or(|c| c.keys.is_empty()) {
            // Nothing to log, but a synced empty write still promises that
            // every earlier write is durable.
            return if sync { self.sync_wal() } else { self.check_writable() };
        }
        self.writer.commit(
            batch,
            sync,
            check,
            self.opts.group_commit_bytes_max,
            |group| self.commit_group(group),
            || self.set_bg_error(Error::Closed("a write failed with a panic (a bug)".into())),
        )
    }

    /// Rejects a batch the engine cannot take, before anything is written.
    fn validate(&self, batch: &WriteBatch) -> Result<()> {
        if batch.encoded_len() > self.opts.batch_bytes_max {
            return Err(Error::InvalidArgument(format!(
                "write batch of {} bytes exceeds batch_bytes_max ({})",
                batch.encoded_len(),
                self.opts.batch_bytes_max
            )));
        }
        if batch.database().is_some_and(|db| db != self.id) {
            return Err(Error::InvalidArgument(
                "the write batch holds rows of a table of another database".into(),
            ));
        }
        self.check_batch_limits(batch)?;
        let version = self.versions.load().version.clone();
        if batch.has_merges() {
            self.check_merges(&version.catalog, batch)?;
        }
        for &(tree, arrow) in batch.trees() {
            // Key-value entries go to keyspaces only; Arrow rows to a live
            // table or to a keyspace's table face; nothing to an index but
            // the engine's own upkeep. Tree ids are never reused and the
            // batch belongs to this database, so the tree is the one its
            // rows were encoded for.
            match version.catalog.tree(tree).map(|t| &t.kind) {
                None => return Err(Error::InvalidArgument(format!("write to unknown tree {tree}"))),
                Some(TreeKind::Table(_)) if !arrow => {
                    return Err(Error::InvalidArgument(format!(
                        "a key-value entry for tree {tree}, a table's"
                    )));
                }
                Some(TreeKind::Index(_)) => {
                    return Err(Error::InvalidArgument(format!("a write to tree {tree}, an index")));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Refuses a batch with a merge operand for a keyspace bound to no merge
    /// operator, or one its operator can never fold.
    fn check_merges(&self, catalog: &crate::catalog::Catalog, batch: &WriteBatch) -> Result<()> {
        for e in batch.entries().filter(|e| e.kind == Kind::Merge) {
            let op = self.merge_operator(catalog, e.tree)?.ok_or_else(|| {
                let name = catalog.tree(e.tree).map_or("?", |t| t.name.as_str());
                Error::InvalidArgument(format!(
                    "keyspace {name} has no merge operator: bind one with Keyspace::set_merge_operator first"
                ))
            })?;
            op.check_operand(e.value).map_err(Error::InvalidArgument)?;
        }
        Ok(())
    }

    /// The merge operator `tree` is bound to in `catalog`, if any.
    pub(crate) fn merge_operator(
        &self,
        catalog: &crate::catalog::Catalog,
        tree: TreeId,
    ) -> Result<Option<Arc<dyn crate::merge::MergeOperator>>> {
        let Some(name) = catalog.merge_operator(tree) else { return Ok(None) };
        crate::merge::find(&self.opts.merge_operators, name)
            .map(Some)
            .ok_or_else(|| Error::InvalidArgument(format!("merge operator {name:?} is not registered")))
    }

    /// Refuses a batch whose longest key or value is over `key_bytes_max`
    /// or `value_bytes_max` (a write's check, and a transaction's when a
    /// write joins it).
    pub(crate) fn check_batch_limits(&self, batch: &WriteBatch) -> Result<()> {
        let (key_max, value_max) = batch.kv_lengths_max();
        if key_max > self.opts.key_bytes_max {
            return Err(Error::InvalidArgument(format!(
                "key of {key_max} bytes exceeds key_bytes_max ({})",
                self.opts.key_bytes_max
            )));
        }
        if value_max > self.opts.value_bytes_max {
            return Err(Error::InvalidArgument(format!(
                "value of {value_max} bytes exceeds value_bytes_max ({})",
                self.opts.value_bytes_max
            )));
        }
        let bound_max = batch.range_bound_max();
        if bound_max > self.opts.key_bytes_max.saturating_add(1) {
            return Err(Error::InvalidArgument(format!(
                "a range delete's bound of {bound_max} bytes exceeds key_bytes_max ({}) and the byte after a key",
                self.opts.key_bytes_max
            )));
        }
        Ok(())
    }

    /// The leader's work: room in the memtable, WAL append (+ fsync), insert,
    /// publish.
    fn commit_group(&self, group: &mut [Request]) -> Result<()> {
        self.check_writable()?;
        let incoming: usize =
            group.iter().map(|r| r.batch.encoded_len() + r.batch.len() * ENTRY_OVERHEAD_BYTES).sum();
        self.make_room(incoming)?;
        let last = self.writer.last_seqno();
        {
            // Index upkeep reads the state every earlier group left (the
            // leader published it before handing over).
            let sv = self.versions.load_full();
            // The keys written by the group's accepted batches so far, kept
            // only when a transaction in it needs them.
            let mut written: Option<HashSet<(TreeId, Vec<u8>)>> =
                group.iter().any(|r| r.check.is_some()).then(HashSet::new);
            // The range deletes of those batches, likewise.
            let mut written_ranges: Vec<(TreeId, RangeTombstone)> = Vec::new();
            let mut overlay = GroupOverlay::default();
            for r in group.iter_mut() {
                if let Err(e) = check_schema_versions(&sv.version, &r.batch) {
                    r.rejected = Some(e);
                    continue;
                }
                if let (Some(check), Some(written)) = (r.check.take(), &written)
                    && let Err(e) = self.check_conflicts(&sv, &check, written, &written_ranges)
                {
                    r.rejected = Some(e);
                    continue;
                }
                if let Err(e) = self.add_index_upkeep(&sv, last, &mut r.batch, &mut overlay) {
                    r.rejected = Some(e);
                    continue;
                }
                if let Some(written) = &mut written {
                    written.extend(written_keys(&r.batch).map(|(tree, key)| (tree, key.to_vec())));
                    if r.batch.has_range_deletes() {
                        written_ranges.extend(r.batch.entries().filter_map(|e| {
                            let end = e.range_end?;
                            let start = Bytes::copy_from_slice(e.key);
                            let end = end.key().map(Bytes::copy_from_slice);
                            Some((e.tree, RangeTombstone { start, end, seqno: SEQNO_MAX }))
                        }));
                    }
                }
            }
        }
        let first = last + 1;
        let count: u64 = group.iter().filter(|r| r.rejected.is_none()).map(|r| r.batch.len() as u64).sum();
        if count == 0 {
            // Only reads for update were accepted: nothing to log, but a
            // synced commit still promises that every write it read, and
            // every earlier one, is durable.
            if group.iter().any(|r| r.rejected.is_none() && r.sync) {
                self.writer.sync_wal().map_err(|e| self.set_bg_error(e))?;
            }
            return Ok(());
        }
        if first + count > SEQNO_MAX {
            return Err(Error::InvalidArgument("sequence numbers exhausted".into()));
        }
        let mut seqno = first;
        for r in group.iter_mut().filter(|r| r.rejected.is_none()) {
            r.batch.seal(seqno);
            seqno += r.batch.len() as u64;
        }
        let sync = group.iter().any(|r| r.sync);
        // The engine's time, which never runs backwards even when the wall
        // clock is set back: an expiry floor is computed at it, so a commit
        // stamped earlier could expire the moment it is acknowledged.
        let commit_ms = self.clock.now_ms();
        let wal_bytes = self.append_to_wal(group, sync, commit_ms)?;
        let inserted = self.insert_group(group, first)?;
        // Each seqno the group sealed is in the memtable, none twice.
        debug_assert_eq!(
            inserted, seqno,
            "the group sealed seqnos {first}..{seqno} but inserted up to {inserted}"
        );
        self.counters.record_memtable_bytes(self.write_buffer_state(0).total_bytes);
        // Timed before it is visible: a read never sees an untimed commit.
        self.clock.record(seqno - 1, commit_ms);
        self.writer.publish(seqno - 1);
        self.counters.record_group(group.len() as u64, wal_bytes, sync);
        Ok(())
    }

    /// Refuses a transaction's commit (`Error::Conflict`) when it read for
    /// update or wrote a key written after its snapshot: by a commit
    /// before this group (its newest version in `sv` is newer), or by a
    /// batch accepted earlier in this group (in `written`, not in `sv`
    /// yet). First committer wins.
    fn check_conflicts(
        &self,
        sv: &SuperVersion,
        check: &ConflictCheck,
        written: &HashSet<(TreeId, Vec<u8>)>,
        written_ranges: &[(TreeId, RangeTombstone)],
    ) -> Result<()> {
        // A transaction's snapshot was published before it began.
        debug_assert!(
            check.snapshot <= self.writer.last_seqno(),
            "a commit's snapshot {} is above the last seqno {}",
            check.snapshot,
            self.writer.last_seqno()
        );
        for (tree, key) in &check.keys {
            if written.contains(&(*tree, key.clone()))
                || written_ranges.iter().any(|(t, range)| t == tree && range.covers(key))
            {
                return Err(conflict(&sv.version, *tree, key));
            }
            if sv.version.tree(*tree).is_none() {
                return Err(Error::InvalidArgument(format!(
                    "the transaction read or wrote tree {tree}, a keyspace or table dropped since"
                )));
            }
            if self.newest_seqno_after(sv, *tree, key, check.snapshot)?.is_some() {
                return Err(conflict(&sv.version, *tree, key));
            }
        }
        Ok(())
    }

    /// Appends the group's accepted batches to the WAL in one write, synced
    /// if any writer asked; returns the bytes appended. A failure stops
    /// writes: the WAL may now hold part of the group, and no later write
    /// may be acknowledged after it.
    fn append_to_wal(&self, group: &[Request], sync: bool, unix_ms: u64) -> Result<u64> {
        self.writer.append(group, sync, unix_ms).map_err(|e| self.set_bg_error(e))
    }

    /// Inserts the group's accepted (logged) batches into the active
    /// memtable, the first at seqno `first`; returns the seqno after the
    /// last. A logged batch was validated and cannot fail to insert; if one
    /// does, the memtable no longer matches the WAL, and writes stop.
    fn insert_group(&self, group: &mut [Request], first: SeqNo) -> Result<SeqNo> {
        let (mem, version) = {
            let sv = self.versions.load();
            (sv.mem.clone(), sv.version.clone())
        };
        let mut inserter = mem.inserter();
        let mut next = first;
        for r in group.iter_mut().filter(|r| r.rejected.is_none()) {
            let batch = std::mem::take(&mut r.batch);
            let result = insert_entries(
                &mut inserter,
                next,
                batch.entries(),
                Some(batch.encoded_rows()),
                &version,
                Path::new(""),
                0,
            );
            if let Err(e) = result {
                debug_assert!(false, "inserting a logged batch failed: {e}");
                return Err(self.set_bg_error(e));
            }
            next += batch.len() as u64;
        }
        Ok(next)
    }

    /// Commits `batch` as a group of its own; the caller owns the write
    /// path (`with_exclusive_writer`), as an index build bringing touched rows
    /// up to date does.
    pub(crate) fn commit_owned(&self, batch: WriteBatch) -> Result<()> {
        let mut group = [Request::owned(batch)];
        self.commit_group(&mut group)?;
        match group[0].rejected.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fails if an earlier background or WAL error stopped writes.
    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly(format!("{} was opened read-only", self.dir.display())));
        }
        match self.jobs.error() {
            Some(e) => Err(stopped_by(&e)),
            None => Ok(()),
        }
    }

    /// What the write-buffer manager needs to decide on a group of
    /// `incoming` bytes.
    fn write_buffer_state(&self, incoming: usize) -> WriteBufferState {
        let memtables = self.versions.memtable_bytes();
        let version = self.versions.load().version.clone();
        let l0_files = version.trees.values().map(|t| t.levels[0].len()).max().unwrap_or(0);
        WriteBufferState {
            active_bytes: memtables.active,
            total_bytes: memtables.total,
            immutables: memtables.immutables,
            l0_files,
            incoming_bytes: incoming,
            drain_bytes_per_sec: self.jobs.drain_rate(),
        }
    }

    /// Applies the write-buffer policy before a group of `incoming` bytes is
    /// inserted: switch memtables, delay, or wait for background work.
    fn make_room(&self, incoming: usize) -> Result<()> {
        let mut waited: Option<Instant> = None;
        loop {
            match write_buffer::decide(&self.write_buffer_state(incoming), &self.opts) {
                StallAction::Proceed => break,
                StallAction::Delay(d) => {
                    // Counts the group and the time actually slept (a short
                    // delay is owed, slept later with others).
                    let slept = self.writer.sleep_owed(d);
                    self.counters.record_delay(slept);
                    break;
                }
                StallAction::SwitchMemtable => {
                    let t = Instant::now();
                    self.switch_memtable_for_room()?;
                    self.counters.record_switch(t.elapsed());
                }
                StallAction::WaitForFlush | StallAction::WaitForCompaction => {
                    waited.get_or_insert_with(Instant::now);
                    // Re-checked under the lock the background threads
                    // wake under, so a wake-up cannot be missed; the
                    // recheck interval is a second guard. Once the room is
                    // there the policy decides again (it may delay).
                    let stalled = || {
                        matches!(
                            write_buffer::decide(&self.write_buffer_state(incoming), &self.opts),
                            StallAction::WaitForFlush | StallAction::WaitForCompaction
                        )
                    };
                    match self.jobs.wait_while(Some(STALL_RECHECK), stalled) {
                        Ok(()) => {}
                        Err(Interrupted::Failed(e)) => return Err(stopped_by(&e)),
                        // The background threads are gone: nothing would make room.
                        Err(Interrupted::Stopping) => {
                            return Err(Error::Closed("the database is closed".into()));
                        }
                    }
                }
            }
        }
        if let Some(start) = waited {
            self.counters.record_stall(start.elapsed());
        }
        Ok(())
    }

    /// Makes the active memtable immutable and starts a new one with a new
    /// WAL. The caller must own the write path (leader or exclusive).
    pub(crate) fn switch_memtable(&self) -> Result<()> {
        self.versions.switch_memtable(&self.install_parts())
    }

    /// The write buffer's switch: the new memtable stays on the WAL while
    /// that WAL has room for another memtable's writes below
    /// `Options::wal_switch_bytes`, so a small budget switches memtables
    /// often without creating, and fsyncing, a WAL each time (the old
    /// WAL's fsync, which keeps a crash from leaving a hole, is what a
    /// switch costs the writer). The caller owns the write path.
    fn switch_memtable_for_room(&self) -> Result<()> {
        let room = (self.opts.memtable_switch_bytes() as u64).saturating_add(self.writer.wal_len());
        if room <= self.opts.wal_switch_bytes() {
            self.versions.switch_memtable_on_wal(&self.install_parts());
            return Ok(());
        }
        self.switch_memtable()
    }

    /// Runs `f` while owning the write path: no group commits in between.
    /// A panic in `f` (a bug, or a panicking `Fs`) still gives the write
    /// path back, or every later writer, and closing, would wait forever;
    /// it stops writes, as `f` may have left its work half done.
    pub(crate) fn with_exclusive_writer<T>(&self, f: impl FnOnce() -> T) -> T {
        self.writer.exclusive(f, || {
            self.set_bg_error(Error::Closed("a panic while owning the write path".into()));
        })
    }

    /// Makes every write so far durable.
    pub(crate) fn sync_wal(&self) -> Result<()> {
        self.check_writable()?;
        // A failed fsync leaves the WAL's durable state unknown: stop writes.
        self.with_exclusive_writer(|| self.writer.sync_wal().map_err(|e| self.set_bg_error(e)))
    }
}

/// Inserts a WAL payload read back in recovery into the memtable; errors
/// name its record (`path`, `offset`).
pub(crate) fn insert_batch(
    mem: &Memtable,
    rep: &[u8],
    version: &Version,
    path: &Path,
    offset: u64,
) -> Result<()> {
    let decoded = batch::decode(rep, path, offset)?;
    insert_entries(
        &mut mem.inserter(),
        decoded.first_seqno,
        decoded.entries.into_iter(),
        None,
        version,
        path,
        offset,
    )
}

/// Inserts a batch's entries, the first at seqno `first`. Key entries
/// and values are copied into the memtable's arena. Arrow entries use their
/// pre-encoded rows, or, in recovery (`encoded` is `None`), rows decoded
/// from their IPC stream with the table's layout. Rows of trees that no
/// longer exist are skipped.
fn insert_entries<'a>(
    mem: &mut MemInserter<'_>,
    first: u64,
    entries: impl Iterator<Item = BatchEntry<'a>>,
    encoded: Option<&[EncodedRows]>,
    version: &Version,
    path: &Path,
    offset: u64,
) -> Result<()> {
    let mut seqno = first;
    let mut arrow_index = 0;
    for e in entries {
        if let Some(end) = e.range_end {
            let tombstone = RangeTombstone {
                start: Bytes::copy_from_slice(e.key),
                end: end.key().map(Bytes::copy_from_slice),
                seqno,
            };
            mem.insert_range_delete(e.tree, tombstone);
            seqno += 1;
            continue;
        }
        if e.arrow_rows == 0 {
            mem.insert(e.tree, e.key, pack_trailer(seqno, e.kind), e.value)?;
            seqno += 1;
            continue;
        }
        let recovered;
        let rows = if let Some(all) = encoded {
            all.get(arrow_index).map(|r| r.rows.as_slice()).unwrap_or_default()
        } else {
            // The key-value tree has rows too (its table face), with the
            // key-value layout; a dropped tree's rows go nowhere.
            if version.catalog.tree(e.tree).is_none() {
                seqno += u64::from(e.arrow_rows);
                continue;
            }
            let layout =
                version.catalog.table_layout(e.tree).unwrap_or_else(|| Arc::new(TableLayout::key_value()));
            recovered = decode_arrow_entry(&layout, e.value, e.kind == Kind::Delete, e.arrow_rows)
                .map_err(|err| Error::corruption(path, offset, format!("table rows: {}", err.reason())))?;
            recovered.rows.as_slice()
        };
        arrow_index += 1;
        for (k, v) in rows {
            mem.insert(e.tree, k, pack_trailer(seqno, e.kind), v)?;
            seqno += 1;
        }
    }
    Ok(())
}

/// Re-encodes the rows of a logged Arrow entry.
fn decode_arrow_entry(layout: &TableLayout, ipc: &[u8], delete: bool, rows: u32) -> Result<EncodedRows> {
    let batch = row::batch_from_ipc(ipc)?;
    if batch.num_rows() != rows as usize {
        return Err(Error::InvalidArgument(format!("{} rows, the entry says {rows}", batch.num_rows())));
    }
    if delete {
        layout.check_key_batch(&batch)?;
    } else {
        layout.check_batch(&batch)?;
    }
    row::encode_rows(layout, &batch, delete)
}

/// The error a write gets once `e` stopped writes.
fn stopped_by(e: &Error) -> Error {
    Error::Closed(format!("writes stopped after an earlier error: {e}"))
}

/// The keys a batch writes: its key-value entries' and its rows'.
/// Refuses a batch whose table rows were encoded under a schema version
/// of their table other than the current one (an `ALTER` came between;
/// `row/evolve.rs`): the memtable holds rows of the current version only.
fn check_schema_versions(version: &Version, batch: &WriteBatch) -> Result<()> {
    if !batch.trees().iter().any(|&(_, arrow)| arrow) {
        return Ok(());
    }
    for (tree, _, rows) in batch.table_writes() {
        let (Some(encoded), Some(layout)) = (rows.schema_version, version.catalog.table_layout_ref(tree))
        else {
            continue;
        };
        if encoded != layout.version() {
            let name = version.catalog.tree(tree).map_or("?", |t| t.name.as_str());
            return Err(Error::Conflict(format!(
                "the columns of table {name} changed after these rows were made (schema version {encoded}, now {}); nothing was written",
                layout.version()
            )));
        }
    }
    Ok(())
}

fn written_keys(batch: &WriteBatch) -> impl Iterator<Item = (TreeId, &[u8])> {
    let single =
        batch.entries().filter(|e| e.arrow_rows == 0 && e.range_end.is_none()).map(|e| (e.tree, e.key));
    let rows = batch
        .table_writes()
        .flat_map(|(tree, _, rows)| rows.rows.iter().map(move |(key, _)| (tree, key.as_ref())));
    single.chain(rows)
}

/// The [`Error::Conflict`] of a transaction that lost `key` of `tree`.
fn conflict(version: &Version, tree: TreeId, key: &[u8]) -> Error {
    let (what, shown) = match version.catalog.tree(tree) {
        Some(def) => match &def.kind {
            TreeKind::Table(t) => (format!("table {}", def.name), row::describe_key(&t.layout, key)),
            _ => (format!("keyspace {}", def.name), format!("{:?}", key.escape_ascii().to_string())),
        },
        None => (format!("tree {tree}"), format!("{:?}", key.escape_ascii().to_string())),
    };
    Error::Conflict(format!(
        "{what}, key {shown}: written by another commit since this transaction's snapshot"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};

    use crate::io::MemFs;
    use crate::{Db, Error, Options, TableOptions, WriteBatch};

    /// The outside review's bug 5: a key-value entry in a table's tree made
    /// the flush fail and the database unopenable. Only the crate can build
    /// such a batch now; the engine refuses it all the same, and a
    /// key-value entry for a tree that does not exist.
    #[test]
    fn kv_entry_into_a_table_tree_is_refused() {
        let fs = MemFs::new();
        let opts = Options { fs: Arc::new(fs.clone()), ..Options::default() };
        let db = Db::open("/db", opts.clone()).expect("open");
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let table = db.create_table("t", schema, &["id"], TableOptions::default()).expect("table");
        for tree in [table.tree(), table.tree() + 1000] {
            let mut batch = WriteBatch::new();
            batch.put_raw(tree, b"k", b"not a row");
            let refused = db.write(batch);
            assert!(matches!(refused, Err(Error::InvalidArgument(_))), "{refused:?}");
        }
        db.put("k", "v").expect("writes go on");
        db.flush().expect("flush");
        drop(table);
        db.close().expect("close");
        let db = Db::open("/db", opts).expect("reopen");
        assert_eq!(db.get("k").expect("get").as_deref(), Some(&b"v"[..]));
    }
}
