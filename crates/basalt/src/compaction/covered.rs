//! Range tombstones against files: whole files a tombstone hides from
//! every reader (dropped without being read, as RocksDB's
//! `DeleteFilesInRange` drops them), and tombstones nothing older is left
//! under (dropped from the version, so reads no longer check them).

use crate::codec::internal::SeqNo;
use crate::range_del::TombstoneSet;
use crate::version::{FileMeta, TreeVersion};

/// The files of `tree`, as (level, number), that a range tombstone hides
/// from every reader: the tombstone covers the file's keys and is newer
/// than its newest entry, and no reader between the file's oldest entry
/// and the tombstone needs it (`read_between(min, t)`: whether a live
/// snapshot or a history floor lies in `[min, t)`).
pub fn covered_files(tree: &TreeVersion, read_between: impl Fn(SeqNo, SeqNo) -> bool) -> Vec<(usize, u64)> {
    let set = &tree.range_tombstones;
    if set.is_empty() {
        return Vec::new();
    }
    tree.all_files()
        .filter(|(_, f)| {
            set.tombstones().iter().any(|t| {
                t.seqno > f.max_seqno
                    && t.covers_span(&f.smallest.user_key, &f.largest.user_key)
                    && !read_between(f.min_seqno, t.seqno)
            })
        })
        .map(|(level, f)| (level, f.number))
        .collect()
}

/// The seqnos of the tombstones of `set` under which no file of `files`
/// (a tree's files after an edit) may hold an older entry: they hide
/// nothing any more. A file that meets a tombstone's range with an entry
/// older than it keeps the tombstone, whatever keys of the range it holds.
pub fn obsolete_tombstones(set: &TombstoneSet, files: &[&FileMeta]) -> Vec<SeqNo> {
    set.tombstones()
        .iter()
        .filter(|t| {
            !files
                .iter()
                .any(|f| f.min_seqno < t.seqno && t.meets_span(&f.smallest.user_key, &f.largest.user_key))
        })
        .map(|t| t.seqno)
        .collect()
}
