//! Writes one SST from entries given in internal-key order: data blocks as
//! they fill, then the filter, index, properties and metaindex blocks and the
//! footer, then a sync.

use std::path::PathBuf;

use bytes::Bytes;

use super::block::BlockBuilder;
use super::filter::BloomBuilder;
use super::format::{
    BLOCK_BYTES_TARGET_MAX, BLOCK_TRAILER_BYTES, BUFFER_ALIGN_BYTES, BlockHandle, ENTRY_BYTES_MAX,
    FORMAT_VERSION, Footer, META_FILTER, META_INDEX, META_MODEL, META_PROPERTIES, META_ZONES,
};
use super::index::add_fence;
use super::meta::{MetaEntry, Properties, encode_metaindex};
use super::seal::seal;
use crate::codec::internal::{InternalKey, Kind, SeqNo, compare, unpack_trailer};
use crate::error::{Error, Result};
use crate::io::WritableFile;
use crate::options::Compression;

/// How an SST is written.
#[derive(Debug, Clone)]
pub struct SstWriterOptions {
    /// A data block is cut once its uncompressed size reaches this
    /// (clamped to `1..=BLOCK_BYTES_TARGET_MAX`).
    pub block_bytes_target: usize,
    /// Bloom filter bits per distinct user key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// Compression of data blocks (meta blocks are never compressed).
    pub compression: Compression,
    /// The tree whose entries the file holds, recorded in its properties.
    pub tree_id: u32,
    /// For a table tree, its layout: data blocks then hold one set of
    /// Arrow buffers per stored column. `None` for the key-value tree.
    pub layout: Option<std::sync::Arc<crate::row::layout::TableLayout>>,
    /// Build a learned index with this error bound; `None` writes none
    /// (readers then use the fence keys).
    pub learned_index_epsilon: Option<u32>,
    /// The number the file is named by, recorded in its properties so a
    /// reader can tell the file from another under its name.
    pub file_number: u64,
    /// Table blocks store integer columns packed where that saves.
    pub pack_integers: bool,
    /// Table blocks store string and binary columns as dictionaries where
    /// that saves.
    pub string_dictionaries: bool,
    /// For a secondary index's tree, its layout: the filter then also
    /// holds each distinct leading run of indexed values (`prefix_hash`),
    /// so an equality or prefix lookup skips files without its prefix.
    pub key_prefixes: Option<std::sync::Arc<crate::row::index::IndexLayout>>,
}

/// What a finished SST holds, for the version edit that adds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SstSummary {
    /// Bytes in the file, footer included.
    pub file_size: u64,
    /// Entries, deletes included.
    pub entries: u64,
    /// Entries of kind `Delete`.
    pub deletions: u64,
    /// First entry's internal key.
    pub smallest: InternalKey,
    /// Last entry's internal key.
    pub largest: InternalKey,
    /// Smallest seqno of any entry.
    pub min_seqno: SeqNo,
    /// Largest seqno of any entry.
    pub max_seqno: SeqNo,
    /// Value bytes its `Blob` entries point to, per blob file, by number.
    pub blob_refs: Vec<(u64, u64)>,
    /// The table schema version of the layout its rows were written with
    /// (0 without one).
    pub schema_version: u32,
}

/// Builds one SST. Dropping it without [`SstWriter::finish`] leaves a
/// partial file that the caller deletes.
pub struct SstWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    options: SstWriterOptions,
    block: BlockBuilder,
    index: BlockBuilder,
    filter: Option<BloomBuilder>,
    /// User key and trailer of the last entry added.
    last_key: Vec<u8>,
    last_trailer: u64,
    smallest: Option<InternalKey>,
    stats: Properties,
    /// Zone maps of the data blocks written so far (table trees).
    zones: Vec<Vec<crate::row::zone::Zone>>,
    /// The learned index being built, when enabled.
    model: Option<super::model::ModelBuilder>,
    /// Value bytes pointed to per blob file by the `Blob` entries so far.
    blob_refs: std::collections::BTreeMap<u64, u64>,
    /// The prefixes added to the filter, when it holds them.
    prefixes: Option<PrefixFilter>,
}

/// What the writer keeps to add each distinct key prefix to the filter once.
#[derive(Debug)]
struct PrefixFilter {
    layout: std::sync::Arc<crate::row::index::IndexLayout>,
    /// Where each prefix of the last key added ends, and of this one.
    last_ends: Vec<usize>,
    ends: Vec<usize>,
    /// Prefixes added.
    added: u64,
    /// A key did not parse as an entry of the index: the filter cannot
    /// answer for prefixes, and the file says it holds none.
    failed: bool,
}

impl PrefixFilter {
    /// Adds the prefixes of `key` that `last_key`'s (`None` for the
    /// file's first key) do not share.
    fn add(&mut self, key: &[u8], last_key: Option<&[u8]>, filter: &mut BloomBuilder) {
        if self.failed {
            return;
        }
        self.ends.clear();
        let ends = &mut self.ends;
        if self.layout.prefix_ends(key, |e| ends.push(e)).is_err() {
            self.failed = true;
            return;
        }
        for (j, &end) in self.ends.iter().enumerate() {
            let same = last_key.zip(self.last_ends.get(j)).is_some_and(|(last, &e)| last[..e] == key[..end]);
            if !same {
                filter.add_prefix(&key[..end]);
                self.added += 1;
            }
        }
        std::mem::swap(&mut self.ends, &mut self.last_ends);
    }

    /// What the properties record: the prefixes the filter can answer for.
    fn count(&self) -> u64 {
        if self.failed { 0 } else { self.added }
    }
}

impl std::fmt::Debug for SstWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstWriter")
            .field("path", &self.path)
            .field("entries", &self.stats.entries)
            .finish_non_exhaustive()
    }
}

impl SstWriter {
    /// A writer appending to `file`, which is at `path` (named in errors).
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, options: &SstWriterOptions) -> SstWriter {
        let mut options = options.clone();
        let block = options.layout.clone().map_or_else(BlockBuilder::new, |layout| {
            BlockBuilder::for_table(layout, options.pack_integers, options.string_dictionaries)
        });
        options.block_bytes_target = options.block_bytes_target.clamp(1, BLOCK_BYTES_TARGET_MAX);
        let filter = (options.bloom_bits_per_key > 0).then(|| BloomBuilder::new(options.bloom_bits_per_key));
        let empty = InternalKey { user_key: Bytes::new(), trailer: 0 };
        let tree_id = options.tree_id;
        let file_number = options.file_number;
        let schema_version = options.layout.as_ref().map_or(0, |l| l.version());
        let layout_fingerprint = options.layout.as_ref().map_or(0, |l| l.fingerprint());
        let model = options.learned_index_epsilon.map(super::model::ModelBuilder::new);
        let prefixes = options.key_prefixes.clone().filter(|_| filter.is_some()).map(|layout| PrefixFilter {
            layout,
            last_ends: Vec::new(),
            ends: Vec::new(),
            added: 0,
            failed: false,
        });
        SstWriter {
            file,
            path,
            options,
            block,
            index: BlockBuilder::new(),
            filter,
            last_key: Vec::new(),
            last_trailer: 0,
            smallest: None,
            zones: Vec::new(),
            model,
            blob_refs: std::collections::BTreeMap::new(),
            prefixes,
            stats: Properties {
                format_version: FORMAT_VERSION,
                tree_id,
                file_number: Some(file_number),
                entries: 0,
                deletions: 0,
                distinct_keys: Some(0),
                prefixes: Some(0),
                schema_version: Some(schema_version),
                layout_fingerprint: Some(layout_fingerprint),
                data_blocks: 0,
                raw_key_bytes: 0,
                raw_value_bytes: 0,
                min_seqno: SeqNo::MAX,
                max_seqno: 0,
                smallest: empty.clone(),
                largest: empty,
            },
        }
    }

    /// Entries added so far.
    #[cfg(test)]
    pub fn entries(&self) -> u64 {
        self.stats.entries
    }

    /// Bytes written so far plus the pending block: what the file would
    /// hold without its meta blocks. Compaction cuts output files on this.
    pub fn estimated_file_bytes(&self) -> u64 {
        self.file.len() + self.block.encoded_bytes() as u64
    }

    /// Adds an entry. Entries come in strictly increasing internal-key order
    /// (user key ascending, trailer descending); anything else, an unknown
    /// kind or an entry over `ENTRY_BYTES_MAX` is `InvalidArgument`.
    pub fn add(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) -> Result<()> {
        if unpack_trailer(trailer).is_some_and(|(_, kind)| kind == Kind::Blob) {
            // The pointer is the file's: a damaged one is not copied on.
            let pointer = crate::blob::BlobPointer::decode(value, &self.path)?;
            *self.blob_refs.entry(pointer.file).or_insert(0) += pointer.len;
        }
        self.add_with(user_key, trailer, value.len(), |block| block.add_row(user_key, trailer, value))
    }

    /// Adds an entry of a table tree copied from row `i` of another block's
    /// arrays (compaction), with the same order rules as [`SstWriter::add`].
    pub fn add_from_arrays(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        arrays: &[arrow_array::ArrayRef],
        i: usize,
    ) -> Result<()> {
        self.add_with(user_key, trailer, 0, |block| block.add_from_arrays(user_key, trailer, arrays, i))
    }

    /// Adds a put of row `i` of a batch being bulk-loaded, read through
    /// `encoder`, with the same order rules as [`SstWriter::add`].
    pub fn add_encoded_row(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        encoder: &crate::row::encode::RowEncoder<'_>,
        i: usize,
    ) -> Result<()> {
        self.add_with(user_key, trailer, 0, |block| block.add_encoded_row(user_key, trailer, encoder, i))
    }

    fn add_with(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        value_len: usize,
        add: impl FnOnce(&mut BlockBuilder) -> Result<()>,
    ) -> Result<()> {
        let Some((seqno, kind)) = unpack_trailer(trailer) else {
            return Err(Error::InvalidArgument(format!("trailer {trailer:#x} has an unknown kind")));
        };
        if user_key.len().saturating_add(value_len) > ENTRY_BYTES_MAX {
            return Err(Error::InvalidArgument(format!("entry larger than {ENTRY_BYTES_MAX} bytes")));
        }
        let first = self.smallest.is_none();
        if !first && compare(&self.last_key, self.last_trailer, user_key, trailer).is_ge() {
            return Err(Error::InvalidArgument(format!(
                "SST entries out of order: {user_key:?}@{trailer:#x} after {:?}@{:#x}",
                self.last_key, self.last_trailer
            )));
        }
        if !self.block.fits(user_key.len(), value_len) {
            self.flush_block()?;
        }
        if first || self.last_key != user_key {
            if let Some(filter) = &mut self.filter {
                filter.add_key(user_key);
                if let Some(prefixes) = &mut self.prefixes {
                    prefixes.add(user_key, (!first).then_some(self.last_key.as_slice()), filter);
                }
            }
            self.stats.distinct_keys = self.stats.distinct_keys.map(|d| d + 1);
        }
        if first {
            self.smallest = Some(InternalKey { user_key: Bytes::copy_from_slice(user_key), trailer });
        }
        if let Some(m) = &mut self.model {
            if self.block.is_empty() {
                m.start_block();
            }
            m.add(user_key);
        }
        add(&mut self.block)?;
        self.last_key.clear();
        self.last_key.extend_from_slice(user_key);
        self.last_trailer = trailer;
        let s = &mut self.stats;
        s.entries += 1;
        s.deletions += u64::from(kind == Kind::Delete);
        s.raw_key_bytes += user_key.len() as u64;
        s.raw_value_bytes += value_len as u64;
        s.min_seqno = s.min_seqno.min(seqno);
        s.max_seqno = s.max_seqno.max(seqno);
        if self.block.encoded_bytes() >= self.options.block_bytes_target {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Writes the pending data block and its fence (the last key added).
    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        if !self.index.fits(self.last_key.len(), super::format::BLOCK_HANDLE_BYTES) {
            return Err(Error::InvalidArgument("SST fence keys exceed the index block limit".into()));
        }
        let mut raw = self.block.finish();
        if let Some(z) = self.block.take_zones() {
            self.zones.push(z);
        }
        // Zero bytes at the block's end (inside its checksum; the directory
        // ignores them) so that the next block starts at a multiple of 8 in
        // the file: a memory-mapped block's buffers are then as aligned in
        // memory as they are within the block, and scans hand them to Arrow
        // as they lie. Without it only one uncompressed block in eight was
        // aligned and the others were copied (docs/format.md).
        let end = self.file.len() as usize + raw.len() + BLOCK_TRAILER_BYTES;
        raw.resize(raw.len() + (BUFFER_ALIGN_BYTES - end % BUFFER_ALIGN_BYTES) % BUFFER_ALIGN_BYTES, 0);
        let handle = self.write_block(raw, self.options.compression)?;
        add_fence(&mut self.index, &self.last_key, self.last_trailer, handle);
        self.stats.data_blocks += 1;
        Ok(())
    }

    /// Seals and appends a block; returns its handle.
    fn write_block(&mut self, raw: Vec<u8>, compression: Compression) -> Result<BlockHandle> {
        let offset = self.file.len();
        let sealed = seal(raw, compression);
        let size = u32::try_from(sealed.len() - BLOCK_TRAILER_BYTES)
            .map_err(|_| Error::InvalidArgument("block larger than 4 GiB".into()))?;
        self.file.append(&sealed)?;
        Ok(BlockHandle { offset, size })
    }

    /// Writes the meta blocks and the footer, syncs the file and returns what
    /// it holds. An SST has at least one entry: finishing an empty writer is
    /// `InvalidArgument` (the caller deletes the file instead).
    pub fn finish(mut self) -> Result<SstSummary> {
        let Some(smallest) = self.smallest.take() else {
            return Err(Error::InvalidArgument(format!("SST {} has no entries", self.path.display())));
        };
        self.flush_block()?;
        self.stats.prefixes = Some(self.prefixes.as_ref().map_or(0, PrefixFilter::count));
        let mut meta = Vec::with_capacity(3);
        if let Some(filter) = self.filter.take() {
            let handle = self.write_block(filter.finish(), Compression::None)?;
            meta.push(MetaEntry { kind: META_FILTER, handle });
        }
        if let Some(layout) = &self.options.layout {
            let zones = crate::row::zone::encode(&self.zones, layout.stored().len());
            meta.push(MetaEntry { kind: META_ZONES, handle: self.write_block(zones, Compression::None)? });
        }
        if let Some(model) = self.model.as_ref().and_then(super::model::ModelBuilder::finish) {
            meta.push(MetaEntry { kind: META_MODEL, handle: self.write_block(model, Compression::None)? });
        }
        let index = self.index.finish();
        meta.push(MetaEntry { kind: META_INDEX, handle: self.write_block(index, Compression::None)? });
        let largest =
            InternalKey { user_key: Bytes::copy_from_slice(&self.last_key), trailer: self.last_trailer };
        self.stats.smallest = smallest;
        self.stats.largest = largest;
        let props = self.stats.encode();
        meta.push(MetaEntry { kind: META_PROPERTIES, handle: self.write_block(props, Compression::None)? });
        let metaindex = self.write_block(encode_metaindex(&meta), Compression::None)?;
        let footer = Footer { metaindex, format_version: FORMAT_VERSION };
        self.file.append(&footer.encode())?;
        self.file.sync()?;
        let s = self.stats;
        Ok(SstSummary {
            schema_version: s.schema_version.unwrap_or_default(),
            file_size: self.file.len(),
            entries: s.entries,
            deletions: s.deletions,
            smallest: s.smallest,
            largest: s.largest,
            blob_refs: self.blob_refs.into_iter().collect(),
            min_seqno: s.min_seqno,
            max_seqno: s.max_seqno,
        })
    }
}
