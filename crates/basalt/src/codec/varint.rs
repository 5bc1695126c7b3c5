//! LEB128 varints and a bounds-checked reader for decoding untrusted bytes.

use std::path::Path;

use crate::error::{Error, Result};

/// Appends `v` as an unsigned LEB128 varint.
pub fn put_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// The most bytes `put_u64` takes.
pub const U64_LEN_MAX: usize = 10;

/// How many bytes `put_u64` takes for `v`.
pub fn u64_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    put_u64(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// Reads fields from a byte slice, turning every overrun or malformed field
/// into [`Error::Corruption`] naming the file and absolute offset.
pub struct Reader<'a, 'f> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    file: &'f Path,
}

impl<'a, 'f> Reader<'a, 'f> {
    /// A reader over `buf`, which starts at byte `base` of `file`.
    pub fn new(buf: &'a [u8], file: &'f Path, base: u64) -> Self {
        Reader { buf, pos: 0, base, file }
    }

    /// An error at the current position.
    pub fn corrupt(&self, what: impl Into<String>) -> Error {
        Error::corruption(self.file, self.base + self.pos as u64, what)
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Current position relative to the start of the slice.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The error of a field running past the end. Out of line: decoding
    /// loops (a WAL batch's entries are decoded as they go into the
    /// memtable) keep only the bounds checks inline.
    #[cold]
    #[inline(never)]
    fn past_end(&self, n: usize) -> Error {
        self.corrupt(format!("field of {n} bytes runs past the end"))
    }

    /// Reads `n` raw bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(out) => {
                self.pos += n;
                Ok(out)
            }
            None => Err(self.past_end(n)),
        }
    }

    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.past_end(1)),
        }
    }

    /// Reads a little-endian u32.
    pub fn u32_le(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a little-endian u64.
    pub fn u64_le(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads an unsigned LEB128 varint of at most 10 bytes.
    #[inline]
    pub fn varint(&mut self) -> Result<u64> {
        // One byte is the common case: lengths under 128, small tree ids.
        if let Some(&b) = self.buf.get(self.pos).filter(|&&b| b < 0x80) {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(self.corrupt("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt("varint longer than 10 bytes"))
    }

    /// Reads a varint that must fit in `usize` and be at most `max`.
    #[inline]
    pub fn varint_len(&mut self, max: usize) -> Result<usize> {
        let v = self.varint()?;
        match usize::try_from(v) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(self.too_long(v, max)),
        }
    }

    #[cold]
    #[inline(never)]
    fn too_long(&self, v: u64, max: usize) -> Error {
        self.corrupt(format!("length {v} exceeds limit {max}"))
    }

    /// Reads a varint-length-prefixed byte string.
    #[inline]
    pub fn len_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.varint_len(self.remaining())?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        let path = Path::new("t");
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX >> 1, u64::MAX] {
            let mut buf = Vec::new();
            put_u64(&mut buf, v);
            assert_eq!(u64_len(v), buf.len(), "{v}");
            assert!(buf.len() <= U64_LEN_MAX);
            let mut r = Reader::new(&buf, path, 0);
            assert_eq!(r.varint().expect("decodes"), v);
            assert!(r.is_empty());
        }
        let bad = [0xffu8; 11];
        assert!(Reader::new(&bad, path, 0).varint().is_err());
        let short = [0x80u8];
        assert!(Reader::new(&short, path, 0).varint().is_err());
    }
}
