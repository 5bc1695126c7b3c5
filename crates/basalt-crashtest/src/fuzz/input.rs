//! How the `ops` target reads its input: a byte cursor that reads zeros
//! past the end, a table schema decoded from it, and column values drawn
//! from it that are rich in the cases that break engines (NaN of both
//! signs, signed zeros, infinities, extreme integers, empty and NUL-bearing
//! strings and bytes).
//!
//! A value takes one byte, more when it is raw:
//!
//! ```text
//! 0x00..=0xDF  the type's palette entry (byte % palette length)
//! 0xE0..=0xEF  null in a nullable column, else a palette entry
//! 0xF0..=0xF7  raw: the type's width in little-endian bytes follows
//!              (strings and bytes: a length byte, mod 16, then the bytes)
//! 0xF8..=0xFF  in a key part only: a value of the key type of another
//!              column (`0xF8 + k`, k picks the type); elsewhere raw
//! ```

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use basalt::OwnedKeyValue;
use basalt::inspect::KeyType;

use super::cells::{Cell, key_value};

/// Most columns of a generated table.
pub const COLUMNS_MAX: usize = 12;
/// Most key columns of a generated table.
pub const KEY_COLUMNS_MAX: usize = 4;
/// Longest raw string or byte value: keys and rows stay small, so one
/// input runs in milliseconds.
const RAW_BYTES_MAX: usize = 15;

const NULL_FIRST: u8 = 0xE0;
const RAW_FIRST: u8 = 0xF0;
const OTHER_TYPE_FIRST: u8 = 0xF8;

/// The rest of an input; reads past its end give zeros.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// True when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte, or 0.
    pub fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.data.split_first() else { return 0 };
        self.data = rest;
        b
    }

    /// The next `N` bytes, zero padded.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.byte();
        }
        out
    }

    /// A length-prefixed run of at most `RAW_BYTES_MAX` bytes.
    fn raw_bytes(&mut self) -> Vec<u8> {
        let n = usize::from(self.byte()) % (RAW_BYTES_MAX + 1);
        (0..n).map(|_| self.byte()).collect()
    }
}

/// Column types by their byte (`byte % COLUMN_TYPES`): every type
/// `create_table` accepts, with the time zones it treats specially (an
/// empty one reads back as none) and decimals of odd shapes.
pub const COLUMN_TYPES: usize = 27;

/// The column type numbered `i` (mod [`COLUMN_TYPES`]).
pub fn column_type(i: usize) -> DataType {
    match i % COLUMN_TYPES {
        0 => DataType::Boolean,
        1 => DataType::Int8,
        2 => DataType::Int16,
        3 => DataType::Int32,
        4 => DataType::Int64,
        5 => DataType::UInt8,
        6 => DataType::UInt16,
        7 => DataType::UInt32,
        8 => DataType::UInt64,
        9 | 25 => DataType::Float32,
        10 | 26 => DataType::Float64,
        11 => DataType::Date32,
        12 => DataType::Date64,
        13 => DataType::Timestamp(TimeUnit::Second, None),
        14 => DataType::Timestamp(TimeUnit::Millisecond, None),
        15 => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        16 => DataType::Timestamp(TimeUnit::Nanosecond, Some("".into())),
        17 => DataType::Decimal128(38, 0),
        18 => DataType::Decimal128(10, 2),
        19 => DataType::Decimal128(4, -2),
        20 => DataType::Utf8,
        21 => DataType::LargeUtf8,
        22 => DataType::Binary,
        23 => DataType::LargeBinary,
        _ => DataType::Decimal128(1, 1),
    }
}

/// A generated table: its schema (as given to `create_table`) and its key.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// Columns `c0`, `c1`, …, as the table stores them: key columns are
    /// never nullable.
    pub schema: SchemaRef,
    /// The schema given to `create_table`: key columns as generated,
    /// nullable or not (the table stores them non-nullable either way).
    pub given: SchemaRef,
    /// Schema indices of the key columns, in key order.
    pub key: Vec<usize>,
    /// The given schema before Decimal128 key columns were made Int64, when
    /// there was one: `create_table` must refuse it.
    pub invalid: Option<SchemaRef>,
}

/// Decodes a table: a byte for the column count (1 to 12), a byte for the
/// key column count (1 to 4), a byte per column (type, bit 7 nullable;
/// a one-column table with bit 6 set is a raw `Utf8`/`Binary` key), then a
/// byte per key column picking its position among the unused ones.
pub fn table_spec(inp: &mut Input<'_>) -> TableSpec {
    let n = 1 + usize::from(inp.byte()) % COLUMNS_MAX;
    let keys = (1 + usize::from(inp.byte()) % KEY_COLUMNS_MAX).min(n);
    let mut fields: Vec<Field> = (0..n)
        .map(|i| {
            let b = inp.byte();
            let ty = if n == 1 && b & 0x40 != 0 {
                if b & 1 == 0 { DataType::Utf8 } else { DataType::Binary }
            } else {
                column_type(usize::from(b & 0x7f))
            };
            Field::new(format!("c{i}"), ty, b & 0x80 != 0)
        })
        .collect();
    let mut key = Vec::with_capacity(keys);
    for _ in 0..keys {
        let mut p = usize::from(inp.byte()) % n;
        while key.contains(&p) {
            p = (p + 1) % n;
        }
        key.push(p);
    }
    let invalid = key.iter().any(|&i| matches!(fields[i].data_type(), DataType::Decimal128(_, _)));
    let invalid = invalid.then(|| Arc::new(Schema::new(fields.clone())));
    for &i in &key {
        if let DataType::Decimal128(_, _) = fields[i].data_type() {
            fields[i] = Field::new(fields[i].name(), DataType::Int64, fields[i].is_nullable());
        }
    }
    let given = Arc::new(Schema::new(fields.clone()));
    for &i in &key {
        fields[i] = fields[i].clone().with_nullable(false);
    }
    TableSpec { schema: Arc::new(Schema::new(fields)), given, key, invalid }
}

/// A value of type `ty`, its first byte already read.
pub fn cell_from(first: u8, inp: &mut Input<'_>, ty: &DataType, nullable: bool) -> Cell {
    if first >= RAW_FIRST {
        raw_cell(inp, ty)
    } else if nullable && first >= NULL_FIRST {
        Cell::Null
    } else {
        palette_cell(ty, first)
    }
}

/// A value of type `ty`.
pub fn cell(inp: &mut Input<'_>, ty: &DataType, nullable: bool) -> Cell {
    let first = inp.byte();
    cell_from(first, inp, ty, nullable)
}

/// A key part for a column of type `ty`: mostly a value of that type, but
/// a first byte of `0xF8..` gives a value of another key type, which every
/// read must refuse unless it happens to fit.
pub fn key_part(inp: &mut Input<'_>, ty: &DataType) -> OwnedKeyValue {
    let first = inp.byte();
    if first < OTHER_TYPE_FIRST {
        return key_value(ty, &cell_from(first, inp, ty, false));
    }
    match (first - OTHER_TYPE_FIRST) % 8 + inp.byte() % 2 * 8 {
        0 => OwnedKeyValue::Bool(true),
        1 => OwnedKeyValue::I8(-1),
        2 => OwnedKeyValue::I16(1),
        3 => OwnedKeyValue::I32(0),
        4 => OwnedKeyValue::I64(0),
        5 => OwnedKeyValue::U8(0),
        6 => OwnedKeyValue::U16(7),
        7 => OwnedKeyValue::U32(0),
        8 => OwnedKeyValue::U64(u64::MAX),
        9 => OwnedKeyValue::F32(-0.0),
        10 => OwnedKeyValue::F64(f64::NAN),
        11 => OwnedKeyValue::Bytes(Vec::new()),
        _ => OwnedKeyValue::Str("a".into()),
    }
}

/// The key type a column's values take in keys.
pub fn key_type_of(ty: &DataType) -> Option<KeyType> {
    Some(match ty {
        DataType::Boolean => KeyType::Bool,
        DataType::Int8 => KeyType::I8,
        DataType::Int16 => KeyType::I16,
        DataType::Int32 | DataType::Date32 => KeyType::I32,
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _) => KeyType::I64,
        DataType::UInt8 => KeyType::U8,
        DataType::UInt16 => KeyType::U16,
        DataType::UInt32 => KeyType::U32,
        DataType::UInt64 => KeyType::U64,
        DataType::Float32 => KeyType::F32,
        DataType::Float64 => KeyType::F64,
        DataType::Utf8 | DataType::LargeUtf8 => KeyType::Str,
        DataType::Binary | DataType::LargeBinary => KeyType::Bytes,
        _ => return None,
    })
}

/// Integer range of an integer-like type: (min, max, width in bytes).
fn int_range(ty: &DataType) -> Option<(i128, i128, usize)> {
    Some(match ty {
        DataType::Int8 => (i128::from(i8::MIN), i128::from(i8::MAX), 1),
        DataType::Int16 => (i128::from(i16::MIN), i128::from(i16::MAX), 2),
        DataType::Int32 | DataType::Date32 => (i128::from(i32::MIN), i128::from(i32::MAX), 4),
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _) => {
            (i128::from(i64::MIN), i128::from(i64::MAX), 8)
        }
        DataType::UInt8 => (0, i128::from(u8::MAX), 1),
        DataType::UInt16 => (0, i128::from(u16::MAX), 2),
        DataType::UInt32 => (0, i128::from(u32::MAX), 4),
        DataType::UInt64 => (0, i128::from(u64::MAX), 8),
        DataType::Decimal128(p, _) => {
            let max = 10i128.pow(u32::from(*p)) - 1;
            (-max, max, 16)
        }
        _ => return None,
    })
}

/// `v` brought into `min..=max` (wrapping), so every palette entry and raw
/// value is valid for the type.
fn wrap(v: i128, min: i128, max: i128) -> i128 {
    if (min..=max).contains(&v) {
        v
    } else if min == -max {
        // A decimal: its range may span more than `i128::MAX`.
        v % (max + 1)
    } else {
        min + (v - min).rem_euclid(max - min + 1)
    }
}

const F64_PALETTE: [u64; 16] = [
    0x0000_0000_0000_0000, // 0.0
    0x8000_0000_0000_0000, // -0.0
    0x3ff0_0000_0000_0000, // 1.0
    0xbff0_0000_0000_0000, // -1.0
    0x7ff0_0000_0000_0000, // inf
    0xfff0_0000_0000_0000, // -inf
    0x7ff8_0000_0000_0000, // NaN
    0xfff8_0000_0000_0000, // -NaN, what x86 computes for 0.0 / 0.0
    0x7ff0_0000_0000_0001, // signalling NaN
    0xfff8_0000_0000_0001, // -NaN with a payload
    0x7fef_ffff_ffff_ffff, // MAX
    0xffef_ffff_ffff_ffff, // MIN
    0x0000_0000_0000_0001, // smallest subnormal
    0x3fe0_0000_0000_0000, // 0.5
    0xc004_0000_0000_0000, // -2.5
    0x4045_0000_0000_0000, // 42.0
];

const F32_PALETTE: [u32; 16] = [
    0x0000_0000,
    0x8000_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0xffc0_0000,
    0x7f80_0001,
    0xffc0_0001,
    0x7f7f_ffff,
    0xff7f_ffff,
    0x0000_0001,
    0x3f00_0000,
    0xc020_0000,
    0x4228_0000,
];

const STR_PALETTE: [&str; 16] = [
    "",
    "\0",
    "a",
    "a\0",
    "a\0b",
    "ab",
    "b",
    "\0\0",
    "é",
    "\u{10FFFF}",
    "zz",
    "\u{7f}",
    "A",
    "aa",
    "\0a",
    "ÿ",
];

const BIN_PALETTE: [&[u8]; 16] = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\xff",
    b"\x00\xff",
    b"\xff\x00",
    b"\x01",
    b"\xff\xff",
    b"a",
    b"ab",
    b"\x00\x01",
    b"\xfe",
    b"b",
    b"\x00\x00\x00",
    b"\x80",
    b"\xff\xfe",
];

fn palette_cell(ty: &DataType, b: u8) -> Cell {
    let i = usize::from(b) % 16;
    match ty {
        DataType::Boolean => Cell::Bool(b & 1 == 1),
        DataType::Float32 => Cell::F32(F32_PALETTE[i]),
        DataType::Float64 => Cell::F64(F64_PALETTE[i]),
        DataType::Utf8 | DataType::LargeUtf8 => Cell::Str(STR_PALETTE[i].to_owned()),
        DataType::Binary | DataType::LargeBinary => Cell::Bin(BIN_PALETTE[i].to_vec()),
        _ => {
            let (min, max, _) = int_range(ty).expect("an integer-like column type");
            let v = match i {
                0 => 0,
                1 => 1,
                2 => -1,
                3 => 2,
                4 => -2,
                5 => 7,
                6 => 42,
                7 => -42,
                8 => min,
                9 => max,
                10 => min + 1,
                11 => max - 1,
                12 => max / 2,
                13 => max / 2 + 1,
                14 => 1000,
                _ => -100,
            };
            Cell::Int(wrap(v, min, max))
        }
    }
}

fn raw_cell(inp: &mut Input<'_>, ty: &DataType) -> Cell {
    match ty {
        DataType::Boolean => Cell::Bool(inp.byte() & 1 == 1),
        DataType::Float32 => Cell::F32(u32::from_le_bytes(inp.array())),
        DataType::Float64 => Cell::F64(u64::from_le_bytes(inp.array())),
        DataType::Utf8 | DataType::LargeUtf8 => Cell::Str(String::from_utf8_lossy(&inp.raw_bytes()).into()),
        DataType::Binary | DataType::LargeBinary => Cell::Bin(inp.raw_bytes()),
        _ => {
            let (min, max, width) = int_range(ty).expect("an integer-like column type");
            let mut bytes = [0u8; 16];
            for b in &mut bytes[..width] {
                *b = inp.byte();
            }
            // Sign-extend signed types from their width.
            let bits = 8 * width as u32;
            let v = i128::from_le_bytes(bytes);
            let v = if min < 0 && bits < 128 { (v << (128 - bits)) >> (128 - bits) } else { v };
            Cell::Int(wrap(v, min, max))
        }
    }
}
