//! Which compaction to run next: a pure function of the version and options.
//!
//! Each level gets a score: L0 by file count over `l0_compaction_trigger`,
//! deeper levels by bytes over their target (`level1_bytes_target` ×
//! `level_size_ratio`^(n-1)). The highest score ≥ 1 is compacted: all of L0
//! into the overlapping L1 files, or from Ln the one file whose overlap with
//! Ln+1 is smallest relative to its size (RocksDB's "min overlapping ratio",
//! which minimises write amplification). A file with no overlap below moves
//! down by a MANIFEST edit alone (a trivial move), and so does an L0 whose
//! files share no key with one another or with L1. Under a write budget
//! that makes small L0 files, a run of them is first merged into one L0
//! file (`l0_merge`). With no level over its target, a file that range
//! reads merged with runs below it often enough is compacted into the level
//! below (`asked_by_reads`).

use std::sync::Arc;

use crate::codec::internal::InternalKey;
use crate::ids::TreeId;
use crate::options::Options;
use crate::version::{FileMeta, LEVELS, TreeVersion, Version};

/// One compaction: merge `inputs` (from `level`) with `overlapping` (from
/// `level + 1`) into new files at `output_level`: `level + 1`, or L0 for
/// an L0 merge, which has no overlapping files and is never bottommost
/// (older L0 files and deeper levels may hold older versions of its keys:
/// its tombstones stay, and its merge operands fold onto no missing base).
#[derive(Debug, Clone)]
pub struct CompactionTask {
    /// The tree compacted.
    pub tree: TreeId,
    /// The input level.
    pub level: usize,
    /// Files taken from `level`.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Files of `level + 1` that overlap the inputs' key range (none for
    /// an L0 merge).
    pub overlapping: Vec<Arc<FileMeta>>,
    /// True when the output level is the deepest holding data in the
    /// inputs' key range: tombstones no snapshot needs can be dropped.
    pub bottommost: bool,
    /// The score that chose this task (≥ 1; 1 for one that reads asked
    /// for), or 0 for a manual compaction.
    pub score: f64,
    /// The level outputs are written to: `level + 1`, or 0 for L0 files
    /// merged among themselves ([`l0_merge`]).
    pub output_level: usize,
}

impl CompactionTask {
    /// The level outputs are written to.
    pub fn output_level(&self) -> usize {
        self.output_level
    }

    /// The size outputs are cut at: `Options::sst_bytes`, or none for L0
    /// files merged among themselves (the point is one file for several).
    pub fn output_sst_bytes(&self, opts: &Options) -> u64 {
        if self.output_level == 0 { u64::MAX } else { opts.sst_bytes() }
    }

    /// Inputs with nothing to merge below move down unchanged (a MANIFEST
    /// edit): a single file of a deeper level, or, in an automatic
    /// compaction, L0 files that share no user key with one another. Keys
    /// written in order flush to such L0 files, which would otherwise be
    /// read and written again only to land in L1 as they were. A manual
    /// compaction of L0 still rewrites it: it is asked for to drop what the
    /// files no longer need.
    pub fn is_trivial_move(&self) -> bool {
        if !self.overlapping.is_empty() || self.output_level == self.level {
            return false;
        }
        if self.level > 0 {
            return self.inputs.len() == 1;
        }
        if self.score <= 0.0 {
            return false;
        }
        let mut files: Vec<&Arc<FileMeta>> = self.inputs.iter().collect();
        files.sort_by(|a, b| a.smallest.user_key.cmp(&b.smallest.user_key));
        files.windows(2).all(|p| p[0].largest.user_key < p[1].smallest.user_key)
    }

    /// Every input file, upper level first.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.overlapping.iter())
    }

    /// The inputs as sorted runs, for a merge that opens one file of a
    /// run at a time: each L0 input alone (L0 files overlap), the inputs of
    /// a deeper level as one run, and the overlapping files as one run.
    pub fn input_runs(&self) -> Vec<Vec<Arc<FileMeta>>> {
        let sorted = |files: &[Arc<FileMeta>]| {
            let mut run = files.to_vec();
            run.sort_by(|a, b| a.smallest.cmp(&b.smallest));
            run
        };
        let mut runs: Vec<Vec<Arc<FileMeta>>> = if self.level == 0 {
            self.inputs.iter().map(|f| vec![f.clone()]).collect()
        } else {
            vec![sorted(&self.inputs)]
        };
        runs.push(sorted(&self.overlapping));
        runs
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.size).sum()
    }
}

/// Byte targets per level derived from the options.
#[derive(Debug, Clone)]
pub struct LevelTargets {
    /// `bytes[n]` is the target size of level n (unused for L0).
    pub bytes: [u64; LEVELS],
}

impl LevelTargets {
    /// Targets from `level1_bytes_target` and `level_size_ratio`.
    pub fn new(opts: &Options) -> LevelTargets {
        let mut bytes = [0u64; LEVELS];
        let mut target = opts.level1_bytes();
        for b in bytes.iter_mut().skip(1) {
            *b = target.max(1);
            target = target.saturating_mul(u64::from(opts.level_size_ratio.max(2)));
        }
        LevelTargets { bytes }
    }
}

/// Scores of every level of a tree: > 1 means the level needs compaction.
pub fn level_scores(tree: &TreeVersion, opts: &Options) -> [f64; LEVELS] {
    let targets = LevelTargets::new(opts);
    let mut scores = [0.0; LEVELS];
    scores[0] = tree.levels[0].len() as f64 / opts.l0_compaction_trigger.max(1) as f64;
    // The last level has nowhere to go.
    for (level, score) in scores.iter_mut().enumerate().take(LEVELS - 1).skip(1) {
        let bytes: u64 = tree.levels[level].iter().map(|f| f.size).sum();
        *score = bytes as f64 / targets.bytes[level] as f64;
    }
    scores
}

/// The most urgent compaction across all trees, if any level scores ≥ 1.
pub fn choose(version: &Version, opts: &Options) -> Option<CompactionTask> {
    let mut best: Option<(f64, TreeId, usize)> = None;
    for (&id, tree) in &version.trees {
        for (level, &score) in level_scores(tree, opts).iter().enumerate() {
            if score >= 1.0 && best.is_none_or(|(s, _, _)| score > s) {
                best = Some((score, id, level));
            }
        }
    }
    let Some((score, id, level)) = best else { return asked_by_reads(version) };
    let tree = version.tree(id)?;
    let inputs = if level == 0 { tree.levels[0].clone() } else { vec![pick_file(tree, level)?] };
    let mut task = task_for(id, tree, level, inputs);
    task.score = score;
    if level == 0
        && !task.is_trivial_move()
        && let Some(mut merge) = l0_merge(id, tree, opts)
    {
        merge.score = score;
        return Some(merge);
    }
    Some(task)
}

/// Under a write budget that switches memtables below half of
/// `memtable_bytes_max` (at an eighth of it with a 32 MiB budget), L0
/// fills with small files, which an L0 → L1 compaction would merge a few at
/// a time into all of L1: each flush's bytes rewritten with L1 again and
/// again, where a full memtable's flush would have paid once. Instead,
/// while fewer than `l0_compaction_trigger` L0 files are large, the newest
/// run of two or more small ones is merged into one L0 file (RocksDB's
/// intra-L0 compaction), so L0 → L1 moves about as much at a time as
/// without a budget. A file is small below two memtable switches' worth,
/// so a flush's bytes are merged in L0 about once. The run's files hold
/// consecutive seqno ranges that no file outside it interleaves, so the
/// merged file takes their place in L0's newest-first order.
pub fn l0_merge(tree_id: TreeId, tree: &TreeVersion, opts: &Options) -> Option<CompactionTask> {
    let switch_bytes = opts.memtable_switch_bytes() as u64;
    if switch_bytes.saturating_mul(2) > opts.memtable_bytes_max as u64 {
        return None;
    }
    let small_bytes = switch_bytes.saturating_mul(2);
    let l0 = &tree.levels[0];
    if l0.iter().filter(|f| f.size >= small_bytes).count() >= opts.l0_compaction_trigger.max(1) {
        return None;
    }
    // L0 is newest first: each file's seqnos below those of the one before.
    let apart = |newer: &FileMeta, older: &FileMeta| newer.min_seqno > older.max_seqno;
    let mut start = 0;
    while start < l0.len() {
        let mut end = start;
        while end < l0.len() && l0[end].size < small_bytes && (end == start || apart(&l0[end - 1], &l0[end]))
        {
            end += 1;
        }
        let bounded = || {
            (start == 0 || apart(&l0[start - 1], &l0[start]))
                && (end == l0.len() || apart(&l0[end - 1], &l0[end]))
        };
        if end - start >= 2 && bounded() {
            return Some(CompactionTask {
                tree: tree_id,
                level: 0,
                inputs: l0[start..end].to_vec(),
                overlapping: Vec::new(),
                bottommost: false,
                score: 0.0,
                output_level: 0,
            });
        }
        start = end.max(start + 1);
    }
    None
}

/// With no level over its target: a compaction that range reads asked
/// for. A file that reads merged with runs below it often enough
/// ([`FileMeta::reads_ask_compaction`], LevelDB's seek compaction for
/// range reads) goes into the level below, with the rest of L0 when it is
/// an L0 file; reads of its range then seek one run fewer. A table
/// reloaded over itself, or an index whose few L0 files never reach the
/// trigger, is merged this way once reads show that it costs them.
fn asked_by_reads(version: &Version) -> Option<CompactionTask> {
    for (&id, tree) in &version.trees {
        for level in 0..LEVELS - 1 {
            let Some(file) = tree.levels[level].iter().find(|f| f.reads_ask_compaction()) else { continue };
            let inputs = if level == 0 { tree.levels[0].clone() } else { vec![file.clone()] };
            let mut task = task_for(id, tree, level, inputs);
            task.score = 1.0;
            return Some(task);
        }
    }
    None
}

/// A compaction of `inputs` from `level` of `tree` into `level + 1`. For
/// L0, `inputs` must be every L0 file: compacting a newer L0 file without an
/// older one it overlaps would put the newer data below the older.
pub fn task_for(
    tree_id: TreeId,
    tree: &TreeVersion,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
) -> CompactionTask {
    debug_assert!(level + 1 < LEVELS && !inputs.is_empty());
    let (lo, hi) = key_range(&inputs);
    let overlapping = overlapping_files(&tree.levels[level + 1], &lo, &hi);
    // The outputs cover the overlapping files too, which may reach beyond the
    // inputs' range: deeper levels are checked against the whole span.
    let all: Vec<_> = inputs.iter().chain(overlapping.iter()).cloned().collect();
    let (lo, hi) = key_range(&all);
    let bottommost =
        tree.levels[level + 2..].iter().all(|files| overlapping_files(files, &lo, &hi).is_empty());
    CompactionTask {
        tree: tree_id,
        level,
        inputs,
        overlapping,
        bottommost,
        score: 0.0,
        output_level: level + 1,
    }
}

/// The file of `level` (≥ 1) that is cheapest to push down: least overlap
/// below per byte.
fn pick_file(tree: &TreeVersion, level: usize) -> Option<Arc<FileMeta>> {
    let below = &tree.levels[level + 1];
    tree.levels[level]
        .iter()
        .map(|f| {
            let overlap: u64 = overlapping_files(below, &f.smallest, &f.largest).iter().map(|o| o.size).sum();
            (overlap as f64 / f.size.max(1) as f64, f)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.number.cmp(&b.1.number)))
        .map(|(_, f)| f.clone())
}

/// Smallest and largest internal keys over `files`.
pub fn key_range(files: &[Arc<FileMeta>]) -> (InternalKey, InternalKey) {
    let lo = files.iter().map(|f| &f.smallest).min().cloned();
    let hi = files.iter().map(|f| &f.largest).max().cloned();
    match (lo, hi) {
        (Some(lo), Some(hi)) => (lo, hi),
        _ => (InternalKey::seek_key(bytes::Bytes::new(), 0), InternalKey::seek_key(bytes::Bytes::new(), 0)),
    }
}

/// Files of a level whose user-key range intersects `[lo, hi]` by user key.
pub fn overlapping_files(files: &[Arc<FileMeta>], lo: &InternalKey, hi: &InternalKey) -> Vec<Arc<FileMeta>> {
    files
        .iter()
        .filter(|f| f.largest.user_key >= lo.user_key && f.smallest.user_key <= hi.user_key)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::codec::internal::Kind;
    use crate::version::VersionEdit;
    use crate::version::edit::ReaderSlot;

    fn file(number: u64, lo: &str, hi: &str, size: u64, seq: u64) -> FileMeta {
        FileMeta {
            number,
            size,
            entries: 1,
            min_seqno: seq,
            max_seqno: seq,
            smallest: InternalKey::new(Bytes::copy_from_slice(lo.as_bytes()), seq, Kind::Put),
            largest: InternalKey::new(Bytes::copy_from_slice(hi.as_bytes()), seq, Kind::Put),
            blob_refs: Vec::new(),
            schema_version: 0,
            reader: ReaderSlot::default(),
            merged_reads: crate::version::edit::MergedReads::default(),
        }
    }

    fn version(files: &[(usize, FileMeta)]) -> Version {
        let mut edit = VersionEdit { trees_created: vec![(0, "default".into())], ..VersionEdit::default() };
        edit.files_added = files.iter().map(|(l, f)| (0, *l, f.clone())).collect();
        Version::default().apply(&edit, std::path::Path::new("test"), 0).expect("valid edit")
    }

    fn opts() -> Options {
        Options {
            l0_compaction_trigger: 4,
            level1_bytes_target: 1000,
            level_size_ratio: 10,
            ..Options::default()
        }
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let v = version(&[(0, file(1, "a", "z", 10, 1)), (1, file(2, "a", "m", 900, 0))]);
        assert!(choose(&v, &opts()).is_none());
    }

    #[test]
    fn l0_compacts_all_files_into_overlapping_l1() {
        let v = version(&[
            (0, file(1, "c", "f", 10, 4)),
            (0, file(2, "a", "d", 10, 5)),
            (0, file(3, "e", "g", 10, 6)),
            (0, file(4, "b", "c", 10, 7)),
            (1, file(10, "a", "b", 100, 1)),
            (1, file(11, "f", "h", 100, 1)),
            (1, file(12, "x", "z", 100, 1)),
        ]);
        let t = choose(&v, &opts()).expect("L0 is at its trigger");
        assert_eq!(t.level, 0);
        assert_eq!(t.inputs.len(), 4);
        let mut below: Vec<u64> = t.overlapping.iter().map(|f| f.number).collect();
        below.sort_unstable();
        assert_eq!(below, vec![10, 11]);
        assert!(t.bottommost);
        assert!(!t.is_trivial_move());
    }

    #[test]
    fn disjoint_l0_files_move_down_whole_unless_they_overlap_each_other_or_l1() {
        // Keys written in order: each flush covers a range of its own.
        let disjoint = [
            (0, file(1, "a", "c", 10, 4)),
            (0, file(2, "d", "f", 10, 5)),
            (0, file(3, "g", "i", 10, 6)),
            (0, file(4, "j", "l", 10, 7)),
        ];
        let t = choose(&version(&disjoint), &opts()).expect("L0 is at its trigger");
        assert!(t.level == 0 && t.inputs.len() == 4 && t.overlapping.is_empty());
        assert!(t.is_trivial_move());
        let manual = CompactionTask { score: 0.0, ..t };
        assert!(!manual.is_trivial_move(), "a manual compaction rewrites L0");
        // An L1 file in their span: merged.
        let mut below = disjoint.to_vec();
        below.push((1, file(10, "e", "e", 100, 1)));
        assert!(!choose(&version(&below), &opts()).expect("L0 at its trigger").is_trivial_move());
        // Two L0 files sharing a user key (one's largest, the other's smallest): merged.
        let mut touching = disjoint.to_vec();
        touching[1] = (0, file(2, "c", "f", 10, 5));
        assert!(!choose(&version(&touching), &opts()).expect("L0 at its trigger").is_trivial_move());
    }

    /// A 32 MiB budget: memtables switch at 8 MiB, an eighth of the
    /// 64 MiB `memtable_bytes_max`.
    fn budgeted() -> Options {
        Options { write_buffer_bytes_max: 32 << 20, l0_compaction_trigger: 4, ..Options::default() }
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn small_l0_files_under_a_budget_merge_in_l0_before_going_down() {
        let small = |n, seq| (0, file(n, "a", "z", 8 * MIB, seq));
        let v =
            version(&[small(1, 1), small(2, 2), small(3, 3), small(4, 4), (1, file(9, "a", "z", 100, 0))]);
        let t = choose(&v, &budgeted()).expect("L0 at its trigger");
        assert_eq!((t.level, t.output_level(), t.inputs.len()), (0, 0, 4), "{t:?}");
        assert!(t.overlapping.is_empty() && !t.bottommost && !t.is_trivial_move());
        assert_eq!(t.output_sst_bytes(&budgeted()), u64::MAX, "one file for the four");
        // Without a budget the same L0 goes down, as before.
        let down = choose(&v, &opts()).expect("L0 at its trigger");
        assert_eq!((down.output_level(), down.overlapping.len()), (1, 1));
        // Once `l0_compaction_trigger` files are large, L0 goes down.
        let large = |n, seq| (0, file(n, "a", "z", 20 * MIB, seq));
        let full = version(&[small(5, 5), large(1, 1), large(2, 2), large(3, 3), large(4, 4)]);
        assert_eq!(choose(&full, &budgeted()).expect("L0 at its trigger").output_level(), 1);
        // Small files in key order still move down whole, unmerged.
        let ordered = version(&[
            (0, file(1, "a", "b", 8 * MIB, 1)),
            (0, file(2, "c", "d", 8 * MIB, 2)),
            (0, file(3, "e", "f", 8 * MIB, 3)),
            (0, file(4, "g", "h", 8 * MIB, 4)),
        ]);
        assert!(choose(&ordered, &budgeted()).expect("L0 at its trigger").is_trivial_move());
    }

    #[test]
    fn an_l0_merge_takes_the_newest_run_of_small_files_with_seqnos_apart() {
        let at = |n, size, lo, hi| {
            let mut f = file(n, "a", "z", size, hi);
            f.min_seqno = lo;
            (0, f)
        };
        // Newest first: a large file, then three small ones, then a large one.
        let v = version(&[
            at(5, 30 * MIB, 50, 59),
            at(4, 8 * MIB, 40, 49),
            at(3, 8 * MIB, 30, 39),
            at(2, 8 * MIB, 20, 29),
            at(1, 30 * MIB, 10, 19),
        ]);
        let t = l0_merge(0, v.tree(0).expect("tree"), &budgeted()).expect("a run of three");
        let mut merged: Vec<u64> = t.inputs.iter().map(|f| f.number).collect();
        merged.sort_unstable();
        assert_eq!(merged, vec![2, 3, 4]);
        // Files whose seqnos interleave (a bulk load's runs) are left alone.
        let interleaved = version(&[at(3, 8 * MIB, 20, 39), at(2, 8 * MIB, 25, 30), at(1, 8 * MIB, 1, 9)]);
        assert!(l0_merge(0, interleaved.tree(0).expect("tree"), &budgeted()).is_none());
        // No budget, no merge.
        assert!(l0_merge(0, v.tree(0).expect("tree"), &opts()).is_none());
    }

    #[test]
    fn deeper_level_picks_least_overlap_and_moves_trivially() {
        let v = version(&[
            (1, file(1, "a", "c", 600, 1)),
            (1, file(2, "d", "f", 600, 1)),
            (2, file(3, "a", "b", 5000, 0)),
        ]);
        let t = choose(&v, &opts()).expect("L1 is over its 1000-byte target");
        assert_eq!(t.level, 1);
        assert_eq!(t.inputs[0].number, 2, "file 2 overlaps nothing in L2");
        assert!(t.is_trivial_move());
        assert!(t.score > 1.0);
    }

    #[test]
    fn most_urgent_level_wins_and_bottommost_sees_deeper_levels() {
        let v = version(&[
            (0, file(1, "a", "b", 10, 9)),
            (0, file(2, "a", "b", 10, 8)),
            (0, file(3, "a", "b", 10, 7)),
            (0, file(4, "a", "b", 10, 6)),
            (1, file(5, "a", "z", 30_000, 2)),
            (3, file(6, "a", "a", 10, 1)),
        ]);
        let t = choose(&v, &opts()).expect("L1 at 30x its target");
        assert_eq!(t.level, 1);
        assert!(!t.bottommost, "L3 holds data in the range");
        let l0 = task_for(0, v.tree(0).expect("tree"), 0, v.tree(0).expect("tree").levels[0].clone());
        assert_eq!(l0.overlapping.len(), 1);
    }

    #[test]
    fn level_targets_grow_by_the_ratio() {
        let t = LevelTargets::new(&opts());
        assert_eq!(t.bytes[1], 1000);
        assert_eq!(t.bytes[2], 10_000);
        assert_eq!(t.bytes[6], 100_000_000);
    }
}
