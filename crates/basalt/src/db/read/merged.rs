//! Reading a key of a keyspace with a merge operator (`merge.rs`): when the
//! newest version a read sees is an operand, the operands down to the
//! first value or delete (or a range tombstone over the key) fold onto it.
//! Only reads that meet an operand come here; a key whose newest version
//! is a value reads as before.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::db::read::cursor::{KeyRange, TreeCursor};
use crate::db::state::inner::DbInner;
use crate::db::state::versions::SuperVersion;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::merge::MergeOperator;
use crate::sst::Blocks;

/// The value of a key from its versions (newest first, each `(trailer,
/// value, its SST)`, all visible to the read): the newest value, or the
/// operands above it folded onto it. `cover` is the newest range tombstone
/// over the key the read sees: versions below it are deleted. `read_blob`
/// resolves a value kept in a blob file.
pub(crate) fn fold_versions(
    op: &dyn MergeOperator,
    key: &[u8],
    versions: impl IntoIterator<Item = (u64, Bytes, Option<PathBuf>)>,
    cover: Option<SeqNo>,
    read_blob: &dyn Fn(&[u8], &Path) -> Result<Bytes>,
) -> Result<Option<Bytes>> {
    let mut operands: Vec<Bytes> = Vec::new();
    let mut base = None;
    for (trailer, value, sst) in versions {
        let Some((seqno, kind)) = unpack_trailer(trailer) else {
            return Err(Error::corruption(
                sst.as_deref().unwrap_or(Path::new("memtable")),
                0,
                format!("a version of unknown kind {trailer:#x}"),
            ));
        };
        if cover.is_some_and(|t| t > seqno) {
            break;
        }
        match kind {
            Kind::Merge => operands.push(value),
            Kind::Put => {
                base = Some(value);
                break;
            }
            Kind::Blob => {
                base = Some(read_blob(&value, sst.as_deref().unwrap_or(Path::new("")))?);
                break;
            }
            Kind::Delete => break,
        }
    }
    if operands.is_empty() {
        return Ok(base);
    }
    let refs: Vec<&[u8]> = operands.iter().rev().map(Bytes::as_ref).collect();
    op.full_merge(base.as_deref(), &refs)
        .map(|v| Some(Bytes::from(v)))
        .map_err(|e| Error::InvalidArgument(format!("key {:?}: {e}", key.escape_ascii().to_string())))
}

impl DbInner {
    /// The folded value of `key` in `tree` at `seqno` in `sv` (its newest
    /// version being an operand): one cursor over the sources holding the
    /// key, walked down to the operands' base.
    pub(crate) fn fold_merges(
        &self,
        sv: &SuperVersion,
        seqno: SeqNo,
        tree: TreeId,
        key: &[u8],
    ) -> Result<Option<Bytes>> {
        let op = self
            .merge_operator(&sv.version.catalog, tree)?
            .ok_or_else(|| Error::internal("a merge operand in a tree with no merge operator"))?;
        let files =
            sv.version.tree(tree).ok_or_else(|| Error::InvalidArgument(format!("unknown tree {tree}")))?;
        let range: KeyRange =
            (std::ops::Bound::Included(key.to_vec()), std::ops::Bound::Included(key.to_vec()));
        let mut cursor =
            TreeCursor::open(&self.sst_readers, sv, tree, files, (&range, true), Blocks::Cached, None)?;
        let versions = cursor.take_all_versions(key, seqno)?;
        let cover = sv.range_cover(tree, key, seqno, self.expired_through(&sv.version.catalog, tree));
        let read_blob = |pointer: &[u8], sst: &Path| {
            crate::db::read::point::read_blob(&self.blob_files, &sv.version, pointer, sst)
        };
        fold_versions(op.as_ref(), key, versions, cover, &read_blob)
    }
}
