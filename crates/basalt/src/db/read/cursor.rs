//! The one range read path of a tree: a merge of sorted sources — a cursor
//! per memtable, one per L0 file (L0 files overlap), and one per deeper
//! level, which walks the level's files in key order and opens the next
//! only when the current one is used up. Only files that overlap the range
//! are listed, so a short scan reads one file per level rather than
//! seeking into every file after its start. `DbIterator`, `TableScan` and
//! compaction all read through it; point lookups are `point.rs`.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::codec::internal::{SeqNo, compare};
use crate::db::state::sst_readers::SstReaders;
use crate::db::state::versions::SuperVersion;
use crate::error::Result;
use crate::ids::TreeId;
use crate::memtable::MemCursor;
use crate::sst::{Blocks, SstIter};
use crate::version::{FileMeta, TreeVersion};

/// A range of user keys with owned bounds.
pub(crate) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// Whether a file's keys `[smallest, largest]` meet `range`.
pub(crate) fn file_overlaps(file: &FileMeta, range: &KeyRange) -> bool {
    span_overlaps(range, &file.smallest.user_key, &file.largest.user_key)
}

/// Whether keys `[start, end]` meet `range`.
pub(crate) fn span_overlaps((lo, hi): &KeyRange, start: &[u8], end: &[u8]) -> bool {
    let above_lo = match lo {
        Bound::Included(b) => end >= b.as_slice(),
        Bound::Excluded(b) => end > b.as_slice(),
        Bound::Unbounded => true,
    };
    let below_hi = match hi {
        Bound::Included(b) => start <= b.as_slice(),
        Bound::Excluded(b) => start < b.as_slice(),
        Bound::Unbounded => true,
    };
    above_lo && below_hi
}

/// Whether the key ranges of two files meet.
fn files_share_keys(a: &FileMeta, b: &FileMeta) -> bool {
    a.smallest.user_key <= b.largest.user_key && b.smallest.user_key <= a.largest.user_key
}

/// Whether `range` holds every key of `file` (a read of it merges the
/// whole file).
pub(crate) fn covers_file(range: &KeyRange, file: &FileMeta) -> bool {
    in_range(range, &file.smallest.user_key) && in_range(range, &file.largest.user_key)
}

/// The keys `[lo, hi]` (`hi` `None`: no end) that `range` lies within,
/// its bounds taken inclusively.
pub(crate) fn span_of(range: &KeyRange) -> (&[u8], Option<&[u8]>) {
    let lo = match &range.0 {
        Bound::Included(k) | Bound::Excluded(k) => k.as_slice(),
        Bound::Unbounded => &[],
    };
    let hi = match &range.1 {
        Bound::Included(k) | Bound::Excluded(k) => Some(k.as_slice()),
        Bound::Unbounded => None,
    };
    (lo, hi)
}

/// Whether `key` lies in `range`.
pub(crate) fn in_range(range: &KeyRange, key: &[u8]) -> bool {
    span_overlaps(range, key, key)
}

/// A sorted run of SSTs: files with disjoint key ranges, in key order (one
/// L0 file, or the files of a deeper level that meet the range), read as
/// one cursor. The next file is opened only when the current one is used
/// up.
pub(crate) struct RunCursor {
    readers: Arc<SstReaders>,
    tree: TreeId,
    files: Vec<Arc<FileMeta>>,
    /// Files not yet opened: `files[next..]` forward, `files[..next]` in reverse.
    next: usize,
    /// The open file's cursor; `None` once the run is used up.
    iter: Option<SstIter>,
    forward: bool,
    /// Files are read once, in order, past the map and the block cache
    /// (compaction's inputs).
    reading_ahead: bool,
    /// Where the files' cursors take their blocks from otherwise.
    blocks: Blocks,
}

impl RunCursor {
    /// A cursor over `files` positioned at `start` (forward: the first
    /// entry at or after it; reverse: the last at or before it), or at the
    /// run's first entry in its direction.
    fn open(
        readers: &Arc<SstReaders>,
        tree: TreeId,
        files: Vec<Arc<FileMeta>>,
        forward: bool,
        start: Option<(&[u8], u64)>,
        blocks: Blocks,
    ) -> Result<RunCursor> {
        let next = if forward { 0 } else { files.len() };
        let mut run = RunCursor {
            readers: readers.clone(),
            tree,
            files,
            next,
            iter: None,
            forward,
            reading_ahead: false,
            blocks,
        };
        let Some(file) = run.take_next_file() else { return Ok(run) };
        let mut iter = SstIter::new(run.readers.get(tree, &file)?, blocks);
        match (start, forward) {
            (Some((k, t)), true) => iter.seek(k, t)?,
            (Some((k, t)), false) => iter.seek_for_prev(k, t)?,
            (None, true) => iter.seek_to_first()?,
            (None, false) => iter.seek_to_last()?,
        }
        if iter.valid() {
            run.iter = Some(iter);
            Ok(run)
        } else {
            run.enter_next_file()?;
            Ok(run)
        }
    }

    /// A forward cursor over all of `files` that reads each once, in
    /// order, past the map and the block cache (a compaction's input).
    fn reading_ahead(
        readers: &Arc<SstReaders>,
        tree: TreeId,
        files: Vec<Arc<FileMeta>>,
    ) -> Result<RunCursor> {
        let mut run = RunCursor {
            readers: readers.clone(),
            tree,
            files,
            next: 0,
            iter: None,
            forward: true,
            reading_ahead: true,
            blocks: Blocks::Cached,
        };
        run.enter_next_file()?;
        Ok(run)
    }

    /// The file the current entry comes from (going forward).
    fn current_file(&self) -> Option<&FileMeta> {
        self.iter.as_ref()?;
        if self.forward { self.files.get(self.next.checked_sub(1)?) } else { self.files.get(self.next) }
            .map(AsRef::as_ref)
    }

    fn take_next_file(&mut self) -> Option<Arc<FileMeta>> {
        if self.forward {
            let file = self.files.get(self.next).cloned();
            self.next += usize::from(file.is_some());
            file
        } else {
            self.next = self.next.checked_sub(1)?;
            self.files.get(self.next).cloned()
        }
    }

    /// Moves to the first entry (in the run's direction) of the next file
    /// that has one, or makes the run used up.
    fn enter_next_file(&mut self) -> Result<()> {
        self.iter = None;
        while let Some(file) = self.take_next_file() {
            let reader = self.readers.get(self.tree, &file)?;
            let mut iter = if self.reading_ahead {
                SstIter::reading_ahead(reader)
            } else {
                SstIter::new(reader, self.blocks)
            };
            if self.forward {
                iter.seek_to_first()?;
            } else {
                iter.seek_to_last()?;
            }
            if iter.valid() {
                self.iter = Some(iter);
                return Ok(());
            }
        }
        Ok(())
    }

    /// Whether, going forward, no later entry of the run holds the user
    /// key of the current block's last row: the next block starts with
    /// another key, or on a file's last block, the run's next file does.
    fn block_ends_key(&mut self) -> Result<bool> {
        let Some(iter) = &mut self.iter else { return Ok(false) };
        if !self.forward {
            return Ok(false);
        }
        if let Some(other) = iter.next_block_starts_other_key()? {
            return Ok(other);
        }
        let Some((rows, _)) = iter.rows() else { return Ok(false) };
        let last = rows.key(rows.len() - 1);
        Ok(self.files.get(self.next).is_none_or(|next| next.smallest.user_key[..] != *last))
    }

    fn step(&mut self) -> Result<()> {
        let Some(iter) = &mut self.iter else { return Ok(()) };
        if self.forward {
            iter.next()?;
        } else {
            iter.prev()?;
        }
        if !iter.valid() {
            self.enter_next_file()?;
        }
        Ok(())
    }
}

/// One sorted source of versions, walking in the cursor's direction.
pub(crate) enum Source {
    Mem(MemCursor),
    /// Boxed: a run's cursor holds its current block and the next one.
    Run(Box<RunCursor>),
}

impl Source {
    /// The current entry's user key and trailer; `None` when used up.
    pub(crate) fn key(&self) -> Option<(&[u8], u64)> {
        match self {
            Source::Mem(c) => c.key().map(|k| (k.user_key.as_ref(), k.trailer)),
            Source::Run(r) => r.iter.as_ref().map(|c| (c.user_key(), c.trailer())),
        }
    }

    /// The current entry's user key, sharing the memtable's or the block's
    /// bytes (no copy); empty when used up.
    pub(crate) fn key_bytes(&self) -> Bytes {
        match self {
            Source::Mem(c) => c.key().map_or_else(Bytes::new, |k| k.user_key.clone()),
            Source::Run(r) => r.iter.as_ref().map_or_else(Bytes::new, SstIter::key_bytes),
        }
    }

    /// The current entry's value bytes, shared (no copy).
    pub(crate) fn value_bytes(&self) -> Bytes {
        match self {
            Source::Mem(c) => c.value().cloned().unwrap_or_default(),
            Source::Run(r) => r.iter.as_ref().map_or_else(Bytes::new, SstIter::value_bytes),
        }
    }

    /// The current entry's value, shared, where a memtable holds it.
    pub(crate) fn mem_value(&self) -> Option<&Bytes> {
        match self {
            Source::Mem(c) => c.value(),
            Source::Run(_) => None,
        }
    }

    /// The SST cursor the current entry comes from (for its block, its
    /// file's zone maps and the file's path in errors).
    pub(crate) fn sst(&self) -> Option<&SstIter> {
        match self {
            Source::Mem(_) => None,
            Source::Run(r) => r.iter.as_ref(),
        }
    }

    /// The SST file the current entry comes from (`None` for a memtable).
    pub(crate) fn file(&self) -> Option<&FileMeta> {
        match self {
            Source::Mem(_) => None,
            Source::Run(r) => r.current_file(),
        }
    }

    pub(crate) fn step(&mut self) -> Result<()> {
        match self {
            Source::Mem(c) => {
                c.step();
                Ok(())
            }
            Source::Run(r) => r.step(),
        }
    }
}

/// A merged cursor over the sources of one tree. It does not resolve
/// versions itself: readers take every version of a user key and keep the
/// newest visible one ([`TreeCursor::take_versions`]); compaction walks
/// every entry in internal-key order ([`TreeCursor::next_source`]).
pub(crate) struct TreeCursor {
    sources: Vec<Source>,
    forward: bool,
    /// Opening it made a file ask for a compaction: the opener wakes the
    /// compaction thread.
    asks_compaction: bool,
}

impl TreeCursor {
    /// A cursor over the memtables and files of `tree` in `sv` that meet
    /// `range`. Forward it starts at the newest version of the lower bound;
    /// in reverse at the oldest version of the upper bound. Keys outside
    /// the range (an excluded bound, keys past the far end) are the
    /// caller's to skip. SST blocks come from `blocks`.
    pub(crate) fn open(
        readers: &Arc<SstReaders>,
        sv: &SuperVersion,
        tree: TreeId,
        files: &TreeVersion,
        (range, forward): (&KeyRange, bool),
        blocks: Blocks,
        prefix: Option<u64>,
    ) -> Result<TreeCursor> {
        let start = match (forward, range) {
            (true, (Bound::Included(k) | Bound::Excluded(k), _)) => Some((k.as_slice(), u64::MAX)),
            (false, (_, Bound::Included(k) | Bound::Excluded(k))) => Some((k.as_slice(), 0)),
            _ => None,
        };
        let mut sources = Vec::new();
        // Sources with nothing in the range are left out: every step of a
        // scan looks at every source.
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            if !mem.holds_tree(tree) {
                continue;
            }
            let cursor = MemCursor::new(mem.clone(), tree, forward, start);
            if cursor.key().is_some() {
                sources.push(Source::Mem(cursor));
            }
        }
        let mut runs = Vec::new();
        for (level, level_files) in files.levels.iter().enumerate() {
            let mut meeting = Vec::new();
            for file in level_files.iter().filter(|f| file_overlaps(f, range)) {
                // Every key of the range starts with `prefix`: a file whose
                // filter lacks it holds none of them. Only files already
                // open are asked; opening every file a wide prefix meets
                // up front would cost more than reading them in turn.
                if let Some(hash) = prefix
                    && file.reader.get().is_some_and(|r| !r.may_hold_prefix(hash))
                {
                    continue;
                }
                meeting.push(file.clone());
            }
            let meeting = meeting.into_iter();
            if level == 0 {
                // L0 files overlap each other: each is its own run.
                runs.extend(meeting.map(|file| vec![file]));
            } else {
                let run: Vec<_> = meeting.collect();
                if !run.is_empty() {
                    runs.push(run);
                }
            }
        }
        // A file of a run with a file below it that shares keys with it is
        // merged with that run: counted against the file, which asks for a
        // compaction once reads paid for the overlap often enough
        // (`FileMeta::charge_merged_read`). A file whose keys no deeper run
        // holds is not: compacting it would save nothing.
        let mut asks_compaction = false;
        for (r, run) in runs.iter().enumerate() {
            for file in run {
                let below = runs[r + 1..].iter().flatten().any(|deeper| files_share_keys(file, deeper));
                if below {
                    asks_compaction |= file.charge_merged_read(covers_file(range, file));
                }
            }
        }
        for run in runs {
            let run = RunCursor::open(readers, tree, run, forward, start, blocks)?;
            if run.iter.is_some() {
                sources.push(Source::Run(Box::new(run)));
            }
        }
        Ok(TreeCursor { sources, forward, asks_compaction })
    }

    /// A forward cursor over whole runs of files (compaction's inputs), at
    /// their first entries.
    pub(crate) fn over_runs(
        readers: &Arc<SstReaders>,
        tree: TreeId,
        runs: Vec<Vec<Arc<FileMeta>>>,
    ) -> Result<TreeCursor> {
        let sources = runs
            .into_iter()
            .filter(|run| !run.is_empty())
            .map(|run| RunCursor::reading_ahead(readers, tree, run).map(|r| Source::Run(Box::new(r))))
            .collect::<Result<_>>()?;
        Ok(TreeCursor { sources, forward: true, asks_compaction: false })
    }

    /// Whether opening this cursor made a file ask for a compaction (see
    /// [`DbInner::wake_compaction`](crate::db::state::inner::DbInner::wake_compaction)).
    pub(crate) fn asks_compaction(&self) -> bool {
        self.asks_compaction
    }

    /// The sources, for reading the current entry of one.
    pub(crate) fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// Moves source `i` past its current entry.
    pub(crate) fn step(&mut self, i: usize) -> Result<()> {
        self.sources[i].step()
    }

    /// Whether source `i`, an SST run going forward, holds the user key of
    /// its current block's last row in no later entry (see
    /// [`RunCursor::block_ends_key`]); false for a memtable.
    pub(crate) fn block_ends_key(&mut self, i: usize) -> Result<bool> {
        match &mut self.sources[i] {
            Source::Run(r) => r.block_ends_key(),
            Source::Mem(_) => Ok(false),
        }
    }

    /// Moves source `i` past `count` entries of its current SST block (no
    /// further than the block's end), as `count` calls of
    /// [`TreeCursor::step`] would.
    pub(crate) fn skip_in_block(&mut self, i: usize, count: usize) -> Result<()> {
        match &mut self.sources[i] {
            Source::Run(r) if r.forward => {
                let Some(iter) = &mut r.iter else { return Ok(()) };
                iter.skip_in_block(count)?;
                if !iter.valid() {
                    r.enter_next_file()?;
                }
                Ok(())
            }
            source => (0..count).try_for_each(|_| source.step()),
        }
    }

    /// The SST source `i` stands at the first entry of, going forward, when
    /// every key of that file is the file's alone: no other source holds a
    /// key up to the file's last, and the run's next file starts past it
    /// (no older version of the last key opens it).
    pub(crate) fn file_alone_ahead(&self, i: usize) -> Option<&FileMeta> {
        let Source::Run(run) = &self.sources[i] else { return None };
        let iter = run.iter.as_ref().filter(|_| run.forward)?;
        let file = run.files.get(run.next.checked_sub(1)?)?;
        let at_first =
            iter.user_key() == file.smallest.user_key.as_ref() && iter.trailer() == file.smallest.trailer;
        let last = file.largest.user_key.as_ref();
        let next_starts_past = run.files.get(run.next).is_none_or(|f| f.smallest.user_key.as_ref() > last);
        let others_past = self.smallest_key_besides(i).is_none_or(|k| k > last);
        (at_first && next_starts_past && others_past).then_some(file.as_ref())
    }

    /// Moves source `i` past the rest of its current file, to the next
    /// file of its run.
    pub(crate) fn skip_file(&mut self, i: usize) -> Result<()> {
        match &mut self.sources[i] {
            Source::Run(run) => run.enter_next_file(),
            Source::Mem(_) => Ok(()),
        }
    }

    /// The source whose current entry comes next: forward, the smallest
    /// internal key (a user key's newest version first); in reverse, the
    /// largest user key.
    pub(crate) fn next_source(&self) -> Option<usize> {
        let mut best: Option<(usize, &[u8], u64)> = None;
        for (i, s) in self.sources.iter().enumerate() {
            let Some((k, t)) = s.key() else { continue };
            let better = best.is_none_or(
                |(_, bk, bt)| {
                    if self.forward { compare(k, t, bk, bt).is_lt() } else { k > bk }
                },
            );
            if better {
                best = Some((i, k, t));
            }
        }
        best.map(|(i, _, _)| i)
    }

    /// The smallest current user key among sources other than `i` (how far
    /// source `i` alone holds the keys, going forward).
    pub(crate) fn smallest_key_besides(&self, i: usize) -> Option<&[u8]> {
        self.sources
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .filter_map(|(_, s)| s.key().map(|(k, _)| k))
            .min()
    }

    /// Where a version of `key` at `seqno` that source `i` holds stands
    /// against the other sources, going forward: when none of them holds a
    /// key below `key`, and those on `key` hold only versions older than
    /// `seqno`, they are moved past `key` (the version shadows them) and
    /// this is true; otherwise nothing moves and this is false.
    pub(crate) fn pass_older_besides(&mut self, i: usize, key: &[u8], seqno: SeqNo) -> Result<bool> {
        let mut on_key = false;
        for (j, s) in self.sources.iter().enumerate() {
            let Some((k, trailer)) = s.key() else { continue };
            if j == i {
                continue;
            }
            match k.cmp(key) {
                std::cmp::Ordering::Less => return Ok(false),
                // A source's first version of a key is its newest.
                std::cmp::Ordering::Equal if trailer >> 8 >= seqno => return Ok(false),
                std::cmp::Ordering::Equal => on_key = true,
                std::cmp::Ordering::Greater => {}
            }
        }
        if on_key {
            for (j, s) in self.sources.iter_mut().enumerate() {
                while j != i
                    && let Some((k, _)) = s.key()
                    && k == key
                {
                    s.step()?;
                }
            }
        }
        Ok(true)
    }

    /// Moves every source past the versions of `key` and returns the newest
    /// one visible at `seqno`, as its trailer and what `capture` took from
    /// it (given the source's index and the source on that version).
    pub(crate) fn take_versions<T>(
        &mut self,
        key: &[u8],
        seqno: SeqNo,
        mut capture: impl FnMut(usize, &Source) -> T,
    ) -> Result<Option<(u64, T)>> {
        let mut best: Option<(u64, T)> = None;
        for (i, s) in self.sources.iter_mut().enumerate() {
            while let Some((k, trailer)) = s.key() {
                if k != key {
                    break;
                }
                let version = trailer >> 8;
                if version <= seqno && best.as_ref().is_none_or(|(t, _)| (*t >> 8) < version) {
                    best = Some((trailer, capture(i, s)));
                }
                s.step()?;
            }
        }
        Ok(best)
    }

    /// Moves every source past the versions of `key` and returns every one
    /// visible at `seqno`, newest first: `(trailer, value, the SST it came
    /// from)` — what a keyspace's merge operands fold from.
    pub(crate) fn take_all_versions(
        &mut self,
        key: &[u8],
        seqno: SeqNo,
    ) -> Result<Vec<(u64, Bytes, Option<std::path::PathBuf>)>> {
        let mut all = Vec::new();
        for s in &mut self.sources {
            while let Some((k, trailer)) = s.key() {
                if k != key {
                    break;
                }
                if trailer >> 8 <= seqno {
                    let sst = s.sst().map(|it| it.reader().path().to_path_buf());
                    all.push((trailer, s.value_bytes(), sst));
                }
                s.step()?;
            }
        }
        all.sort_unstable_by_key(|v| std::cmp::Reverse(v.0));
        Ok(all)
    }

    /// Moves every source past the versions of `key`.
    pub(crate) fn skip_key(&mut self, key: &[u8]) -> Result<()> {
        self.take_versions(key, 0, |_, _| ()).map(drop)
    }
}
