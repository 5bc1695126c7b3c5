//! Memcomparable key encoding: turns a tuple of typed key parts into bytes
//! whose unsigned lexicographic order is the tuple order, and back.
//!
//! This module owns the on-disk key format of primary keys and secondary-index
//! keys (`enc(index cols) | enc(pk)`); `docs/key-encoding.md` describes it byte
//! by byte. The format is stable: changing any byte layout here breaks every
//! existing database.
//!
//! - Integers are fixed width big-endian; signed ones have the sign bit
//!   flipped so negatives sort first.
//! - Floats flip all bits when negative and only the sign bit otherwise. `-0.0`
//!   is stored as `0.0` and every NaN as one positive NaN that sorts after
//!   `+inf`, so each key has exactly one encoding.
//! - Bytes and strings escape `00` as `00 FF` and end with `00 01`, so a
//!   string sorts before all its extensions whatever part follows it.
//! - Tuples are the concatenation of their parts; nullable parts get a marker
//!   byte first (`00` null, `01` present).
//!
//! Encoding is infallible. Decoding takes the expected [`KeyType`]s, checks
//! every byte and accepts only canonical encodings, so `encode(decode(b)) == b`
//! whenever decoding succeeds; anything else is [`Error::Corruption`] with an
//! empty file name and the offset within the key.

use std::cmp::Ordering;

use crate::error::{Error, Result};

/// Marker before a null part in the nullable form; sorts before any value.
pub const NULL_MARKER: u8 = 0x00;
/// Marker before a present part in the nullable form.
pub const PRESENT_MARKER: u8 = 0x01;

/// Escape byte inside bytes and strings; always followed by one of the two below.
const ESCAPE: u8 = 0x00;
/// `00 FF` stands for one zero byte of the value.
const ESCAPED_ZERO: u8 = 0xFF;
/// `00 01` ends the value; it sorts below `00 FF` and below any non-zero byte.
const TERMINATOR: u8 = 0x01;

/// The bit pattern of the one NaN an `f32` key holds (positive quiet NaN).
pub const CANONICAL_NAN_F32_BITS: u32 = 0x7fc0_0000;
/// The bit pattern of the one NaN an `f64` key holds (positive quiet NaN).
pub const CANONICAL_NAN_F64_BITS: u64 = 0x7ff8_0000_0000_0000;

const F32_SIGN: u32 = 1 << 31;
const F64_SIGN: u64 = 1 << 63;

/// The type of one key part; decoding needs the whole signature because the
/// encoding carries no type tags.
///
/// The derived order (declaration order) is only used to order values of
/// different types, which never share an encoded column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyType {
    /// One byte, `00` or `01`.
    Bool,
    /// One byte, sign bit flipped.
    I8,
    /// Two bytes big-endian, sign bit flipped.
    I16,
    /// Four bytes big-endian, sign bit flipped.
    I32,
    /// Eight bytes big-endian, sign bit flipped.
    I64,
    /// One byte.
    U8,
    /// Two bytes big-endian.
    U16,
    /// Four bytes big-endian.
    U32,
    /// Eight bytes big-endian.
    U64,
    /// Four bytes, IEEE order trick.
    F32,
    /// Eight bytes, IEEE order trick.
    F64,
    /// Escaped and terminated raw bytes.
    Bytes,
    /// Escaped and terminated UTF-8; decoding checks the UTF-8.
    Str,
}

impl KeyType {
    /// Encoded width of a part of this type, or `None` for variable width.
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            KeyType::Bool | KeyType::I8 | KeyType::U8 => Some(1),
            KeyType::I16 | KeyType::U16 => Some(2),
            KeyType::I32 | KeyType::U32 | KeyType::F32 => Some(4),
            KeyType::I64 | KeyType::U64 | KeyType::F64 => Some(8),
            KeyType::Bytes | KeyType::Str => None,
        }
    }
}

/// One key part borrowed from the caller, the input of encoding.
///
/// Equality and order are the key order, the one the encoding preserves: floats
/// compare by `total_cmp` after `-0.0` becomes `0.0` and every NaN the
/// canonical NaN (so `NaN == NaN` and `-0.0 == 0.0` here). Parts of different
/// types order by `KeyType`; that order has no meaning on disk.
#[derive(Debug, Clone, Copy)]
pub enum KeyValue<'a> {
    /// A boolean; `false` sorts first.
    Bool(bool),
    /// A signed 8-bit integer.
    I8(i8),
    /// A signed 16-bit integer.
    I16(i16),
    /// A signed 32-bit integer.
    I32(i32),
    /// A signed 64-bit integer.
    I64(i64),
    /// An unsigned 8-bit integer.
    U8(u8),
    /// An unsigned 16-bit integer.
    U16(u16),
    /// An unsigned 32-bit integer.
    U32(u32),
    /// An unsigned 64-bit integer.
    U64(u64),
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// Raw bytes.
    Bytes(&'a [u8]),
    /// A string; orders like its UTF-8 bytes.
    Str(&'a str),
}

/// One decoded key part. Owned because escaped bytes must be unescaped; floats
/// come back canonical. Equality and order are as for [`KeyValue`].
#[derive(Debug, Clone)]
pub enum OwnedKeyValue {
    /// A boolean.
    Bool(bool),
    /// A signed 8-bit integer.
    I8(i8),
    /// A signed 16-bit integer.
    I16(i16),
    /// A signed 32-bit integer.
    I32(i32),
    /// A signed 64-bit integer.
    I64(i64),
    /// An unsigned 8-bit integer.
    U8(u8),
    /// An unsigned 16-bit integer.
    U16(u16),
    /// An unsigned 32-bit integer.
    U32(u32),
    /// An unsigned 64-bit integer.
    U64(u64),
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A string.
    Str(String),
}

impl KeyValue<'_> {
    /// The type of this part.
    pub fn key_type(&self) -> KeyType {
        match self {
            KeyValue::Bool(_) => KeyType::Bool,
            KeyValue::I8(_) => KeyType::I8,
            KeyValue::I16(_) => KeyType::I16,
            KeyValue::I32(_) => KeyType::I32,
            KeyValue::I64(_) => KeyType::I64,
            KeyValue::U8(_) => KeyType::U8,
            KeyValue::U16(_) => KeyType::U16,
            KeyValue::U32(_) => KeyType::U32,
            KeyValue::U64(_) => KeyType::U64,
            KeyValue::F32(_) => KeyType::F32,
            KeyValue::F64(_) => KeyType::F64,
            KeyValue::Bytes(_) => KeyType::Bytes,
            KeyValue::Str(_) => KeyType::Str,
        }
    }

    /// An owned copy; floats are kept as given, not canonicalised.
    pub fn to_owned_value(&self) -> OwnedKeyValue {
        match *self {
            KeyValue::Bool(v) => OwnedKeyValue::Bool(v),
            KeyValue::I8(v) => OwnedKeyValue::I8(v),
            KeyValue::I16(v) => OwnedKeyValue::I16(v),
            KeyValue::I32(v) => OwnedKeyValue::I32(v),
            KeyValue::I64(v) => OwnedKeyValue::I64(v),
            KeyValue::U8(v) => OwnedKeyValue::U8(v),
            KeyValue::U16(v) => OwnedKeyValue::U16(v),
            KeyValue::U32(v) => OwnedKeyValue::U32(v),
            KeyValue::U64(v) => OwnedKeyValue::U64(v),
            KeyValue::F32(v) => OwnedKeyValue::F32(v),
            KeyValue::F64(v) => OwnedKeyValue::F64(v),
            KeyValue::Bytes(v) => OwnedKeyValue::Bytes(v.to_vec()),
            KeyValue::Str(v) => OwnedKeyValue::Str(v.to_owned()),
        }
    }
}

impl OwnedKeyValue {
    /// A borrowed view, ready to encode.
    pub fn as_value(&self) -> KeyValue<'_> {
        match self {
            OwnedKeyValue::Bool(v) => KeyValue::Bool(*v),
            OwnedKeyValue::I8(v) => KeyValue::I8(*v),
            OwnedKeyValue::I16(v) => KeyValue::I16(*v),
            OwnedKeyValue::I32(v) => KeyValue::I32(*v),
            OwnedKeyValue::I64(v) => KeyValue::I64(*v),
            OwnedKeyValue::U8(v) => KeyValue::U8(*v),
            OwnedKeyValue::U16(v) => KeyValue::U16(*v),
            OwnedKeyValue::U32(v) => KeyValue::U32(*v),
            OwnedKeyValue::U64(v) => KeyValue::U64(*v),
            OwnedKeyValue::F32(v) => KeyValue::F32(*v),
            OwnedKeyValue::F64(v) => KeyValue::F64(*v),
            OwnedKeyValue::Bytes(v) => KeyValue::Bytes(v),
            OwnedKeyValue::Str(v) => KeyValue::Str(v),
        }
    }

    /// The type of this part.
    pub fn key_type(&self) -> KeyType {
        self.as_value().key_type()
    }
}

impl Ord for KeyValue<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (KeyValue::Bool(a), KeyValue::Bool(b)) => a.cmp(b),
            (KeyValue::I8(a), KeyValue::I8(b)) => a.cmp(b),
            (KeyValue::I16(a), KeyValue::I16(b)) => a.cmp(b),
            (KeyValue::I32(a), KeyValue::I32(b)) => a.cmp(b),
            (KeyValue::I64(a), KeyValue::I64(b)) => a.cmp(b),
            (KeyValue::U8(a), KeyValue::U8(b)) => a.cmp(b),
            (KeyValue::U16(a), KeyValue::U16(b)) => a.cmp(b),
            (KeyValue::U32(a), KeyValue::U32(b)) => a.cmp(b),
            (KeyValue::U64(a), KeyValue::U64(b)) => a.cmp(b),
            (KeyValue::F32(a), KeyValue::F32(b)) => canonical_f32(*a).total_cmp(&canonical_f32(*b)),
            (KeyValue::F64(a), KeyValue::F64(b)) => canonical_f64(*a).total_cmp(&canonical_f64(*b)),
            (KeyValue::Bytes(a), KeyValue::Bytes(b)) => a.cmp(b),
            (KeyValue::Str(a), KeyValue::Str(b)) => a.as_bytes().cmp(b.as_bytes()),
            _ => self.key_type().cmp(&other.key_type()),
        }
    }
}

impl PartialOrd for KeyValue<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for KeyValue<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for KeyValue<'_> {}

impl Ord for OwnedKeyValue {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_value().cmp(&other.as_value())
    }
}

impl PartialOrd for OwnedKeyValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for OwnedKeyValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for OwnedKeyValue {}

/// `v` with `-0.0` as `0.0` and every NaN as the canonical NaN.
pub fn canonical_f32(v: f32) -> f32 {
    if v.is_nan() {
        f32::from_bits(CANONICAL_NAN_F32_BITS)
    } else if v.to_bits() == F32_SIGN {
        0.0
    } else {
        v
    }
}

/// `v` with `-0.0` as `0.0` and every NaN as the canonical NaN.
pub fn canonical_f64(v: f64) -> f64 {
    if v.is_nan() {
        f64::from_bits(CANONICAL_NAN_F64_BITS)
    } else if v.to_bits() == F64_SIGN {
        0.0
    } else {
        v
    }
}

/// Appends a bool: `00` or `01`.
pub fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// Appends an `i8` with the sign bit flipped.
pub fn put_i8(out: &mut Vec<u8>, v: i8) {
    out.push((v as u8) ^ 0x80);
}

/// Appends an `i16` big-endian with the sign bit flipped.
pub fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&((v as u16) ^ 0x8000).to_be_bytes());
}

/// Appends an `i32` big-endian with the sign bit flipped.
pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&((v as u32) ^ 0x8000_0000).to_be_bytes());
}

/// Appends an `i64` big-endian with the sign bit flipped.
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&((v as u64) ^ 0x8000_0000_0000_0000).to_be_bytes());
}

/// Appends a `u8`.
pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

/// Appends a `u16` big-endian.
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a `u32` big-endian.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a `u64` big-endian.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends an `f32` canonicalised, negative: all bits flipped, else sign flipped.
pub fn put_f32(out: &mut Vec<u8>, v: f32) {
    let bits = canonical_f32(v).to_bits();
    let key = if bits & F32_SIGN == 0 { bits ^ F32_SIGN } else { !bits };
    out.extend_from_slice(&key.to_be_bytes());
}

/// Appends an `f64` canonicalised, negative: all bits flipped, else sign flipped.
pub fn put_f64(out: &mut Vec<u8>, v: f64) {
    let bits = canonical_f64(v).to_bits();
    let key = if bits & F64_SIGN == 0 { bits ^ F64_SIGN } else { !bits };
    out.extend_from_slice(&key.to_be_bytes());
}

/// Appends bytes with `00` escaped as `00 FF`, then the terminator `00 01`.
pub fn put_bytes(out: &mut Vec<u8>, v: &[u8]) {
    out.reserve(v.len() + 2);
    for (i, run) in v.split(|&b| b == 0).enumerate() {
        if i > 0 {
            out.extend_from_slice(&[ESCAPE, ESCAPED_ZERO]);
        }
        out.extend_from_slice(run);
    }
    out.extend_from_slice(&[ESCAPE, TERMINATOR]);
}

/// Appends a string's UTF-8 bytes exactly as [`put_bytes`] does.
pub fn put_str(out: &mut Vec<u8>, v: &str) {
    put_bytes(out, v.as_bytes());
}

/// Appends one part.
pub fn put_value(out: &mut Vec<u8>, v: &KeyValue<'_>) {
    match *v {
        KeyValue::Bool(v) => put_bool(out, v),
        KeyValue::I8(v) => put_i8(out, v),
        KeyValue::I16(v) => put_i16(out, v),
        KeyValue::I32(v) => put_i32(out, v),
        KeyValue::I64(v) => put_i64(out, v),
        KeyValue::U8(v) => put_u8(out, v),
        KeyValue::U16(v) => put_u16(out, v),
        KeyValue::U32(v) => put_u32(out, v),
        KeyValue::U64(v) => put_u64(out, v),
        KeyValue::F32(v) => put_f32(out, v),
        KeyValue::F64(v) => put_f64(out, v),
        KeyValue::Bytes(v) => put_bytes(out, v),
        KeyValue::Str(v) => put_str(out, v),
    }
}

/// Appends one nullable part: `00` for null, else `01` and the value.
pub fn put_nullable(out: &mut Vec<u8>, v: Option<&KeyValue<'_>>) {
    match v {
        None => out.push(NULL_MARKER),
        Some(v) => {
            out.push(PRESENT_MARKER);
            put_value(out, v);
        }
    }
}

/// Appends the encoding of a tuple of non-null parts.
pub fn encode_into(parts: &[KeyValue<'_>], out: &mut Vec<u8>) {
    for part in parts {
        put_value(out, part);
    }
}

/// Encodes a tuple of non-null parts.
pub fn encode(parts: &[KeyValue<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(parts, &mut out);
    out
}

#[cfg(any(test, feature = "inspect"))]
/// Appends the encoding of a tuple whose every part carries a null marker.
pub fn encode_nullable_into(parts: &[Option<KeyValue<'_>>], out: &mut Vec<u8>) {
    for part in parts {
        put_nullable(out, part.as_ref());
    }
}

#[cfg(any(test, feature = "inspect"))]
/// Encodes a tuple whose every part carries a null marker; nulls sort first.
pub fn encode_nullable(parts: &[Option<KeyValue<'_>>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_nullable_into(parts, &mut out);
    out
}

/// Decodes a tuple of non-null parts of the given types; every byte must be
/// used.
pub fn decode(bytes: &[u8], types: &[KeyType]) -> Result<Vec<OwnedKeyValue>> {
    let mut reader = KeyReader::new(bytes);
    let parts = types.iter().map(|&ty| reader.read(ty)).collect::<Result<Vec<_>>>()?;
    reader.finish()?;
    Ok(parts)
}

#[cfg(any(test, feature = "inspect"))]
/// Decodes a tuple written by [`encode_nullable`]; every byte must be used.
pub fn decode_nullable(bytes: &[u8], types: &[KeyType]) -> Result<Vec<Option<OwnedKeyValue>>> {
    let mut reader = KeyReader::new(bytes);
    let parts = types.iter().map(|&ty| reader.read_nullable(ty)).collect::<Result<Vec<_>>>()?;
    reader.finish()?;
    Ok(parts)
}

/// Reads parts one at a time, for keys that mix nullable and non-null parts
/// (an index key `enc_nullable(index cols) | enc(pk)`) or are read partially.
///
/// Invariant: `pos <= buf.len()`.
pub struct KeyReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> KeyReader<'a> {
    /// A reader at the start of an encoded key.
    pub fn new(buf: &'a [u8]) -> Self {
        KeyReader { buf, pos: 0 }
    }

    /// The bytes not yet read.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// True when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// Succeeds only if every byte was read.
    pub fn finish(self) -> Result<()> {
        if self.is_empty() {
            Ok(())
        } else {
            let n = self.buf.len() - self.pos;
            Err(corrupt(self.pos, format!("{n} trailing bytes after the last key part")))
        }
    }

    /// Reads one nullable part: a marker, then the value if present.
    pub fn read_nullable(&mut self, ty: KeyType) -> Result<Option<OwnedKeyValue>> {
        match self.buf.get(self.pos) {
            Some(&NULL_MARKER) => {
                self.pos += 1;
                Ok(None)
            }
            Some(&PRESENT_MARKER) => {
                self.pos += 1;
                self.read(ty).map(Some)
            }
            Some(b) => Err(corrupt(self.pos, format!("bad null marker {b:02x} before {ty:?} part"))),
            None => Err(corrupt(self.pos, format!("key ends before nullable {ty:?} part"))),
        }
    }

    /// Moves past one nullable part (a marker, then the value if present)
    /// without decoding it: nothing is allocated, and a fixed-width value's
    /// bytes are not checked (a key a writer made is only being measured).
    pub fn skip_nullable(&mut self, ty: KeyType) -> Result<()> {
        match self.buf.get(self.pos) {
            Some(&NULL_MARKER) => {
                self.pos += 1;
                Ok(())
            }
            Some(&PRESENT_MARKER) => {
                self.pos += 1;
                self.skip(ty)
            }
            Some(b) => Err(corrupt(self.pos, format!("bad null marker {b:02x} before {ty:?} part"))),
            None => Err(corrupt(self.pos, format!("key ends before nullable {ty:?} part"))),
        }
    }

    /// Moves past one non-null part of type `ty` without decoding it (see
    /// [`KeyReader::skip_nullable`]).
    pub fn skip(&mut self, ty: KeyType) -> Result<()> {
        if let Some(w) = ty.fixed_width() {
            if self.buf.len() - self.pos < w {
                let left = self.buf.len() - self.pos;
                return Err(corrupt(self.pos, format!("{ty:?} part needs {w} bytes, {left} left")));
            }
            self.pos += w;
            return Ok(());
        }
        loop {
            let Some(zero) = self.rest().iter().position(|&b| b == ESCAPE) else {
                return Err(corrupt(self.buf.len(), "bytes key part has no terminator 00 01"));
            };
            let marker_at = self.pos + zero + 1;
            match self.buf.get(marker_at) {
                Some(&ESCAPED_ZERO) => self.pos = marker_at + 1,
                Some(&TERMINATOR) => {
                    self.pos = marker_at + 1;
                    return Ok(());
                }
                Some(b) => return Err(corrupt(marker_at, format!("bad escape 00 {b:02x}"))),
                None => return Err(corrupt(marker_at, "key ends inside an escape")),
            }
        }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reads one non-null part of type `ty`.
    pub fn read(&mut self, ty: KeyType) -> Result<OwnedKeyValue> {
        let at = self.pos;
        Ok(match ty {
            KeyType::Bool => match self.fixed::<1>(ty)? {
                [0] => OwnedKeyValue::Bool(false),
                [1] => OwnedKeyValue::Bool(true),
                [b] => return Err(corrupt(at, format!("bad bool byte {b:02x}"))),
            },
            KeyType::I8 => OwnedKeyValue::I8((self.fixed::<1>(ty)?[0] ^ 0x80) as i8),
            KeyType::I16 => OwnedKeyValue::I16((u16::from_be_bytes(self.fixed(ty)?) ^ 0x8000) as i16),
            KeyType::I32 => OwnedKeyValue::I32((u32::from_be_bytes(self.fixed(ty)?) ^ 0x8000_0000) as i32),
            KeyType::I64 => {
                OwnedKeyValue::I64((u64::from_be_bytes(self.fixed(ty)?) ^ 0x8000_0000_0000_0000) as i64)
            }
            KeyType::U8 => OwnedKeyValue::U8(self.fixed::<1>(ty)?[0]),
            KeyType::U16 => OwnedKeyValue::U16(u16::from_be_bytes(self.fixed(ty)?)),
            KeyType::U32 => OwnedKeyValue::U32(u32::from_be_bytes(self.fixed(ty)?)),
            KeyType::U64 => OwnedKeyValue::U64(u64::from_be_bytes(self.fixed(ty)?)),
            KeyType::F32 => OwnedKeyValue::F32(self.read_f32()?),
            KeyType::F64 => OwnedKeyValue::F64(self.read_f64()?),
            KeyType::Bytes => OwnedKeyValue::Bytes(self.read_escaped()?),
            KeyType::Str => match String::from_utf8(self.read_escaped()?) {
                Ok(s) => OwnedKeyValue::Str(s),
                Err(_) => return Err(corrupt(at, "string key part is not UTF-8")),
            },
        })
    }

    /// Reads exactly `N` bytes of a fixed-width part.
    fn fixed<const N: usize>(&mut self, ty: KeyType) -> Result<[u8; N]> {
        if let Some(chunk) = self.rest().first_chunk::<N>() {
            self.pos += N;
            Ok(*chunk)
        } else {
            let left = self.buf.len() - self.pos;
            Err(corrupt(self.pos, format!("{ty:?} part needs {N} bytes, {left} left")))
        }
    }

    /// Reads an `f32`, rejecting `-0.0` and non-canonical NaNs, which the
    /// encoder never writes.
    fn read_f32(&mut self) -> Result<f32> {
        let at = self.pos;
        let key = u32::from_be_bytes(self.fixed(KeyType::F32)?);
        let bits = if key & F32_SIGN == 0 { !key } else { key ^ F32_SIGN };
        let v = f32::from_bits(bits);
        if canonical_f32(v).to_bits() != bits {
            return Err(corrupt(at, format!("non-canonical f32 key bits {bits:08x}")));
        }
        Ok(v)
    }

    /// Reads an `f64`, rejecting `-0.0` and non-canonical NaNs, which the
    /// encoder never writes.
    fn read_f64(&mut self) -> Result<f64> {
        let at = self.pos;
        let key = u64::from_be_bytes(self.fixed(KeyType::F64)?);
        let bits = if key & F64_SIGN == 0 { !key } else { key ^ F64_SIGN };
        let v = f64::from_bits(bits);
        if canonical_f64(v).to_bits() != bits {
            return Err(corrupt(at, format!("non-canonical f64 key bits {bits:016x}")));
        }
        Ok(v)
    }

    /// Reads an escaped byte string up to and including its terminator.
    fn read_escaped(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let rest = self.rest();
            let Some(zero) = rest.iter().position(|&b| b == ESCAPE) else {
                return Err(corrupt(self.buf.len(), "bytes key part has no terminator 00 01"));
            };
            out.extend_from_slice(&rest[..zero]);
            let marker_at = self.pos + zero + 1;
            match self.buf.get(marker_at) {
                Some(&ESCAPED_ZERO) => out.push(0),
                Some(&TERMINATOR) => {
                    self.pos = marker_at + 1;
                    return Ok(out);
                }
                Some(b) => return Err(corrupt(marker_at, format!("bad escape 00 {b:02x}"))),
                None => return Err(corrupt(marker_at, "key ends inside an escape")),
            }
            self.pos = marker_at + 1;
        }
    }
}

/// A corruption error at `offset` within the key; keys are not files, so the
/// path is empty and the caller adds context.
fn corrupt(offset: usize, what: impl Into<String>) -> Error {
    Error::corruption("", offset as u64, what)
}

/// The smallest byte string greater than every string starting with `prefix`,
/// the exclusive upper bound of a prefix scan. `None` when no such bound
/// exists: `prefix` is empty or all `FF`, so the scan runs to the end.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    // Trailing FF bytes cannot be incremented; drop them and bump the last
    // byte before them.
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut out = prefix[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

#[cfg(test)]
mod tests;
