//! The blob file format (drawn in `docs/format.md`, "Blob files"):
//!
//! ```text
//! file    := record* footer
//! record  := value length u32 LE | value bytes
//!            | u32 LE mask(crc32c(file number u64 LE | record offset u64 LE
//!                                 | value length u32 LE | value))
//! footer  := records u64 LE | value bytes u64 LE
//!            | u32 LE mask(crc32c(the 16 bytes before)) | magic u64 LE
//! pointer := varint file number | varint offset | varint value length
//! ```
//!
//! A pointer's offset is its record's. The record's checksum covers the
//! file number and offset it was written at, so a pointer that names the
//! wrong file or offset fails the check like a damaged value does; the
//! length makes the file readable record by record without the SSTs
//! (`verify`).

use std::path::Path;

use crate::codec::varint::{self, Reader};
use crate::error::{Error, Result};
use crate::log::format::mask_crc;

/// The last eight bytes of every blob file, `89 'B' 'A' 'S' 'B' 'L' 'O' 0A`.
pub const MAGIC: u64 = u64::from_le_bytes(*b"\x89BASBLO\n");
/// Bytes before each value: its length.
pub const RECORD_HEADER_BYTES: u64 = 4;
/// Bytes after each value: the record's masked CRC32C.
pub const RECORD_TRAILER_BYTES: u64 = 4;
/// Bytes a record adds to its value.
pub const RECORD_OVERHEAD_BYTES: u64 = RECORD_HEADER_BYTES + RECORD_TRAILER_BYTES;
/// Largest value a record holds (its length is a u32).
pub const VALUE_BYTES_MAX: u64 = u32::MAX as u64;
/// Bytes of the footer.
pub const FOOTER_BYTES: usize = 28;

/// Where a value lives: in blob file `file`, `len` bytes at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobPointer {
    /// The blob file's number (`NNNNNN.blob`).
    pub file: u64,
    /// Offset of the value's record.
    pub offset: u64,
    /// The value's length.
    pub len: u64,
}

impl BlobPointer {
    /// Appends the pointer's encoding (three varints).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        varint::put_u64(out, self.file);
        varint::put_u64(out, self.offset);
        varint::put_u64(out, self.len);
    }

    /// Decodes a pointer stored as an entry's value in SST `sst` (named in
    /// the error if the bytes are not exactly one pointer).
    pub fn decode(bytes: &[u8], sst: &Path) -> Result<BlobPointer> {
        let mut r = Reader::new(bytes, sst, 0);
        let pointer = BlobPointer { file: r.varint()?, offset: r.varint()?, len: r.varint()? };
        if !r.is_empty() {
            return Err(Error::corruption(sst, 0, "a blob pointer with trailing bytes"));
        }
        Ok(pointer)
    }
}

/// The stored checksum of the record of `value` written at `offset` of
/// blob file `file` (`header` is its length field).
pub fn record_crc(file: u64, offset: u64, header: [u8; 4], value: &[u8]) -> u32 {
    let mut place = [0u8; 20];
    place[..8].copy_from_slice(&file.to_le_bytes());
    place[8..16].copy_from_slice(&offset.to_le_bytes());
    place[16..].copy_from_slice(&header);
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(&place), value))
}

/// The footer of a blob file of `records` values of `value_bytes` in all.
pub fn encode_footer(records: u64, value_bytes: u64) -> [u8; FOOTER_BYTES] {
    let mut f = [0u8; FOOTER_BYTES];
    f[..8].copy_from_slice(&records.to_le_bytes());
    f[8..16].copy_from_slice(&value_bytes.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c(&f[..16]));
    f[16..20].copy_from_slice(&crc.to_le_bytes());
    f[20..].copy_from_slice(&MAGIC.to_le_bytes());
    f
}

#[cfg(any(test, feature = "inspect"))]
/// Decodes the footer read at `offset` of `file`: (records, value bytes).
pub fn decode_footer(bytes: &[u8], file: &Path, offset: u64) -> Result<(u64, u64)> {
    let le64 = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    if bytes.len() != FOOTER_BYTES || le64(&bytes[20..]) != MAGIC {
        return Err(Error::corruption(file, offset, "not a blob file footer (bad magic)"));
    }
    let crc = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    if mask_crc(crc32c::crc32c(&bytes[..16])) != crc {
        return Err(Error::corruption(file, offset, "blob file footer checksum mismatch"));
    }
    Ok((le64(&bytes[..8]), le64(&bytes[8..16])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes_are_as_documented() {
        assert_eq!(MAGIC.to_le_bytes(), [0x89, b'B', b'A', b'S', b'B', b'L', b'O', 0x0a]);
    }

    #[test]
    fn pointers_round_trip_and_reject_extra_bytes() {
        let p = BlobPointer { file: 7, offset: 1 << 40, len: 300 };
        let mut bytes = Vec::new();
        p.encode_to(&mut bytes);
        assert_eq!(BlobPointer::decode(&bytes, Path::new("x.sst")).expect("decodes"), p);
        bytes.push(0);
        assert!(BlobPointer::decode(&bytes, Path::new("x.sst")).expect_err("extra").is_corruption());
        assert!(BlobPointer::decode(&bytes[..2], Path::new("x.sst")).expect_err("short").is_corruption());
    }

    #[test]
    fn footer_round_trips_and_every_flipped_byte_is_caught() {
        let f = encode_footer(12, 34_567);
        assert_eq!(decode_footer(&f, Path::new("b"), 9).expect("decodes"), (12, 34_567));
        for i in 0..FOOTER_BYTES {
            let mut bad = f;
            bad[i] ^= 0x04;
            assert!(decode_footer(&bad, Path::new("b"), 9).expect_err("caught").is_corruption(), "byte {i}");
        }
    }

    #[test]
    fn a_record_checksum_depends_on_where_it_was_written() {
        let h = 5u32.to_le_bytes();
        let c = record_crc(1, 0, h, b"value");
        assert_ne!(c, record_crc(2, 0, h, b"value"));
        assert_ne!(c, record_crc(1, 8, h, b"value"));
        assert_ne!(c, record_crc(1, 0, h, b"valuf"));
        assert_ne!(c, record_crc(1, 0, 6u32.to_le_bytes(), b"value"));
    }
}
