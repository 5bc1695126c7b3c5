//! Opens an SST: checks the footer and every meta block, pins the fence
//! index, filter and properties in memory, and serves point lookups and
//! data blocks (through the shared block cache) to iterators.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::block::{Block, FixedShape, MappedRows, Rows};
use super::filter::BloomFilter;
use super::format::{
    BLOCK_TRAILER_BYTES, BlockHandle, COMPRESSION_NONE, DATA_BLOCK_BUFFERS, FOOTER_BYTES, Footer,
    META_FILTER, META_INDEX, META_MODEL, META_PROPERTIES, META_ZONES,
};
use super::index::FenceIndex;
use super::meta::{MetaEntry, Properties, decode_metaindex};
use super::model::Model;
use super::seal::{Unsealed, check_trailer, unseal};
use crate::codec::internal::{SeqNo, compare, seek_trailer};
use crate::error::{Error, Result};
use crate::io::{Fs, RandomAccessFile};
use crate::sst::block_cache::BlockCache;

/// An open SST, shared by lookups and iterators.
pub struct SstReader {
    path: Arc<Path>,
    file: Box<dyn RandomAccessFile>,
    file_number: u64,
    file_size: u64,
    cache: Arc<BlockCache>,
    index: FenceIndex,
    filter: Option<BloomFilter>,
    properties: Properties,
    /// Zone maps per data block (table trees).
    zones: Option<Vec<Vec<crate::row::zone::Zone>>>,
    /// `zones` folded over the blocks, per column: computed on first use.
    column_zones: OnceLock<Option<Vec<crate::row::zone::ColumnZone>>>,
    /// The table schema version the file was written under, as its
    /// MANIFEST entry says (set once, when the database opens the file).
    schema_version: std::sync::atomic::AtomicU32,
    /// The learned index, when the SST has one.
    model: Option<Model>,
    /// The whole file, memory-mapped, when reads go through a map.
    mapped: Option<Bytes>,
    /// With a map: what a lookup knows of each data block (see
    /// [`InPlace`]), learned the first time it reads the block.
    blocks: BlockStates,
    /// With a map: whether each data block holds plain rows
    /// ([`Rows::plain`]): 0 not worked out yet, 1 not plain, `n + 2` plain
    /// with newest seqno `n` (at most 2^56 - 1). Kept per block of the
    /// file, for blocks read in place and through the cache alike: a block
    /// read in place is entered afresh by every cursor (working it out
    /// each time cost 3.4% of a scan of 512-byte values), and a block the
    /// cache dropped is decoded afresh.
    plain: Box<[AtomicU64]>,
    /// With a map: whether each uncompressed data block has been checked
    /// in full (checksum, directory, every row's offsets and kind) by a
    /// read in this process. The file never changes and its map is
    /// read-only, so a block the cache dropped is decoded again from its
    /// directory alone: a miss on a 512 KiB settled block cost a point
    /// read a checksum of the whole block (the same rule as blocks read
    /// in place, [`InPlace`], which are checked once too).
    checked: Box<[AtomicBool]>,
}

/// How a lookup reads a data block of a mapped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InPlace {
    /// Not read yet in this process.
    Unchecked,
    /// Through the block cache: compressed, or a table block.
    No,
    /// In place, after checking the directory's bounds again.
    Parse,
    /// In place, where the shape puts its rows: no read of the header.
    Shape(FixedShape),
}

/// One packed [`InPlace`] per data block: tag in the low two bits; a
/// shape's row count, key width and value width in 24, 20 and 18 bits
/// above it (a shape that does not fit is [`InPlace::Parse`]). A block's
/// state only goes from unchecked to checked, and the file never changes.
struct BlockStates(Box<[AtomicU64]>);

/// Bytes a pass over a file in order ([`SstReader::read_block_ahead`])
/// reads at a time: one `pread` for many 4 KiB blocks.
pub const READAHEAD_BYTES: usize = 1 << 20;

/// The bytes of a file last read ahead, and where they start.
#[derive(Debug, Default)]
pub struct Readahead {
    base: u64,
    buf: Bytes,
}

const ROWS_BITS: u32 = 24;
const KEY_WIDTH_BITS: u32 = 20;
const VALUE_WIDTH_BITS: u32 = 18;

impl InPlace {
    fn pack(self) -> u64 {
        let fits = |v: usize, bits: u32| u64::try_from(v).ok().filter(|&v| v < 1 << bits);
        match self {
            InPlace::Unchecked => 0,
            InPlace::No => 1,
            InPlace::Parse => 2,
            InPlace::Shape(s) => {
                match (
                    fits(s.rows, ROWS_BITS),
                    fits(s.key_width, KEY_WIDTH_BITS),
                    fits(s.value_width, VALUE_WIDTH_BITS),
                ) {
                    (Some(r), Some(k), Some(v)) => {
                        3 | r << 2 | k << (2 + ROWS_BITS) | v << (2 + ROWS_BITS + KEY_WIDTH_BITS)
                    }
                    _ => InPlace::Parse.pack(),
                }
            }
        }
    }

    fn unpack(p: u64) -> InPlace {
        let field = |shift: u32, bits: u32| ((p >> shift) & ((1 << bits) - 1)) as usize;
        match p & 3 {
            0 => InPlace::Unchecked,
            1 => InPlace::No,
            2 => InPlace::Parse,
            _ => InPlace::Shape(FixedShape {
                rows: field(2, ROWS_BITS),
                key_width: field(2 + ROWS_BITS, KEY_WIDTH_BITS),
                value_width: field(2 + ROWS_BITS + KEY_WIDTH_BITS, VALUE_WIDTH_BITS),
            }),
        }
    }
}

impl BlockStates {
    fn new(blocks: usize) -> Self {
        BlockStates((0..blocks).map(|_| AtomicU64::new(0)).collect())
    }

    fn get(&self, block: usize) -> InPlace {
        self.0.get(block).map_or(InPlace::No, |s| InPlace::unpack(s.load(Ordering::Relaxed)))
    }

    fn set(&self, block: usize, state: InPlace) {
        if let Some(s) = self.0.get(block) {
            s.store(state.pack(), Ordering::Relaxed);
        }
    }

    fn unchecked(&self) -> usize {
        self.0.iter().filter(|s| s.load(Ordering::Relaxed) == 0).count()
    }
}

/// A data block as a lookup holds it: from the block cache, or its rows
/// read where they lie in the file's map.
pub enum Fetched<'a> {
    /// From the block cache.
    Cached(Arc<Block>),
    /// Read in place: the block's rows where they lie in the file's map.
    InPlace(Rows<'a>),
}

impl Fetched<'_> {
    /// The decoded block, when it came from the block cache (table blocks
    /// always do: their columns are read as Arrow arrays).
    pub fn cached(&self) -> Option<&Arc<Block>> {
        match self {
            Fetched::Cached(block) => Some(block),
            Fetched::InPlace(_) => None,
        }
    }

    /// The block's rows.
    pub fn rows(&self) -> Rows<'_> {
        match self {
            Fetched::Cached(block) => block.rows(),
            Fetched::InPlace(rows) => *rows,
        }
    }
}

impl std::fmt::Debug for SstReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstReader")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("file_size", &self.file_size)
            .field("data_blocks", &self.index.len())
            .finish_non_exhaustive()
    }
}

/// The meta blocks of a file, as listed by its metaindex.
struct MetaHandles {
    filter: Option<BlockHandle>,
    index: BlockHandle,
    properties: BlockHandle,
    /// Where the first meta block starts: the end of the data blocks.
    data_end: u64,
    zones: Option<BlockHandle>,
    model: Option<BlockHandle>,
}

impl SstReader {
    /// Opens the SST at `path`; its blocks are cached under `file_number`,
    /// and read through a memory map when `map` is set and `fs` offers one.
    /// A damaged, truncated or foreign file is `Error::Corruption` naming the
    /// path and the offset of the bad structure.
    pub fn open(
        fs: &dyn Fs,
        path: &Path,
        file_number: u64,
        cache: Arc<BlockCache>,
        map: bool,
    ) -> Result<Arc<SstReader>> {
        let file = fs.open(path)?;
        let file_size = file.len();
        let mapped = if map { file.map()? } else { None };
        let Some(footer_offset) = file_size.checked_sub(FOOTER_BYTES as u64) else {
            return Err(Error::corruption(
                path,
                0,
                format!("file of {file_size} bytes is shorter than a footer"),
            ));
        };
        let footer = Footer::decode(&file.read_at(footer_offset, FOOTER_BYTES)?, path, footer_offset)?;
        let metaindex = read_meta_block(file.as_ref(), path, footer.metaindex, footer_offset)?;
        let entries = decode_metaindex(&metaindex, path, footer.metaindex.offset)?;
        let meta = locate_meta(&entries, path, footer.metaindex)?;
        let read = |h: BlockHandle| read_meta_block(file.as_ref(), path, h, footer.metaindex.offset);
        let properties = Properties::decode(&read(meta.properties)?, path, meta.properties.offset)?;
        if properties.format_version != footer.format_version {
            return Err(Error::corruption(
                path,
                meta.properties.offset,
                format!(
                    "properties say format version {}, the footer {}",
                    properties.format_version, footer.format_version
                ),
            ));
        }
        let index_block = Block::decode(read(meta.index)?, path, meta.index.offset)?;
        let index = FenceIndex::decode(index_block, path, meta.index.offset, meta.data_end)?;
        check_against_index(&properties, &index, path, meta.properties.offset)?;
        let model = match meta.model {
            Some(h) => {
                let m = Model::decode(&read(h)?, path, h.offset)?;
                if m.blocks() != index.len() || m.entries() != properties.entries {
                    return Err(Error::corruption(path, h.offset, "learned model disagrees with the index"));
                }
                Some(m)
            }
            None => None,
        };
        let zones = match meta.zones {
            Some(h) => Some(crate::row::zone::decode(&read(h)?, path, h.offset, index.len())?),
            None => None,
        };
        let filter = match meta.filter {
            Some(h) => Some(BloomFilter::decode(&read(h)?, path, h.offset)?),
            None => None,
        };
        let mapped_blocks = if mapped.is_some() { index.len() } else { 0 };
        let blocks = BlockStates::new(mapped_blocks);
        let plain = (0..mapped_blocks).map(|_| AtomicU64::new(0)).collect();
        let checked = (0..mapped_blocks).map(|_| AtomicBool::new(false)).collect();
        Ok(Arc::new(SstReader {
            blocks,
            plain,
            checked,
            path: Arc::from(path),
            file,
            file_number,
            file_size,
            cache,
            index,
            filter,
            zones,
            column_zones: OnceLock::new(),
            schema_version: std::sync::atomic::AtomicU32::new(0),
            model,
            properties,
            mapped,
        }))
    }

    #[cfg(test)]
    /// False only if no entry of `user_key` can be in the file.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(super::filter::key_hash(user_key))
    }

    /// [`SstReader::may_contain`] for the key's [`key_hash`].
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain_hash(hash))
    }

    /// False only if no entry whose key starts with the prefix of
    /// [`prefix_hash`](super::filter::prefix_hash) `hash` can be in the
    /// file: its filter holds the prefixes of its keys (a secondary
    /// index's file from format version 7). Other files may hold any.
    pub fn may_hold_prefix(&self, hash: u64) -> bool {
        self.properties.prefixes.is_none_or(|n| n == 0) || self.may_contain_hash(hash)
    }

    /// Loads the filter line of a key's [`key_hash`] (see
    /// [`BloomFilter::touch`]); the word read, for `black_box`.
    pub fn touch_filter(&self, hash: u64) -> u64 {
        self.filter.as_ref().map_or(0, |f| f.touch(hash))
    }

    /// [`SstReader::may_contain_hash`], timed and recorded in `trace`.
    pub fn filter_hash_traced(&self, hash: u64, trace: &mut LookupTrace) -> bool {
        let clock = trace.timed.then(std::time::Instant::now);
        let may = self.may_contain_hash(hash);
        trace.filter_ns += elapsed_ns(clock);
        trace.filtered = !may;
        may
    }

    /// The one lookup: the block and row of the newest entry of
    /// `user_key` with seqno <= `seqno`, for a key that passed the filter
    /// ([`SstReader::filter_hash_traced`]). A mapped file's uncompressed
    /// key-value blocks are read where they lie; other blocks come through
    /// the block cache.
    pub fn find(&self, user_key: &[u8], seqno: SeqNo, trace: &mut LookupTrace) -> Result<Found<'_>> {
        let target = seek_trailer(seqno);
        if let Some(model) = &self.model {
            let clock = trace.timed.then(std::time::Instant::now);
            let window = model.window(user_key);
            trace.index_ns += elapsed_ns(clock);
            let Some((lo, hi)) = window else {
                trace.by_model = true;
                return Ok(None);
            };
            if let Some(found) = self.search_window(model, (lo, hi), user_key, target, trace)? {
                return Ok(found);
            }
        }
        trace.by_fences = true;
        let clock = trace.timed.then(std::time::Instant::now);
        let found = self.index.find(user_key, target);
        trace.index_ns += elapsed_ns(clock);
        let Some(mut b) = found else {
            return Ok(None);
        };
        loop {
            let clock = trace.timed.then(std::time::Instant::now);
            let block = self.fetch(b)?;
            trace.block_ns += elapsed_ns(clock);
            let rows = block.rows();
            let i = rows.seek(user_key, target);
            if i < rows.len() {
                if rows.key(i) != user_key {
                    return Ok(None);
                }
                return Ok(Some((block, i)));
            }
            // Only a fence above its block's last entry gets here; the next
            // block's entries are all above the fence, so its first is the answer.
            b += 1;
            if b >= self.index.len() {
                return Ok(None);
            }
        }
    }

    /// Searches entry positions `[lo, hi)` for the first entry at or after
    /// `(user_key, target)`. `Some(answer)` when the window decides;
    /// `None` when the entry lies past the window (many versions of the key)
    /// and the fences must answer.
    fn search_window(
        &self,
        model: &Model,
        (lo, hi): (u64, u64),
        user_key: &[u8],
        target: u64,
        trace: &mut LookupTrace,
    ) -> Result<Option<Found<'_>>> {
        trace.window = hi.saturating_sub(lo);
        if lo >= hi {
            trace.by_model = true;
            return Ok(Some(None));
        }
        let (mut b, mut first) = model.block_of(lo);
        // A window that spans a block boundary: where the block's fence (in
        // memory) is below the target, the block cannot hold the answer, and
        // reading it would be a wasted block fetch (at 10M keys, most of
        // them a read from the file).
        while let Some(next) = model.block_start(b + 1)
            && next < hi
            && fence_below(self.index.fence(b), user_key, target)
        {
            b += 1;
            first = next;
        }
        loop {
            let clock = trace.timed.then(std::time::Instant::now);
            let block = self.fetch(b)?;
            trace.block_ns += elapsed_ns(clock);
            let rows = block.rows();
            let end = first + rows.len() as u64;
            let from = (lo.max(first).min(end) - first) as usize;
            let to = (hi.min(end) - first) as usize;
            rows.warm_rows(from..to);
            let i = from + rows.seek_in(from..to, user_key, target);
            if i < to {
                trace.by_model = true;
                let hit = rows.key(i) == user_key;
                return Ok(Some(hit.then_some((block, i))));
            }
            if end >= hi || b + 1 >= self.index.len() {
                // Every entry of the window is below the target: the key's
                // versions may run past the window (ask the fences), or it
                // is absent.
                let last_is_key = to > 0 && rows.key(to - 1) == user_key;
                if !last_is_key {
                    trace.by_model = true;
                }
                return Ok(if last_is_key { None } else { Some(None) });
            }
            b += 1;
            first = end;
        }
    }

    /// Data block `b` for a lookup: read in place where the file allows it
    /// ([`SstReader::rows_in_place`]), else from the cache.
    fn fetch(&self, b: usize) -> Result<Fetched<'_>> {
        if let Some(rows) = self.rows_in_place(b)? {
            return Ok(Fetched::InPlace(rows));
        }
        Ok(Fetched::Cached(self.read_block(b)?))
    }

    /// The rows of data block `b` where they lie in the file's map: for a
    /// mapped, uncompressed key-value block. The first time, the block is
    /// decoded in full ([`Block::decode`]: checksum, directory, every
    /// column) and what was learned is kept ([`InPlace`]); after that a
    /// fixed-width block's rows are found from its shape alone, and other
    /// blocks' directories are bounds-checked again ([`Rows::parse`]).
    /// `None` where the block must come through the cache instead.
    fn rows_in_place(&self, b: usize) -> Result<Option<Rows<'_>>> {
        let Some(file) = &self.mapped else { return Ok(None) };
        let state = self.blocks.get(b);
        let handle = self.handle(b)?;
        let state = if state == InPlace::Unchecked { self.check_in_place(file, b, handle)? } else { state };
        let body = || {
            self.stored_in_map(file, handle).map(|(_, stored)| &stored[..stored.len() - BLOCK_TRAILER_BYTES])
        };
        let corrupt = |what: String| Error::corruption(&*self.path, handle.offset, format!("block: {what}"));
        match state {
            InPlace::Unchecked | InPlace::No => Ok(None),
            InPlace::Parse => Rows::parse(body()?).map_err(corrupt),
            InPlace::Shape(shape) => match Rows::with_shape(body()?, shape) {
                Some(rows) => Ok(Some(rows)),
                None => Err(corrupt("rows run past the block".into())),
            },
        }
    }

    /// Data block `b` for an iterator, read where it lies in the file's
    /// map when [`SstReader::rows_in_place`] allows it (its checksum and
    /// directory were checked on this process's first read of it), held
    /// with a share of the map; `None` where it must come through the
    /// cache.
    pub fn mapped_rows(&self, b: usize) -> Result<Option<MappedRows>> {
        let Some(file) = &self.mapped else { return Ok(None) };
        Ok(self.rows_in_place(b)?.map(|rows| MappedRows::new(file, &rows)))
    }

    /// [`Rows::plain`] of data block `b`, read in place as `rows`: worked
    /// out once per block and kept.
    pub fn plain_rows_in_place(&self, b: usize, rows: &Rows<'_>) -> Option<u64> {
        self.remembered_plain_rows(b, || rows.plain())
    }

    /// [`Block::plain_rows`] of data block `b`, held as `block` (from the
    /// cache): remembered per block of a mapped file, so a block the cache
    /// dropped and a scan decodes again is not compared row by row again
    /// (26 % of a scan of a table twice the cache's size).
    pub fn plain_rows_cached(&self, b: usize, block: &Block) -> Option<u64> {
        self.remembered_plain_rows(b, || block.plain_rows())
    }

    fn remembered_plain_rows(&self, b: usize, work_out: impl FnOnce() -> Option<u64>) -> Option<u64> {
        let Some(slot) = self.plain.get(b) else { return work_out() };
        match slot.load(Ordering::Relaxed) {
            0 => {
                let plain = work_out();
                slot.store(plain.map_or(1, |newest| newest.saturating_add(2)), Ordering::Relaxed);
                plain
            }
            1 => None,
            known => Some(known - 2),
        }
    }

    /// Memory the open reader holds besides cached blocks: its fence
    /// index, bloom filter, learned model, zone maps and block states.
    pub fn metadata_bytes(&self) -> usize {
        let zones = self.zones.as_ref().map_or(0, |blocks| {
            blocks
                .iter()
                .flatten()
                .map(|z| {
                    std::mem::size_of::<crate::row::zone::Zone>()
                        + z.range.as_ref().map_or(0, |(a, b)| a.len() + b.len())
                })
                .sum()
        });
        std::mem::size_of::<Self>()
            + self.index.approximate_bytes()
            + self.filter.as_ref().map_or(0, BloomFilter::approximate_bytes)
            + self.model.as_ref().map_or(0, Model::bytes)
            + zones
            + (self.blocks.0.len() + self.plain.len()) * std::mem::size_of::<AtomicU64>()
            + self.checked.len() * std::mem::size_of::<AtomicBool>()
    }

    /// Where data block `index` starts in the file.
    #[cfg(test)]
    pub fn block_offset(&self, index: usize) -> Result<u64> {
        Ok(self.handle(index)?.offset)
    }

    /// Uncompressed data blocks of a mapped file that a read through the
    /// cache has checked in full.
    #[cfg(test)]
    pub fn blocks_checked_in_full(&self) -> usize {
        self.checked.iter().filter(|c| c.load(Ordering::Relaxed)).count()
    }

    /// Data blocks of a mapped file that no read has checked yet (0 for a
    /// file read without a map).
    pub fn blocks_unchecked(&self) -> usize {
        self.blocks.unchecked()
    }

    /// Checks every data block not yet checked for in-place reads, as a
    /// lookup's first read of it would: the thread that wrote the file does
    /// this, so that lookups do not pay the checksum and full decode (the
    /// 1–2 µs that made the slowest 1% of lookups at 10M keys). Stops at the
    /// first damaged block, whose lookups then report it.
    pub fn check_blocks_in_place(&self) -> Result<()> {
        if self.mapped.is_none() {
            return Ok(());
        }
        // Read with `pread`, not through the map: touching every page of
        // the map would leave the whole file resident in the process (its
        // RSS grew with the database, 1.3 GiB in the sustained-overload
        // run); lookups fault in only the pages they read.
        let mut ahead = Readahead::default();
        for b in 0..self.index.len() {
            if self.blocks.get(b) == InPlace::Unchecked {
                let handle = self.handle(b)?;
                let stored = self.stored_ahead(handle, &mut ahead)?;
                self.check_stored(b, handle, &stored)?;
            }
        }
        Ok(())
    }

    /// Decides, the first time, how data block `b` of the map is read: a
    /// compressed or table block through the cache (which checks it); an
    /// uncompressed key-value block is checked in full here.
    fn check_in_place(&self, file: &Bytes, b: usize, handle: BlockHandle) -> Result<InPlace> {
        let (start, stored) = self.stored_in_map(file, handle)?;
        self.check_stored(b, handle, &file.slice(start..start + stored.len()))
    }

    /// [`SstReader::check_in_place`] of block `b`'s stored bytes, however
    /// they were read.
    fn check_stored(&self, b: usize, handle: BlockHandle, stored: &Bytes) -> Result<InPlace> {
        let body_len = stored.len().saturating_sub(BLOCK_TRAILER_BYTES);
        let key_value = stored.get(4..8).is_some_and(|c| c == (DATA_BLOCK_BUFFERS as u32).to_le_bytes());
        let state = if stored.get(body_len) != Some(&COMPRESSION_NONE) || !key_value {
            InPlace::No
        } else {
            let block = self.decode_stored(stored, handle)?;
            if let Some(c) = self.checked.get(b) {
                c.store(true, Ordering::Release);
            }
            if block.is_key_value() {
                block.rows().fixed_shape().map_or(InPlace::Parse, InPlace::Shape)
            } else {
                InPlace::No
            }
        };
        self.blocks.set(b, state);
        Ok(self.blocks.get(b))
    }

    /// Checks and decodes a block's stored bytes (contents and trailer).
    fn decode_stored(&self, stored: &Bytes, handle: BlockHandle) -> Result<Block> {
        match check_trailer(stored, &self.path, handle.offset)? {
            Unsealed::Stored { body_bytes } => {
                Block::decode(stored.slice(..body_bytes), self.path.clone(), handle.offset)
            }
            Unsealed::Decompressed(raw) => Block::decode(raw, self.path.clone(), handle.offset),
        }
    }

    /// The stored bytes of the block at `handle`, from `ahead` or from a
    /// new read of [`READAHEAD_BYTES`] (or the block, if larger) there.
    fn stored_ahead(&self, handle: BlockHandle, ahead: &mut Readahead) -> Result<Bytes> {
        let len = handle.size_with_trailer();
        let held = handle.offset.checked_sub(ahead.base).and_then(|at| usize::try_from(at).ok());
        let held = held.filter(|&at| at.checked_add(len).is_some_and(|end| end <= ahead.buf.len()));
        let start = if let Some(at) = held {
            at
        } else {
            let rest = self.file.len().saturating_sub(handle.offset);
            let want = u64::try_from(len.max(READAHEAD_BYTES)).unwrap_or(u64::MAX).min(rest);
            let want = usize::try_from(want).unwrap_or(len).max(len);
            ahead.buf = Bytes::from(self.file.read_at(handle.offset, want)?);
            ahead.base = handle.offset;
            0
        };
        Ok(ahead.buf.slice(start..start + len))
    }

    /// The handle of data block `index`.
    fn handle(&self, index: usize) -> Result<BlockHandle> {
        self.index.handle(index).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "block {index} of {} does not exist ({} blocks)",
                self.path.display(),
                self.index.len()
            ))
        })
    }

    /// Where the block at `handle` starts in the map, and its stored bytes
    /// (contents and trailer).
    fn stored_in_map<'a>(&self, file: &'a Bytes, handle: BlockHandle) -> Result<(usize, &'a [u8])> {
        let start = usize::try_from(handle.offset).unwrap_or(usize::MAX);
        let stored = start.checked_add(handle.size_with_trailer()).and_then(|end| file.get(start..end));
        let stored = stored.ok_or_else(|| {
            Error::corruption(
                &*self.path,
                handle.offset,
                format!("block of {} bytes runs past the end of the file", handle.size_with_trailer()),
            )
        })?;
        Ok((start, stored))
    }

    /// Checks and decodes data block `b` (at `handle`) from the map: used
    /// in place when it was stored uncompressed, else decompressed into
    /// memory. An uncompressed block checked before in this process
    /// ([`SstReader::checked`]) has only its directory read again.
    fn decode_in_map(&self, file: &Bytes, b: usize, handle: BlockHandle) -> Result<Block> {
        let (start, stored) = self.stored_in_map(file, handle)?;
        let checked = self.checked.get(b);
        if checked.is_some_and(|c| c.load(Ordering::Acquire)) {
            let body_bytes = stored.len() - BLOCK_TRAILER_BYTES;
            let body = file.slice(start..start + body_bytes);
            return Block::decode_mapped_checked_before(body, self.path.clone(), handle.offset);
        }
        match check_trailer(stored, &self.path, handle.offset)? {
            Unsealed::Stored { body_bytes } => {
                let body = file.slice(start..start + body_bytes);
                let block = Block::decode_mapped(body, self.path.clone(), handle.offset)?;
                if let Some(c) = checked {
                    c.store(true, Ordering::Release);
                }
                Ok(block)
            }
            Unsealed::Decompressed(raw) => Block::decode(raw, self.path.clone(), handle.offset),
        }
    }

    /// Data block `index` (0-based), from the cache or read, checked and
    /// decompressed. A bad block is `Error::Corruption` at its offset.
    pub fn read_block(&self, index: usize) -> Result<Arc<Block>> {
        let handle = self.handle(index)?;
        self.cache.get_or_load((self.file_number, handle.offset), || self.load_block(index, handle))
    }

    /// Data block `index` for a table scan: from the cache, else read and
    /// cached only while the cache has room (see [`Blocks::Scanned`]).
    ///
    /// [`Blocks::Scanned`]: crate::sst::Blocks::Scanned
    pub fn read_block_scanned(&self, index: usize) -> Result<Arc<Block>> {
        let handle = self.handle(index)?;
        self.cache.get_or_load_without_eviction((self.file_number, handle.offset), || {
            self.load_block(index, handle)
        })
    }

    /// Data block `b` (at `handle`), decoded where it lies in the file's
    /// map or read, checked and decompressed.
    fn load_block(&self, b: usize, handle: BlockHandle) -> Result<Block> {
        if let Some(file) = &self.mapped {
            return self.decode_in_map(file, b, handle);
        }
        let stored = self.file.read_at(handle.offset, handle.size_with_trailer())?;
        Block::decode(unseal(stored, &self.path, handle.offset)?, self.path.clone(), handle.offset)
    }

    /// Data block `index` for a pass over the file in order (compaction):
    /// read with `pread` in runs of [`READAHEAD_BYTES`] kept in `ahead`,
    /// neither through the file's map nor into the block cache. A
    /// compaction reads each block once: through the map its pages would
    /// stay resident in the process (the sustained-overload run peaked at
    /// 1.3 GiB of RSS under a 32 MiB write budget), and through the cache
    /// it would evict the blocks that lookups use.
    pub fn read_block_ahead(&self, index: usize, ahead: &mut Readahead) -> Result<Arc<Block>> {
        let handle = self.handle(index)?;
        let stored = self.stored_ahead(handle, ahead)?;
        Ok(Arc::new(self.decode_stored(&stored, handle)?))
    }

    /// Whether the zone maps order float values as Arrow does (IEEE 754
    /// totalOrder), so they may rule out blocks for float predicates:
    /// from format version 3 on.
    pub fn float_zones_in_total_order(&self) -> bool {
        self.properties.format_version >= super::format::FORMAT_VERSION_FILE_NUMBER
    }

    /// The zones of data block `index`'s stored columns, if recorded.
    pub fn zones(&self, index: usize) -> Option<&[crate::row::zone::Zone]> {
        self.zones.as_ref().and_then(|z| z.get(index)).map(Vec::as_slice)
    }

    /// Each stored column's zones folded over every data block, if the
    /// file has zone maps (computed once per reader).
    /// The table schema version the file's rows were written under.
    pub fn schema_version(&self) -> u32 {
        self.schema_version.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records the schema version the file's MANIFEST entry gives.
    pub(crate) fn set_schema_version(&self, version: u32) {
        self.schema_version.store(version, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn column_zones(&self) -> Option<&[crate::row::zone::ColumnZone]> {
        self.column_zones.get_or_init(|| self.zones.as_deref().map(crate::row::zone::fold)).as_deref()
    }

    /// The learned index, if the SST has one.
    pub fn model(&self) -> Option<&Model> {
        self.model.as_ref()
    }

    /// Number of data blocks (at least one).
    pub fn block_count(&self) -> usize {
        self.index.len()
    }

    /// The first data block that can hold an entry >= `(user_key, trailer)`;
    /// `None` if every entry is below it.
    pub fn find_block(&self, user_key: &[u8], trailer: u64) -> Option<usize> {
        self.index.find(user_key, trailer)
    }

    /// What the file holds.
    pub fn properties(&self) -> &Properties {
        &self.properties
    }

    /// Bytes in the file.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads a meta block, which must end at or before `limit` (the start of the
/// structure after it), and checks its trailer.
fn read_meta_block(file: &dyn RandomAccessFile, path: &Path, h: BlockHandle, limit: u64) -> Result<Vec<u8>> {
    if h.end_with_trailer() > limit {
        return Err(Error::corruption(
            path,
            h.offset,
            format!("meta block of {} bytes runs past {limit}", h.size),
        ));
    }
    unseal(file.read_at(h.offset, h.size_with_trailer())?, path, h.offset)
}

/// Finds the required meta blocks; unknown kinds are ignored, for later
/// versions that add blocks without changing the footer.
fn locate_meta(entries: &[MetaEntry], path: &Path, metaindex: BlockHandle) -> Result<MetaHandles> {
    let find = |kind: u8| entries.iter().find(|e| e.kind == kind).map(|e| e.handle);
    let missing =
        |what: &str| Error::corruption(path, metaindex.offset, format!("metaindex has no {what} block"));
    let index = find(META_INDEX).ok_or_else(|| missing("index"))?;
    let properties = find(META_PROPERTIES).ok_or_else(|| missing("properties"))?;
    let data_end = entries.iter().map(|e| e.handle.offset).min().unwrap_or(metaindex.offset);
    Ok(MetaHandles {
        filter: find(META_FILTER),
        index,
        properties,
        zones: find(META_ZONES),
        model: find(META_MODEL),
        data_end,
    })
}

/// The properties must agree with the index on the block count and the
/// largest key.
fn check_against_index(p: &Properties, index: &FenceIndex, path: &Path, offset: u64) -> Result<()> {
    let (last_key, last_trailer) = index.fence(index.len() - 1);
    if p.data_blocks != index.len() as u64
        || p.largest.user_key != last_key
        || p.largest.trailer != last_trailer
    {
        return Err(Error::corruption(path, offset, "properties disagree with the index"));
    }
    Ok(())
}

/// An entry found by a lookup: its block and row.
pub type Found<'a> = Option<(Fetched<'a>, usize)>;

/// How one point lookup in an SST was answered.
#[derive(Debug, Clone, Copy, Default)]
#[expect(clippy::struct_excessive_bools, reason = "independent flags of one lookup")]
pub struct LookupTrace {
    /// The bloom filter ruled the key out.
    pub filtered: bool,
    /// The learned index located (or ruled out) the key.
    pub by_model: bool,
    /// The fence keys located the key.
    pub by_fences: bool,
    /// Entries in the model's search window.
    pub window: u64,
    /// Take timings (set by the caller).
    pub timed: bool,
    /// Nanoseconds in the bloom filter.
    pub filter_ns: u64,
    /// Nanoseconds locating the block (model or fences), excluding the fetch.
    pub index_ns: u64,
    /// Nanoseconds fetching blocks (cache hit or read).
    pub block_ns: u64,
}

fn elapsed_ns(start: Option<std::time::Instant>) -> u64 {
    start.map_or(0, |s| s.elapsed().as_nanos() as u64)
}

/// Whether a block's fence `(key, trailer)` sorts before the target, so the
/// block holds no entry at or after it.
fn fence_below((key, trailer): (&[u8], u64), user_key: &[u8], target: u64) -> bool {
    compare(key, trailer, user_key, target).is_lt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_states_pack_and_unpack() {
        let shape =
            |rows, key_width, value_width| InPlace::Shape(FixedShape { rows, key_width, value_width });
        for state in [
            InPlace::Unchecked,
            InPlace::No,
            InPlace::Parse,
            shape(1, 0, 0),
            shape(128, 8, 16),
            shape((1 << ROWS_BITS) - 1, (1 << KEY_WIDTH_BITS) - 1, (1 << VALUE_WIDTH_BITS) - 1),
        ] {
            assert_eq!(InPlace::unpack(state.pack()), state);
        }
        // A shape too large to pack is read by parsing the directory.
        for too_big in [
            shape(1 << ROWS_BITS, 8, 8),
            shape(1, 1 << KEY_WIDTH_BITS, 8),
            shape(1, 8, 1 << VALUE_WIDTH_BITS),
        ] {
            assert_eq!(InPlace::unpack(too_big.pack()), InPlace::Parse);
        }
    }
}
