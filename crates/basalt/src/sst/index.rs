//! The fence-key index: for each data block, its last internal key and its
//! handle. Stored as a columnar block (key column = fence user key, trailer
//! column = fence trailer, value column = 12-byte handle) and decoded fully
//! into memory when the SST is opened.

use std::path::Path;

use super::block::{Block, BlockBuilder};
use super::format::{BLOCK_HANDLE_BYTES, BlockHandle};
use crate::codec::internal::compare;
use crate::codec::varint::Reader;
use crate::error::{Error, Result};

/// Appends one fence to an index block being built.
pub fn add_fence(index: &mut BlockBuilder, user_key: &[u8], trailer: u64, handle: BlockHandle) {
    let mut value = Vec::with_capacity(BLOCK_HANDLE_BYTES);
    handle.encode_to(&mut value);
    index.add(user_key, trailer, &value);
}

/// The decoded index of one SST, pinned with its reader.
#[derive(Debug)]
pub struct FenceIndex {
    fences: Block,
    handles: Vec<BlockHandle>,
}

impl FenceIndex {
    /// Checks the index block read at `offset` of `file`: every value is a
    /// handle; the data blocks are contiguous from offset 0, trailers
    /// included, and end at `data_end`; the fences strictly increase.
    pub fn decode(fences: Block, file: &Path, offset: u64, data_end: u64) -> Result<FenceIndex> {
        let corrupt = |what: String| Error::corruption(file, offset, format!("index block: {what}"));
        let mut handles = Vec::with_capacity(fences.len());
        let mut expected_offset = 0u64;
        for i in 0..fences.len() {
            let value = fences.value(i);
            if value.len() != BLOCK_HANDLE_BYTES {
                return Err(corrupt(format!("entry {i} holds {} bytes, not a handle", value.len())));
            }
            let handle = BlockHandle::read(&mut Reader::new(value, file, offset))?;
            if handle.offset != expected_offset {
                return Err(corrupt(format!(
                    "block {i} at {} should start at {expected_offset}",
                    handle.offset
                )));
            }
            if i > 0
                && compare(fences.key(i - 1), fences.trailer(i - 1), fences.key(i), fences.trailer(i)).is_ge()
            {
                return Err(corrupt(format!("fence {i} is not above fence {}", i - 1)));
            }
            expected_offset = handle.end_with_trailer();
            handles.push(handle);
        }
        if expected_offset != data_end {
            return Err(corrupt(format!(
                "data blocks end at {expected_offset}, meta blocks start at {data_end}"
            )));
        }
        Ok(FenceIndex { fences, handles })
    }

    /// Memory held by the index: its fence keys and block handles.
    pub fn approximate_bytes(&self) -> usize {
        self.fences.approximate_bytes() + self.handles.len() * std::mem::size_of::<BlockHandle>()
    }

    /// Number of data blocks (at least one).
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Handle of data block `i`, or `None` past the end.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    /// Last internal key of data block `i`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn fence(&self, i: usize) -> (&[u8], u64) {
        (self.fences.key(i), self.fences.trailer(i))
    }

    /// The first block whose last key is >= `(user_key, trailer)`: the only
    /// block that can hold the first entry at or after the target. `None` when
    /// the target is above every key of the file.
    pub fn find(&self, user_key: &[u8], trailer: u64) -> Option<usize> {
        let i = self.fences.seek(user_key, trailer);
        (i < self.len()).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::internal::{Kind, pack_trailer};
    use crate::sst::format::BLOCK_TRAILER_BYTES;

    fn index(fences: &[(&[u8], u64, u32)]) -> (Block, u64) {
        let mut b = BlockBuilder::new();
        let mut at = 0u64;
        for &(k, seq, size) in fences {
            add_fence(&mut b, k, pack_trailer(seq, Kind::Put), BlockHandle { offset: at, size });
            at += u64::from(size) + BLOCK_TRAILER_BYTES as u64;
        }
        (Block::decode(b.finish(), Path::new("i"), 0).expect("block"), at)
    }

    #[test]
    fn find_picks_the_first_fence_at_or_above() {
        let (block, end) = index(&[(b"b", 5, 100), (b"b", 2, 50), (b"d", 9, 70)]);
        let idx = FenceIndex::decode(block, Path::new("i"), 0, end).expect("decodes");
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.handle(1), Some(BlockHandle { offset: 105, size: 50 }));
        assert_eq!(idx.find(b"a", 0), Some(0));
        assert_eq!(idx.find(b"b", pack_trailer(7, Kind::Put)), Some(0));
        assert_eq!(idx.find(b"b", pack_trailer(4, Kind::Put)), Some(1));
        assert_eq!(idx.find(b"c", 0), Some(2));
        assert_eq!(idx.find(b"d", pack_trailer(8, Kind::Put)), None);
        assert_eq!(idx.fence(2), (&b"d"[..], pack_trailer(9, Kind::Put)));
    }

    #[test]
    fn inconsistent_indexes_are_corruption() {
        let (block, end) = index(&[(b"b", 5, 100), (b"c", 2, 50)]);
        assert!(FenceIndex::decode(block.clone(), Path::new("i"), 0, end + 1).is_err());
        let (unsorted, end) = index(&[(b"c", 5, 100), (b"b", 2, 50)]);
        assert!(FenceIndex::decode(unsorted, Path::new("i"), 0, end).is_err());
        let mut b = BlockBuilder::new();
        b.add(b"a", 1 << 8, b"short");
        let not_handle = Block::decode(b.finish(), Path::new("i"), 0).expect("block");
        assert!(FenceIndex::decode(not_handle, Path::new("i"), 0, 0).is_err());
    }
}
