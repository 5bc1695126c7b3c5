//! How a block is stored: optional LZ4 or zstd compression and the 5-byte trailer
//! (compression type, masked CRC32C) that follows every data and meta block.
//! `seal` turns block contents into stored bytes; `unseal` checks and undoes
//! it, so every block the reader decodes has passed its checksum.

use std::path::Path;

use std::cell::RefCell;

use super::format::{
    BLOCK_BYTES_MAX, BLOCK_TRAILER_BYTES, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SAVING_DIVISOR,
    COMPRESSION_ZSTD, LZ4_EXPANSION_MAX, ZSTD_EXPANSION_MAX, ZSTD_LEVEL, block_crc,
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
            keep_if_it_saves(raw, |r| Some(lz4_flex::block::compress_prepend_size(r)), COMPRESSION_LZ4)
        }
        Compression::Zstd => keep_if_it_saves(raw, compress_zstd, COMPRESSION_ZSTD),
    };
    let crc = block_crc(&stored, kind);
    stored.reserve_exact(BLOCK_TRAILER_BYTES);
    stored.push(kind);
    stored.extend_from_slice(&crc.to_le_bytes());
    stored
}

/// `raw` compressed by `compress` when that saves at least
/// `1 / COMPRESSION_SAVING_DIVISOR` of it, else `raw` as it is.
fn keep_if_it_saves(raw: Vec<u8>, compress: impl Fn(&[u8]) -> Option<Vec<u8>>, kind: u8) -> (Vec<u8>, u8) {
    match compress(&raw) {
        Some(packed) if packed.len() <= raw.len() - raw.len() / COMPRESSION_SAVING_DIVISOR => (packed, kind),
        _ => (raw, COMPRESSION_NONE),
    }
}

thread_local! {
    // One zstd context per thread, reused block after block: a context
    // holds about a megabyte of tables at level 3, and making one per
    // block costs more than compressing a small block.
    static ZSTD_COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// The u32 LE length of `raw`, then a zstd frame of it; `None` if zstd
/// fails (the block is then stored as it is).
fn compress_zstd(raw: &[u8]) -> Option<Vec<u8>> {
    ZSTD_COMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
        }
        let compressor = slot.as_mut()?;
        let mut out = Vec::with_capacity(4 + zstd::zstd_safe::compress_bound(raw.len()));
        out.extend_from_slice(&u32::try_from(raw.len()).ok()?.to_le_bytes());
        let mut frame = compressor.compress(raw).ok()?;
        out.append(&mut frame);
        Some(out)
    })
}

fn decompress_zstd(stored: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let Some((len_bytes, frame)) = stored.split_first_chunk::<4>() else {
        return Err("zstd block shorter than its length prefix".into());
    };
    let len = u32::from_le_bytes(*len_bytes) as usize;
    // The frame states its content size too; the two must agree before
    // anything is allocated, so a damaged length cannot ask for gigabytes
    // the frame does not hold.
    // A zstd block decompresses to at most 128 KiB and takes at least 4
    // bytes: no frame expands more than 32,768 times.
    let most = frame.len().saturating_mul(ZSTD_EXPANSION_MAX);
    match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n == len as u64 && len <= BLOCK_BYTES_MAX && len <= most => {}
        Ok(Some(n)) => return Err(format!("zstd block claims {len} bytes, its frame {n}")),
        _ => return Err("zstd block has no readable frame header".into()),
    }
    ZSTD_DECOMPRESSOR.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = zstd::bulk::Decompressor::new().ok();
        }
        let decompressor = slot.as_mut().ok_or("zstd context could not be made")?;
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| format!("zstd block of {len} bytes cannot be allocated"))?;
        match decompressor.decompress_to_buffer(frame, &mut out) {
            Ok(n) if n == len => Ok(out),
            Ok(n) => Err(format!("zstd block decompressed to {n} bytes, expected {len}")),
            Err(e) => Err(format!("zstd block does not decompress: {e}")),
        }
    })
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
        COMPRESSION_ZSTD => decompress_zstd(body).map(Unsealed::Decompressed).map_err(corrupt),
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
    fn blocks_round_trip_with_and_without_compression() {
        let text: Vec<u8> = b"columnar blocks compress well ".repeat(100);
        let noise: Vec<u8> =
            (0..3000u32).map(|i| xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes()) as u8).collect();
        let zeros = vec![0u8; 1 << 20];
        for raw in [&text[..], &noise[..], &[][..], &zeros[..]] {
            assert_eq!(round_trip(raw, Compression::None), raw);
            assert_eq!(round_trip(raw, Compression::Lz4), raw);
            assert_eq!(round_trip(raw, Compression::Zstd), raw);
        }
        let sealed = seal(text.clone(), Compression::Zstd);
        assert_eq!(sealed[sealed.len() - BLOCK_TRAILER_BYTES], COMPRESSION_ZSTD);
        let sealed = seal(noise.clone(), Compression::Zstd);
        assert_eq!(sealed[sealed.len() - BLOCK_TRAILER_BYTES], COMPRESSION_NONE);
        let sealed = seal(text.clone(), Compression::Lz4);
        assert_eq!(sealed[sealed.len() - BLOCK_TRAILER_BYTES], COMPRESSION_LZ4);
        let sealed = seal(noise, Compression::Lz4);
        assert_eq!(sealed[sealed.len() - BLOCK_TRAILER_BYTES], COMPRESSION_NONE);
    }

    #[test]
    fn every_flip_is_caught() {
        let raw = b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc".to_vec();
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
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

    /// A zstd body whose checksum is right but whose bytes are not what the
    /// writer made: the length prefix disagreeing with the frame (either
    /// way), a cut frame, garbage. Each is corruption, none allocates what
    /// the damaged length claims.
    #[test]
    fn bad_zstd_bodies_are_corruption_not_panics() {
        let raw = b"settled data compresses ".repeat(200);
        let good = compress_zstd(&raw).expect("compresses");
        let mut cases: Vec<Vec<u8>> =
            vec![vec![], vec![1, 2], good[..good.len() / 2].to_vec(), vec![0xff; 40]];
        for len in [0u32, raw.len() as u32 - 1, raw.len() as u32 + 1, u32::MAX] {
            let mut bad = good.clone();
            bad[..4].copy_from_slice(&len.to_le_bytes());
            cases.push(bad);
        }
        // 20 bytes whose prefix and frame header agree on 2 GiB, then an
        // empty last block: refused before anything is allocated.
        cases.push(vec![
            0xff, 0xff, 0xff, 0x7f, 0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 1, 0, 0,
        ]);
        // A frame header claiming another content size than the frame holds.
        let mut lying = good.clone();
        let last = lying.len() - 1;
        lying[last] ^= 0x55;
        cases.push(lying);
        for body in cases {
            let mut stored = body;
            let crc = block_crc(&stored, COMPRESSION_ZSTD);
            stored.push(COMPRESSION_ZSTD);
            stored.extend_from_slice(&crc.to_le_bytes());
            assert!(unseal(stored, Path::new("t"), 0).expect_err("bad").is_corruption());
        }
        let mut stored = good;
        let crc = block_crc(&stored, COMPRESSION_ZSTD);
        stored.push(COMPRESSION_ZSTD);
        stored.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(unseal(stored, Path::new("t"), 0).expect("good"), raw);
    }
}
