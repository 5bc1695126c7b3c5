//! Where in each WAL file the change feed finds a seqno: every so many
//! bytes, a record's offset and first seqno, noted as the feed reads the
//! file, so a feed resumed from a point reads from near it on, not the
//! whole file again. WAL files are only appended to, so a note stays true
//! while its file lives. Its lock is taken here only.

use std::collections::HashMap;

use crate::codec::internal::SeqNo;
use crate::ranked::{Rank, RankedMutex};

/// Bytes between the records noted in one file.
const NOTE_EVERY_BYTES: u64 = 64 << 10;

/// Files whose notes are kept (the newest by number).
const FILES_MAX: usize = 1024;

pub(crate) struct FeedIndex {
    /// WAL number → (record offset, its first seqno), both ascending.
    files: RankedMutex<HashMap<u64, Vec<(u64, SeqNo)>>>,
}

impl FeedIndex {
    pub(crate) fn new() -> FeedIndex {
        FeedIndex { files: RankedMutex::new(Rank::FeedIndex, HashMap::new()) }
    }

    /// The offset of the last noted record of WAL `number` whose first
    /// seqno is at or below `seqno` (0: none noted).
    pub(crate) fn offset_for(&self, number: u64, seqno: SeqNo) -> u64 {
        let files = self.files.lock();
        let Some(notes) = files.get(&number) else { return 0 };
        let i = notes.partition_point(|&(_, first)| first <= seqno);
        i.checked_sub(1).map_or(0, |i| notes[i].0)
    }

    /// Notes that the record at `offset` of WAL `number` starts at seqno
    /// `first`, if it is far enough past the last note.
    pub(crate) fn note(&self, number: u64, offset: u64, first: SeqNo) {
        let mut files = self.files.lock();
        if !files.contains_key(&number) && files.len() >= FILES_MAX {
            // The oldest files go first: feeds read the newest.
            if let Some(&oldest) = files.keys().min() {
                files.remove(&oldest);
            }
        }
        let notes = files.entry(number).or_default();
        match notes.last() {
            Some(&(last, _)) if offset < last.saturating_add(NOTE_EVERY_BYTES) => {}
            _ => notes.push((offset, first)),
        }
    }

    /// Forgets WAL `number` (deleted).
    pub(crate) fn forget(&self, number: u64) {
        self.files.lock().remove(&number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seqno_maps_to_the_last_noted_record_at_or_before_it() {
        let index = FeedIndex::new();
        assert_eq!(index.offset_for(7, 10), 0);
        index.note(7, 0, 1);
        index.note(7, 100, 5);
        index.note(7, NOTE_EVERY_BYTES + 10, 900);
        assert_eq!(index.offset_for(7, 1), 0);
        assert_eq!(index.offset_for(7, 899), 0);
        assert_eq!(index.offset_for(7, 900), NOTE_EVERY_BYTES + 10);
        index.forget(7);
        assert_eq!(index.offset_for(7, 900), 0);
    }
}
