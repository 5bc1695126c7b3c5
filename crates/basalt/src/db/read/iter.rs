//! Range iteration over a key-value tree, through the tree's merged cursor
//! (`cursor.rs`). For each user key the newest version visible at the read
//! seqno decides; deleted keys are skipped.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use crate::blob::BlobFiles;
use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::codec::key::prefix_successor;
use crate::db::read::cursor::{TreeCursor, span_of};
use crate::db::state::open_trees::TreeShared;
use crate::db::{read::snapshot::Snapshot, state::inner::DbInner, state::versions::SuperVersion};
use crate::error::Result;
use crate::ids::TreeId;
use crate::range_del::TombstoneSet;
use crate::sst::filter::prefix_hash;
use crate::sst::{Blocks, SstIter};
use crate::version::Version;

/// Order of iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Reverse,
}

pub(crate) use crate::db::read::cursor::KeyRange;

/// Copies the bounds of a caller's range.
pub(crate) fn owned_range<K: AsRef<[u8]>>(range: &impl RangeBounds<K>) -> KeyRange {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of keys starting with `prefix`.
pub(crate) fn prefix_range(prefix: &[u8]) -> KeyRange {
    let end = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(prefix.to_vec()), end)
}

/// The newest visible value of each key of a range of one tree, at one
/// seqno, in order: what key-value iterators and index reads step through.
/// It holds its memtables and SST readers; the caller keeps the super
/// version it was opened on alive (its files must not be deleted).
pub(crate) struct RangeReader {
    cursor: TreeCursor,
    forward: bool,
    seqno: SeqNo,
    range: KeyRange,
    /// Where values kept in blob files are read from.
    blobs: (Arc<BlobFiles>, Arc<Version>),
    /// A run being read: source `.0`'s next `.1` entries are each the
    /// newest visible version of its key and in the range (see
    /// [`RangeReader::run_ahead`]).
    run: (usize, usize),
    /// A source whose current entry was handed out and which moves past
    /// it on the next step (so a borrowed entry stays valid until then).
    unstepped: Option<usize>,
    /// The entry the general path handed out last, and its seqno.
    held: (Bytes, Bytes),
    held_seqno: SeqNo,
    /// Range tombstones the read sees over the range: with any, every key
    /// takes the general path, which checks it against them.
    tombstones: Option<Arc<TombstoneSet>>,
    /// The keyspace's merge operator: a key whose newest version is an
    /// operand reads as its operands folded (`merged.rs`).
    merge: Option<Arc<dyn crate::merge::MergeOperator>>,
}

/// Where the entry a step moved to is.
#[derive(Debug, Clone, Copy)]
enum At {
    /// The current entry of this source (an SST block's row).
    Source(usize),
    /// [`RangeReader::held`].
    Held,
}

impl RangeReader {
    /// Opens a reader over `range` of `tree` at `seqno` in `sv`.
    pub(crate) fn open(
        inner: &DbInner,
        sv: &SuperVersion,
        seqno: SeqNo,
        tree: TreeId,
        range: KeyRange,
        direction: Direction,
    ) -> Result<RangeReader> {
        RangeReader::open_prefixed(inner, sv, seqno, tree, range, direction, None)
    }

    /// [`RangeReader::open`] of a range every key of which starts with
    /// `prefix`, a leading run of an index's indexed values: files whose
    /// filter lacks it are not read (`SstReader::may_hold_prefix`).
    pub(crate) fn open_prefixed(
        inner: &DbInner,
        sv: &SuperVersion,
        seqno: SeqNo,
        tree: TreeId,
        range: KeyRange,
        direction: Direction,
        prefix: Option<&[u8]>,
    ) -> Result<RangeReader> {
        let Some(files) = sv.version.tree(tree) else {
            return Err(crate::error::Error::InvalidArgument(format!("unknown tree {tree}")));
        };
        let forward = direction == Direction::Forward;
        let cursor = TreeCursor::open(
            &inner.sst_readers,
            sv,
            tree,
            files,
            (&range, forward),
            Blocks::InPlace,
            prefix.map(prefix_hash),
        )?;
        if cursor.asks_compaction() {
            inner.wake_compaction();
        }
        let blobs = (inner.blob_files.clone(), sv.version.clone());
        let expired = inner.expired_through(&sv.version.catalog, tree);
        let tombstones = sv.range_tombstones(tree, span_of(&range), seqno, expired);
        let merge = inner.merge_operator(&sv.version.catalog, tree)?;
        Ok(RangeReader {
            merge,
            tombstones,
            cursor,
            forward,
            seqno,
            range,
            blobs,
            run: (0, 0),
            unstepped: None,
            held: Default::default(),
            held_seqno: 0,
        })
    }

    /// The next key and its value, or `None` at the end of the range,
    /// sharing the block's or the memtable's bytes.
    pub(crate) fn next_entry(&mut self) -> Result<Option<(Bytes, Bytes)>> {
        match self.step()? {
            None => Ok(None),
            Some(at) => self.owned(at).map(Some),
        }
    }

    /// [`RangeReader::next_entry`] with the seqno of the version read (an
    /// index build writes each entry at its row's, so that both expire
    /// together: `read/ttl.rs`).
    pub(crate) fn next_entry_with_seqno(&mut self) -> Result<Option<(Bytes, Bytes, SeqNo)>> {
        let Some(at) = self.step()? else { return Ok(None) };
        let seqno = match at {
            At::Source(i) => self.cursor.sources()[i].key().map_or(0, |(_, trailer)| trailer >> 8),
            At::Held => self.held_seqno,
        };
        let (key, value) = self.owned(at)?;
        Ok(Some((key, value, seqno)))
    }

    /// The entry a step moved to, sharing the block's or the memtable's
    /// bytes.
    fn owned(&mut self, at: At) -> Result<(Bytes, Bytes)> {
        match at {
            At::Source(i) => {
                let sst = self.run_source(i)?;
                Ok((sst.key_bytes(), sst.value_bytes()))
            }
            At::Held => Ok(std::mem::take(&mut self.held)),
        }
    }

    /// The entry a step moved to, borrowed until the next step: where it
    /// is a row of a run in an SST block, its bytes where they lie, with no
    /// reference count taken.
    fn borrowed(&self, at: At) -> Result<(&[u8], &[u8])> {
        match at {
            At::Source(i) => {
                let sst = self.run_source(i)?;
                Ok((sst.user_key(), sst.value()))
            }
            At::Held => Ok((&self.held.0, &self.held.1)),
        }
    }

    /// Source `i` of a run: an SST's cursor.
    fn run_source(&self, i: usize) -> Result<&SstIter> {
        self.cursor.sources()[i]
            .sst()
            .ok_or_else(|| crate::error::Error::internal("a run's source is not an SST"))
    }

    /// Moves to the next entry: where it is, or `None` at the end.
    fn step(&mut self) -> Result<Option<At>> {
        if let Some(i) = self.unstepped.take() {
            self.cursor.skip_in_block(i, 1)?;
        }
        loop {
            let next = if self.run.1 == 0 { self.cursor.next_source() } else { Some(self.run.0) };
            let Some(next) = next else { return Ok(None) };
            if self.run.1 == 0 {
                self.run = self.run_ahead(next)?;
            }
            if self.run.1 > 0 {
                // The entry stays where it is until the next step.
                self.run.1 -= 1;
                self.unstepped = Some(self.run.0);
                return Ok(Some(At::Source(self.run.0)));
            }
            match self.step_one(next, true)? {
                Step::End => return Ok(None),
                Step::Entry(key, value, seqno) => {
                    self.held = (key, value);
                    self.held_seqno = seqno;
                    return Ok(Some(At::Held));
                }
                Step::Nothing => {}
            }
        }
    }

    /// How many entries are left in the range (each key's newest visible
    /// version, if a value), read a file or a run at a time: a whole SST
    /// whose keys no other source holds, with no deletes and nothing newer
    /// than the read, counts its distinct keys from its properties without
    /// reading a block; where one SST block holds a stretch of keys no
    /// other source has, every row a put visible at the read's seqno, the
    /// stretch is counted by a binary search, not entry by entry.
    pub(crate) fn count_rest(&mut self) -> Result<u64> {
        Ok(self.count_up_to(u64::MAX)?.unwrap_or(u64::MAX))
    }

    /// As [`RangeReader::count_rest`], but stops as soon as the count
    /// passes `limit` (`None`): an index plan asks whether an index's
    /// matches fit under its cap without reading past it.
    pub(crate) fn count_up_to(&mut self, limit: u64) -> Result<Option<u64>> {
        if let Some(i) = self.unstepped.take() {
            self.cursor.skip_in_block(i, 1)?;
        }
        let mut n = 0u64;
        loop {
            if n > limit {
                return Ok(None);
            }
            let Some(next) = self.cursor.next_source() else { return Ok(Some(n)) };
            if let Some(keys) = self.whole_file_ahead(next) {
                self.cursor.skip_file(next)?;
                n = n.saturating_add(keys);
                continue;
            }
            self.run = self.run_ahead(next)?;
            if self.run.1 > 0 {
                let (i, len) = std::mem::take(&mut self.run);
                self.cursor.skip_in_block(i, len)?;
                n = n.saturating_add(len as u64);
                continue;
            }
            match self.step_one(next, false)? {
                Step::End => return Ok(Some(n)),
                Step::Entry(..) => n += 1,
                Step::Nothing => {}
            }
        }
    }

    /// The rows of the file source `i` stands at the start of, when they
    /// can be counted from its properties: the file's keys are its alone
    /// and all in the range, it holds no delete and nothing newer than the
    /// read (so each key's newest version is a visible put), and it
    /// recorded its distinct keys (format version 5 on).
    fn whole_file_ahead(&self, i: usize) -> Option<u64> {
        if !self.forward || self.tombstones.is_some() {
            return None;
        }
        let file = self.cursor.file_alone_ahead(i)?;
        let properties = self.cursor.sources()[i].sst()?.reader().properties();
        let inside = !at_excluded_start(&self.range, true, &file.smallest.user_key)
            && !past_end(&self.range, true, &file.largest.user_key);
        let plain = properties.deletions == 0 && properties.max_seqno <= self.seqno;
        properties.distinct_keys.filter(|_| inside && plain)
    }

    /// A run at the cursor: `(source, length)` where the source whose
    /// entry comes next is an SST whose current block holds, from its
    /// position on, entries that are each the newest visible version of
    /// their key, no other source holding a key that low, all in the
    /// range; length 0 when there is none (the general path decides).
    /// Going forward only. The block's last row is part of a run only when
    /// no later entry of its source holds its key (the next block may
    /// start with older versions of it: [`TreeCursor::block_ends_key`]).
    fn run_ahead(&mut self, i: usize) -> Result<(usize, usize)> {
        if !self.forward || self.tombstones.is_some() {
            return Ok((0, 0));
        }
        let Some(sst) = self.cursor.sources()[i].sst() else { return Ok((0, 0)) };
        let Some((rows, start)) = sst.rows() else { return Ok((0, 0)) };
        if sst.plain_rows().is_none_or(|newest| newest > self.seqno)
            || at_excluded_start(&self.range, true, rows.key(start))
        {
            return Ok((0, 0));
        }
        let other = self.cursor.smallest_key_besides(i);
        let inside = |k: &[u8]| other.is_none_or(|o| k < o) && !past_end(&self.range, true, k);
        let last = rows.len() - 1;
        // Keys ascend: when the last passes, every row from `start` does
        // (the common case inside a range; one comparison instead of a
        // search).
        if !inside(rows.key(last)) {
            return Ok((i, rows.first_failing(start..last, inside) - start));
        }
        if self.cursor.block_ends_key(i)? {
            return Ok((i, last + 1 - start));
        }
        Ok((i, last - start))
    }

    /// One step of the general path from source `i` (the one whose entry
    /// comes next): the next key's versions merged. A
    /// value kept in a blob file is read only if `read_blobs` (a count
    /// needs to know it is there, not what it is).
    fn step_one(&mut self, i: usize, read_blobs: bool) -> Result<Step> {
        let cursor = &mut self.cursor;
        // Keys and values share the memtable's or the block's bytes:
        // a step copies nothing.
        let key = cursor.sources()[i].key_bytes();
        if past_end(&self.range, self.forward, &key) {
            return Ok(Step::End);
        }
        if let Some(op) = &self.merge {
            // Every version, for the operands and their base.
            let versions = cursor.take_all_versions(&key, self.seqno)?;
            let newest = versions.first().map_or(0, |(trailer, _, _)| trailer >> 8);
            if at_excluded_start(&self.range, self.forward, &key) {
                return Ok(Step::Nothing);
            }
            let cover = self.tombstones.as_ref().and_then(|set| set.covering(&key, self.seqno));
            let blobs = &self.blobs;
            let read_blob = |pointer: &[u8], sst: &std::path::Path| {
                crate::db::read::point::read_blob(&blobs.0, &blobs.1, pointer, sst)
            };
            let value =
                crate::db::read::merged::fold_versions(op.as_ref(), &key, versions, cover, &read_blob)?;
            return Ok(value.map_or(Step::Nothing, |v| {
                Step::Entry(key, if read_blobs { v } else { Bytes::new() }, newest)
            }));
        }
        // A value in a blob file is read once its entry wins; its SST
        // is kept for an error (a path only for such entries).
        let newest = cursor.take_versions(&key, self.seqno, |_, s| {
            let blob = s.key().is_some_and(|(_, t)| matches!(unpack_trailer(t), Some((_, Kind::Blob))));
            let sst = blob.then(|| s.sst().map(|it| it.reader().path().to_path_buf())).flatten();
            (s.value_bytes(), sst)
        })?;
        if at_excluded_start(&self.range, self.forward, &key) {
            return Ok(Step::Nothing);
        }
        if let (Some(set), Some((trailer, _))) = (&self.tombstones, &newest)
            && set.covering(&key, self.seqno).is_some_and(|t| t > trailer >> 8)
        {
            return Ok(Step::Nothing);
        }
        match newest {
            Some((trailer, (value, _))) if matches!(unpack_trailer(trailer), Some((_, Kind::Put))) => {
                Ok(Step::Entry(key, value, trailer >> 8))
            }
            Some((trailer, (pointer, sst))) if matches!(unpack_trailer(trailer), Some((_, Kind::Blob))) => {
                if !read_blobs {
                    return Ok(Step::Entry(key, Bytes::new(), trailer >> 8));
                }
                let sst = sst.unwrap_or_default();
                let value = crate::db::read::point::read_blob(&self.blobs.0, &self.blobs.1, &pointer, &sst)?;
                Ok(Step::Entry(key, value, trailer >> 8))
            }
            _ => Ok(Step::Nothing),
        }
    }
}

/// What one step of the general path found.
enum Step {
    /// The range is over.
    End,
    /// The newest visible version of a key, a value, and its seqno (the
    /// newest operand's, for a merge).
    Entry(Bytes, Bytes, SeqNo),
    /// A key with no visible value (deleted, or only newer versions).
    Nothing,
}

/// Iterator over `(key, value)` pairs of a range, at one seqno. It holds the
/// memtables and SSTs it reads, so flushes and deletions do not disturb it.
pub struct DbIterator {
    /// Keeps the memtables and SSTs being read alive.
    _pin: Arc<SuperVersion>,
    /// Keeps the database (and its directory lock) alive while iterating,
    /// as snapshots do.
    db: Arc<DbInner>,
    /// The keyspace handle's shared state, so the keyspace cannot be
    /// dropped while it is iterated.
    _tree: Option<Arc<TreeShared>>,
    /// `None` when opening failed.
    reader: Option<RangeReader>,
    /// Set after the end or an error: the iterator yields nothing more.
    done: bool,
    /// An error met while positioning, reported by the first `next`.
    pending_error: Option<crate::error::Error>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("DbIterator");
        if let Some(r) = &self.reader {
            d.field("seqno", &r.seqno).field("forward", &r.forward).field("range", &r.range);
        }
        d.field("done", &self.done).finish_non_exhaustive()
    }
}

/// Builds an iterator over `range` of `tree`.
pub(crate) fn new(
    inner: &Arc<DbInner>,
    tree: TreeId,
    range: KeyRange,
    direction: Direction,
    snapshot: Option<&Snapshot>,
) -> DbIterator {
    // A snapshot of another database: the error, reported by `next`, and
    // a reader of nothing.
    let pinned = inner.snapshot_seqno(snapshot, tree);
    let (seqno, sv) = inner.read_view(pinned.as_ref().ok().copied().flatten());
    let opened = inner
        .check_open()
        .and(pinned.map(|_| ()))
        .and_then(|()| RangeReader::open(inner, &sv, seqno, tree, range, direction));
    let (reader, pending_error) = match opened {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    DbIterator { _pin: sv, db: inner.clone(), _tree: None, reader, done: false, pending_error }
}

impl DbIterator {
    /// The iterator, keeping a keyspace's handle state alive.
    pub(crate) fn holding(self, tree: Arc<TreeShared>) -> Self {
        DbIterator { _tree: Some(tree), ..self }
    }
}

/// Whether `key` is past the far end of `range` (iteration is over).
fn past_end(range: &KeyRange, forward: bool, key: &[u8]) -> bool {
    if forward {
        match &range.1 {
            Bound::Included(k) => key > k.as_slice(),
            Bound::Excluded(k) => key >= k.as_slice(),
            Bound::Unbounded => false,
        }
    } else {
        match &range.0 {
            Bound::Included(k) => key < k.as_slice(),
            Bound::Excluded(k) => key <= k.as_slice(),
            Bound::Unbounded => false,
        }
    }
}

/// Whether `key` is the excluded start bound of `range` (skipped, not the end).
fn at_excluded_start(range: &KeyRange, forward: bool, key: &[u8]) -> bool {
    let start = if forward { &range.0 } else { &range.1 };
    matches!(start, Bound::Excluded(k) if k.as_slice() == key)
}

impl DbIterator {
    /// The next key and its value, borrowed until the next call; `None`
    /// at the end. What [`Iterator::next`] gives, without a reference
    /// count or copy where the entry lies in one SST block (most of a
    /// compacted range): for a caller that copies, compares or sums what
    /// it reads. Both may be mixed on one iterator.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = basalt::Db::open(dir.path(), basalt::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("b", "22")?;
    /// let mut iter = db.iter_all();
    /// let mut value_bytes = 0;
    /// while let Some(entry) = iter.next_borrowed() {
    ///     let (_key, value) = entry?;
    ///     value_bytes += value.len();
    /// }
    /// assert_eq!(value_bytes, 3);
    /// # Ok::<(), basalt::Error>(())
    /// ```
    pub fn next_borrowed(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        let at = match self.step() {
            Some(Ok(at)) => at,
            Some(Err(e)) => return Some(Err(e)),
            None => return None,
        };
        let reader = self.reader.as_ref()?;
        match reader.borrowed(at) {
            Ok(kv) => Some(Ok(kv)),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// One step of either form: where the entry is, `None` at the end (or
    /// after an error, which is reported once).
    fn step(&mut self) -> Option<Result<At>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending_error.take() {
            self.done = true;
            return Some(Err(e));
        }
        if let Err(e) = self.db.check_open() {
            self.done = true;
            return Some(Err(e));
        }
        let stepped = match &mut self.reader {
            Some(r) => r.step(),
            None => Ok(None),
        };
        match stepped {
            Ok(Some(at)) => Some(Ok(at)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = match self.step()? {
            Ok(at) => at,
            Err(e) => return Some(Err(e)),
        };
        let reader = self.reader.as_mut()?;
        match reader.owned(at) {
            Ok(kv) => Some(Ok(kv)),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
