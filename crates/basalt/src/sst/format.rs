//! Every constant of the SST format, and the fixed-size structures that locate
//! the rest of a file: block handles, the block trailer's checksum and the
//! footer. `docs/format.md` draws these bytes.

use std::path::Path;

use crate::codec::varint::Reader;
use crate::error::{Error, Result};

/// The format version this code writes. Version 2 may write a key-value
/// block's key or value column without offsets when its values all have
/// one width (an empty offsets buffer); version 1 never does. Readers of
/// version 1 reject version 2 files by this number, not by a confusing
/// corruption of the first such block. Version 3 records the file's number
/// in its properties (so a file found under another name is caught) and
/// orders float columns' zone-map ranges by IEEE 754 totalOrder, as
/// Arrow's comparison kernels do (versions 1 and 2 recorded the key
/// codec's order, in which `-0.0 == 0.0` and every NaN sorts last; their
/// float zones are not used for pruning).
/// Version 4 ends every data block with zero padding (inside its checksum)
/// so that the next block starts at a multiple of 8 in the file: the
/// buffers of a memory-mapped block are then 8-byte aligned in memory and
/// scans hand them to Arrow without a copy. Readers ignore the padding, so
/// versions 1 to 3 read as before.
/// Version 5 records in the properties how many distinct user keys the
/// file holds: a file of puts only, whose keys no other source holds, then
/// counts its rows from metadata (`count(*)` without reading a block).
/// Version 6 may store a table block's integer columns packed (frame of
/// reference and bit packing, `block/packed.rs`); a version 5 reader would
/// take a packed column's header for offsets, so it refuses the file by
/// its footer instead.
/// Version 7 records in the properties how many key prefixes (an index
/// entry's leading indexed values) the filter holds besides the whole
/// keys: an equality or prefix lookup on an index skips a file whose
/// filter lacks its prefix. Files before it hold none, and are read.
/// Version 8 may compress a block with zstd (compression type 2), may
/// store a table block's string and binary columns as dictionaries
/// (`block/dictionary.rs`) and writes a table block's keys without
/// offsets when they all have one width, as key-value blocks do; a
/// version 7 reader would take a dictionary header for offsets, so it
/// refuses the file by its footer instead.
/// Version 9 records in the properties the table schema version the rows
/// were written under and the fingerprint of that layout (0 and 0 for a
/// key-value or index tree), and a file written outside any database
/// (`Table::write_sst_files`) names file 0: its number is given when it is
/// ingested, its schema version, which its MANIFEST entry must repeat, is
/// read from the file itself, and its fingerprint must be the table's.
pub const FORMAT_VERSION: u32 = 9;

/// The first version whose properties hold the rows' schema version.
pub const FORMAT_VERSION_SCHEMA: u32 = 9;

/// The file number a file written outside any database records: it is
/// numbered when ingested, and matches any MANIFEST entry's number.
pub const EXTERNAL_FILE_NUMBER: u64 = 0;

/// The first version whose properties hold the count of key prefixes in
/// the filter.
pub const FORMAT_VERSION_PREFIXES: u32 = 7;

/// The first version whose properties hold the count of distinct user keys.
pub const FORMAT_VERSION_DISTINCT_KEYS: u32 = 5;

/// The first version whose properties hold the file number and whose
/// float zone ranges are in totalOrder.
pub const FORMAT_VERSION_FILE_NUMBER: u32 = 3;

/// The oldest format version this code reads.
pub const FORMAT_VERSION_MIN: u32 = 1;

/// The last eight bytes of every SST, `89 'B' 'A' 'S' 'A' 'L' 'T' 0A` on disk.
/// The high-bit first byte catches 7-bit transfers and the newline catches
/// line-ending conversion, as in PNG.
pub const MAGIC: u64 = u64::from_le_bytes(*b"\x89BASALT\n");

/// Size of the footer at the end of the file.
pub const FOOTER_BYTES: usize = 40;
/// Zero bytes in the footer that a later version may give a meaning.
pub const FOOTER_RESERVED_BYTES: usize = 12;
/// Footer bytes covered by the footer's CRC (everything before the CRC).
pub const FOOTER_CHECKED_BYTES: usize = 28;

/// Every stored block is followed by a compression type byte and a masked
/// CRC32C (u32 LE).
pub const BLOCK_TRAILER_BYTES: usize = 5;
/// An encoded [`BlockHandle`]: offset u64 LE, size u32 LE.
pub const BLOCK_HANDLE_BYTES: usize = 12;

/// Compression type byte: the block is stored as it is.
pub const COMPRESSION_NONE: u8 = 0;
/// Compression type byte: u32 LE uncompressed length, then an LZ4 block.
pub const COMPRESSION_LZ4: u8 = 1;
/// Compression type byte: u32 LE uncompressed length, then one zstd frame
/// (with its content size). From format version 8.
pub const COMPRESSION_ZSTD: u8 = 2;
/// zstd's level for data blocks: 3, zstd's own default. On this project's
/// table blocks higher levels cost compaction more than they save
/// (docs/BENCHMARKS.md, "Bytes on disk").
pub const ZSTD_LEVEL: i32 = 3;
/// A zstd block holds at most 128 KiB of content in at least 4 bytes (an
/// RLE block), so no frame expands more than this; a larger claimed length
/// is corruption, and checking it bounds the allocation.
pub const ZSTD_EXPANSION_MAX: usize = 1 << 15;
/// Compression is kept only when it saves at least `1 / 8` of the block;
/// smaller savings do not pay for the decompression on every read.
pub const COMPRESSION_SAVING_DIVISOR: usize = 8;
/// LZ4 cannot expand data by more than 255x; a larger claimed uncompressed
/// length is corruption, and checking it bounds the allocation.
pub const LZ4_EXPANSION_MAX: usize = 256;

/// Added to the rotated CRC, as in `LevelDB`, so that a CRC computed over data
/// that itself holds CRCs does not come out trivially structured.
pub const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// Block header before the buffer directory: row count u32, buffer count u32.
pub const BLOCK_HEADER_FIXED_BYTES: usize = 8;
/// One buffer directory entry: offset u32, length u32 (from block start).
pub const BUFFER_ENTRY_BYTES: usize = 8;
/// Every buffer starts at a multiple of this offset from the block start, as
/// Arrow wants for its offset and value buffers.
pub const BUFFER_ALIGN_BYTES: usize = 8;
/// Buffers of a v1 data block (and of the index block, which has the same
/// layout): the five below.
pub const DATA_BLOCK_BUFFERS: usize = 5;
/// Buffer of key offsets: i32 LE x (rows + 1), Arrow `Binary` offsets.
pub const BUF_KEY_OFFSETS: usize = 0;
/// Buffer of concatenated user keys.
pub const BUF_KEY_DATA: usize = 1;
/// Buffer of trailers (`seqno << 8 | kind`): u64 LE x rows.
pub const BUF_TRAILERS: usize = 2;
/// Buffer of value offsets: i32 LE x (rows + 1).
pub const BUF_VALUE_OFFSETS: usize = 3;
/// Buffer of concatenated values (empty for deletes).
pub const BUF_VALUE_DATA: usize = 4;
/// Largest uncompressed block: Arrow offsets are i32, and a block handle's
/// size is u32.
pub const BLOCK_BYTES_MAX: usize = i32::MAX as usize;
/// Largest key + value of one entry. A block is cut once it reaches its
/// target, so target + one entry + overhead must stay below
/// [`BLOCK_BYTES_MAX`].
pub const ENTRY_BYTES_MAX: usize = 1 << 30;
/// Largest accepted `block_bytes_target`; larger targets are clamped.
pub const BLOCK_BYTES_TARGET_MAX: usize = 512 << 20;

/// Filter block header: block count u32 LE, probe count u8, 3 zero bytes.
pub const FILTER_HEADER_BYTES: usize = 8;
/// One filter block: 512 bits, one cache line, so a probe costs one miss.
pub const FILTER_LINE_BYTES: usize = 64;
/// Bits of one filter block.
pub const FILTER_LINE_BITS: u32 = 512;
/// Most probes per key; more only add cache work for no gain in practice.
pub const FILTER_PROBES_MAX: u32 = 16;
/// Largest bits per key the writer honours; beyond ~20 the false-positive
/// rate of a blocked filter stops improving.
pub const FILTER_BITS_PER_KEY_MAX: u32 = 64;

/// Metaindex kind: the bloom filter over user keys (absent if disabled).
pub const META_FILTER: u8 = 1;
/// Metaindex kind: the fence-key index of the data blocks.
pub const META_INDEX: u8 = 2;
/// Metaindex kind: the properties block.
pub const META_PROPERTIES: u8 = 3;
/// Metaindex kind of the zone-map block (table trees only).
pub const META_ZONES: u8 = 4;
/// Metaindex kind of the learned-index model block.
pub const META_MODEL: u8 = 5;
/// One metaindex entry: kind u8, offset u64 LE, size u32 LE.
pub const METAINDEX_ENTRY_BYTES: usize = 13;
/// Metaindex header: entry count u32 LE.
pub const METAINDEX_HEADER_BYTES: usize = 4;
/// Most metaindex entries a reader accepts; bounds the work on a bad count.
pub const METAINDEX_ENTRIES_MAX: usize = 64;

/// Fixed part of the properties block, before the two smallest/largest keys
/// (and, from version 3, the file number).
pub const PROPERTIES_FIXED_BYTES: usize = 80;

/// Masks a CRC (rotate right by 15, add [`CRC_MASK_DELTA`]).
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

#[cfg(test)]
/// Inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)
}

/// The masked CRC32C stored in a block trailer: over the stored block bytes
/// followed by the compression type byte.
pub fn block_crc(stored: &[u8], compression_type: u8) -> u32 {
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(stored), &[compression_type]))
}

/// Where a block sits in the file: `size` counts the stored block only, not
/// its 5-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Stored (possibly compressed) size, excluding the trailer.
    pub size: u32,
}

impl BlockHandle {
    /// Appends the 12-byte encoding.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }

    /// Reads a 12-byte handle.
    pub fn read(r: &mut Reader<'_, '_>) -> Result<Self> {
        Ok(BlockHandle { offset: r.u64_le()?, size: r.u32_le()? })
    }

    /// Stored size plus trailer: the bytes to read.
    pub fn size_with_trailer(&self) -> usize {
        self.size as usize + BLOCK_TRAILER_BYTES
    }

    /// One past the block's trailer; saturates so a corrupt offset cannot wrap.
    pub fn end_with_trailer(&self) -> u64 {
        self.offset.saturating_add(self.size_with_trailer() as u64)
    }
}

/// The fixed-size record at the end of every SST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Where the metaindex block is.
    pub metaindex: BlockHandle,
    /// Format version of the file.
    pub format_version: u32,
}

impl Footer {
    /// Encodes the footer into its [`FOOTER_BYTES`] bytes.
    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut buf = Vec::with_capacity(FOOTER_BYTES);
        self.metaindex.encode_to(&mut buf);
        buf.extend_from_slice(&self.format_version.to_le_bytes());
        buf.extend_from_slice(&[0u8; FOOTER_RESERVED_BYTES]);
        debug_assert_eq!(buf.len(), FOOTER_CHECKED_BYTES);
        let crc = mask_crc(crc32c::crc32c(&buf));
        buf.extend_from_slice(&crc.to_le_bytes());
        buf.extend_from_slice(&MAGIC.to_le_bytes());
        let mut out = [0u8; FOOTER_BYTES];
        out.copy_from_slice(&buf);
        out
    }

    /// Decodes and checks a footer read at `offset` of `file`: magic first
    /// (is it an SST at all), then the CRC, then the version.
    pub fn decode(bytes: &[u8], file: &Path, offset: u64) -> Result<Footer> {
        if bytes.len() != FOOTER_BYTES {
            return Err(Error::corruption(file, offset, "footer has the wrong size"));
        }
        let mut r = Reader::new(bytes, file, offset);
        let metaindex = BlockHandle::read(&mut r)?;
        let format_version = r.u32_le()?;
        let reserved = r.bytes(FOOTER_RESERVED_BYTES)?;
        let crc = r.u32_le()?;
        let magic = r.u64_le()?;
        if magic != MAGIC {
            let at = offset + (FOOTER_BYTES - 8) as u64;
            return Err(Error::corruption(file, at, format!("bad magic {magic:#018x}: not an SST")));
        }
        let actual = mask_crc(crc32c::crc32c(&bytes[..FOOTER_CHECKED_BYTES]));
        if crc != actual {
            let at = offset + FOOTER_CHECKED_BYTES as u64;
            return Err(Error::corruption(file, at, "footer checksum mismatch"));
        }
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&format_version) {
            return Err(Error::corruption(
                file,
                offset + 12,
                format!("unknown SST format version {format_version}"),
            ));
        }
        if reserved.iter().any(|&b| b != 0) {
            return Err(Error::corruption(file, offset + 16, "reserved footer bytes are not zero"));
        }
        Ok(Footer { metaindex, format_version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::manual_rotate, reason = "checks against LevelDB's formula as written")]
    fn crc_mask_round_trips() {
        for crc in [0, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
            assert_eq!(mask_crc(crc), ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8));
        }
    }

    #[test]
    fn magic_bytes_are_as_documented() {
        assert_eq!(MAGIC.to_le_bytes(), [0x89, b'B', b'A', b'S', b'A', b'L', b'T', 0x0a]);
    }

    #[test]
    fn footer_round_trips_and_rejects_damage() {
        let path = Path::new("f.sst");
        let footer =
            Footer { metaindex: BlockHandle { offset: 12345, size: 77 }, format_version: FORMAT_VERSION };
        let bytes = footer.encode();
        assert_eq!(Footer::decode(&bytes, path, 100).expect("decodes"), footer);
        for i in 0..FOOTER_BYTES {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            let err = Footer::decode(&bad, path, 100).expect_err("damage is caught");
            assert!(err.is_corruption());
        }
        assert!(Footer::decode(&bytes[1..], path, 0).is_err());
    }

    #[test]
    fn unknown_version_is_corruption() {
        for version in [0, FORMAT_VERSION + 1] {
            let footer = Footer { metaindex: BlockHandle::default(), format_version: version };
            let err = Footer::decode(&footer.encode(), Path::new("f"), 0).expect_err("rejected");
            assert!(err.to_string().contains(&format!("version {version}")), "{err}");
        }
    }
}
