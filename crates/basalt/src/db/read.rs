//! Point lookups: memtables newest first, then L0 newest first, then one
//! file per deeper level. The first version found decides.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{DbInner, SuperVersion};
use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::error::{Error, Result};
use crate::sst::reader::LookupTrace;
use crate::wal::batch::TreeId;

impl DbInner {
    /// The seqno to read at and the state to read from. The seqno is loaded
    /// first: a seqno published by a writer implies the memtable it wrote
    /// to is already installed.
    pub(crate) fn read_view(&self, snapshot: Option<SeqNo>) -> (SeqNo, Arc<SuperVersion>) {
        let seqno = snapshot.unwrap_or_else(|| self.visible_seqno.load(Ordering::Acquire));
        (seqno, self.state.read().clone())
    }

    /// The value of `user_key` in `tree` as of `snapshot` (or now).
    pub(crate) fn get(
        &self,
        tree: TreeId,
        user_key: &[u8],
        snapshot: Option<SeqNo>,
    ) -> Result<Option<Bytes>> {
        let (seqno, sv) = self.read_view(snapshot);
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            if let Some((trailer, value)) = mem.get(tree, user_key, seqno) {
                self.counters.record_get(0);
                return Ok(visible(trailer, value));
            }
        }
        let Some(tree_version) = sv.version.tree(tree) else {
            return Err(Error::InvalidArgument(format!("unknown tree {tree}")));
        };
        let mut probes = 0;
        for file in tree_version.files_for_key(user_key) {
            probes += 1;
            let reader = self.table_cache.get(file.number, &self.block_cache)?;
            let mut trace = LookupTrace::default();
            let found = reader.get_entry_traced(user_key, seqno, &mut trace)?;
            self.counters.record_lookup(&trace);
            if let Some((block, i)) = found {
                self.counters.record_get(probes);
                return Ok(visible(block.trailer(i), Bytes::copy_from_slice(block.value(i))));
            }
        }
        self.counters.record_get(probes);
        Ok(None)
    }
}

fn visible(trailer: u64, value: Bytes) -> Option<Bytes> {
    match unpack_trailer(trailer) {
        Some((_, Kind::Put)) => Some(value),
        _ => None,
    }
}
