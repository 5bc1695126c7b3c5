//! How a block is stored: optional LZ4 compression and the 5-byte trailer
//! (compression type, masked CRC32C) that follows every data and meta block.
//! `seal` turns block contents into stored bytes; `unseal` checks and undoes
//! it, so every block the reader decodes has passed its checksum.

use std::path::Path;

use super::format::{
    BLOCK_BYTES_MAX, BLOCK_TRAILER_BYTES, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SAVING_DIVISOR,
    LZ4_EXPANSION_MAX, block_crc,
};
use crate::error::{Error, Result};
use crate::options::Compression;

/// Returns the stored form of `raw` followed by its trailer. The stored part
/// is `len - BLOCK_TRAILER_BYTES` bytes and never longer than `raw`.
pub fn seal(raw: Vec<u8>, compression: Compression) -> Vec<u8> {
    debug_assert!(raw.len() <= BLOCK_BYTES_MAX);
    let (mut stored, kind) = match compression {
        Compression::None => (raw, COMPRESSION_NONE),
        Compression::Lz4 => {
            let packed = lz4_flex::block::compress_prepend_size(&raw);
            if packed.len() <= raw.len() - raw.len() / COMPRESSION_SAVING_DIVISOR {
                (packed, COMPRESSION_LZ4)
            } else {
                (raw, COMPRESSION_NONE)
            }
        }
    };
    let crc = block_crc(&stored, kind);
    stored.reserve_exact(BLOCK_TRAILER_BYTES);
    stored.push(kind);
    stored.extend_from_slice(&crc.to_le_bytes());
    stored
}

/// Checks the trailer of a stored block read at `offset` of `file` and
/// returns the block contents, decompressed.
pub fn unseal(mut stored: Vec<u8>, file: &Path, offset: u64) -> Result<Vec<u8>> {
    match check_trailer(&stored, file, offset)? {
        Unsealed::Stored { body_bytes } => {
            stored.truncate(body_bytes);
            Ok(stored)
        }
        Unsealed::Decompressed(raw) => Ok(raw),
    }
}

/// What a stored block holds once its trailer checked out.
pub enum Unsealed {
    /// The contents are the first `body_bytes` bytes, as stored.
    Stored { body_bytes: usize },
    /// The contents, decompressed.
    Decompressed(Vec<u8>),
}

/// Checks the trailer of a stored block (contents and trailer) read at
/// `offset` of `file` without taking ownership, so a block that was stored
/// uncompressed can be used where it lies (a memory map).
pub fn check_trailer(stored: &[u8], file: &Path, offset: u64) -> Result<Unsealed> {
    let corrupt = |what: String| Error::corruption(file, offset, what);
    let Some((body, trailer)) = stored.split_last_chunk::<BLOCK_TRAILER_BYTES>() else {
        return Err(corrupt(format!("block of {} bytes has no trailer", stored.len())));
    };
    let [kind, crc @ ..] = *trailer;
    if block_crc(body, kind) != u32::from_le_bytes(crc) {
        return Err(corrupt("block checksum mismatch".into()));
    }
    match kind {
        COMPRESSION_NONE => Ok(Unsealed::Stored { body_bytes: body.len() }),
        COMPRESSION_LZ4 => decompress_lz4(body).map(Unsealed::Decompressed).map_err(corrupt),
        other => Err(corrupt(format!("unknown compression type {other}"))),
    }
}

fn decompress_lz4(stored: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let Some((len_bytes, packed)) = stored.split_first_chunk::<4>() else {
        return Err("LZ4 block shorter than its length prefix".into());
    };
    let len = u32::from_le_bytes(*len_bytes) as usize;
    if len > BLOCK_BYTES_MAX || len > packed.len().saturating_mul(LZ4_EXPANSION_MAX) {
        return Err(format!("LZ4 block claims an impossible length {len}"));
    }
    let mut out = vec![0u8; len];
    match lz4_flex::block::decompress_into(packed, &mut out) {
        Ok(n) if n == len => Ok(out),
        Ok(n) => Err(format!("LZ4 block decompressed to {n} bytes, expected {len}")),
        Err(e) => Err(format!("LZ4 block does not decompress: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(raw: &[u8], compression: Compression) -> Vec<u8> {
        let sealed = seal(raw.to_vec(), compression);
        assert!(sealed.len() <= raw.len() + BLOCK_TRAILER_BYTES);
        unseal(sealed, Path::new("t"), 0).expect("unseals")
    }

    #[test]
    fn blocks_round_trip_with_and_without_lz4() {
        let text: Vec<u8> = b"columnar blocks compress well ".repeat(100);
        let noise: Vec<u8> =
            (0..3000u32).map(|i| xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes()) as u8).collect();
        let zeros = vec![0u8; 1 << 20];
        for raw in [&text[..], &noise[..], &[][..], &zeros[..]] {
            assert_eq!(round_trip(raw, Compression::None), raw);
            assert_eq!(round_trip(raw, Compression::Lz4), raw);
        }
        let sealed = seal(text.clone(), Compression::Lz4);
        assert_eq!(sealed[sealed.len() - BLOCK_TRAILER_BYTES], COMPRESSION_LZ4);
        let sealed = seal(noise, Compression::Lz4);
        assert_eq!(sealed[sealed.len() - BLOCK_TRAILER_BYTES], COMPRESSION_NONE);
    }

    #[test]
    fn every_flip_is_caught() {
        let raw = b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc".to_vec();
        for compression in [Compression::None, Compression::Lz4] {
            let sealed = seal(raw.clone(), compression);
            for i in 0..sealed.len() {
                for bit in 0..8 {
                    let mut bad = sealed.clone();
                    bad[i] ^= 1 << bit;
                    let err = unseal(bad, Path::new("t"), 7).expect_err("flip caught");
                    assert!(err.is_corruption());
                }
            }
            assert!(unseal(sealed[..3].to_vec(), Path::new("t"), 7).is_err());
        }
    }

    #[test]
    fn bad_lz4_bodies_are_corruption_not_panics() {
        for body in [&[][..], &[1, 2][..], &[0xff, 0xff, 0xff, 0x7f, 0][..], &[10, 0, 0, 0, 0xff][..]] {
            let mut stored = body.to_vec();
            let crc = block_crc(&stored, COMPRESSION_LZ4);
            stored.push(COMPRESSION_LZ4);
            stored.extend_from_slice(&crc.to_le_bytes());
            assert!(unseal(stored, Path::new("t"), 0).expect_err("bad").is_corruption());
        }
    }
}
