//! Random table schemas and values for the table model tests: every Arrow
//! type a table accepts, keys of one to four columns in any schema position,
//! key-only tables, nullable value columns and wide tables; values rich in
//! the cases that break engines (NaN of both signs, signed zeros, extreme
//! integers, empty and NUL-bearing strings and bytes).
//!
//! A value is a [`Cell`]: floats are kept as bits, so a NaN's sign and
//! payload and the sign of a zero survive every comparison.

use std::fmt;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BinaryArray, BooleanArray, LargeBinaryArray, LargeStringArray,
    PrimitiveArray, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use basalt::KeyValue;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// The negative quiet NaN: what x86 computes for `0.0 / 0.0`.
pub const NEG_NAN_F64_BITS: u64 = 0xfff8_0000_0000_0000;
/// The negative quiet NaN of `f32`.
pub const NEG_NAN_F32_BITS: u32 = 0xffc0_0000;

/// Largest number of rows a generated table's key space holds, so that
/// writes overwrite and deletes hit.
const KEY_SPACE_ROWS_MAX: f64 = 200.0;

/// One value of a table cell. Dates and timestamps are their integers,
/// Decimal128 its `i128`, the Large forms their small siblings.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cell {
    Null,
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    /// An `f32` by its bits.
    F32(u32),
    /// An `f64` by its bits.
    F64(u64),
    I128(i128),
    Str(String),
    Bin(Vec<u8>),
}

impl fmt::Debug for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Null => write!(f, "null"),
            Cell::Bool(v) => write!(f, "{v}"),
            Cell::I8(v) => write!(f, "{v}i8"),
            Cell::I16(v) => write!(f, "{v}i16"),
            Cell::I32(v) => write!(f, "{v}i32"),
            Cell::I64(v) => write!(f, "{v}i64"),
            Cell::U8(v) => write!(f, "{v}u8"),
            Cell::U16(v) => write!(f, "{v}u16"),
            Cell::U32(v) => write!(f, "{v}u32"),
            Cell::U64(v) => write!(f, "{v}u64"),
            Cell::F32(b) => write!(f, "{:?}f32({b:#010x})", f32::from_bits(*b)),
            Cell::F64(b) => write!(f, "{:?}f64({b:#018x})", f64::from_bits(*b)),
            Cell::I128(v) => write!(f, "{v}i128"),
            Cell::Str(s) => write!(f, "{s:?}"),
            Cell::Bin(b) => write!(f, "b{b:02x?}"),
        }
    }
}

impl Cell {
    /// The key value of a key cell (keys hold no null and no decimal).
    pub fn key_value(&self) -> KeyValue<'_> {
        match self {
            Cell::Bool(v) => KeyValue::Bool(*v),
            Cell::I8(v) => KeyValue::I8(*v),
            Cell::I16(v) => KeyValue::I16(*v),
            Cell::I32(v) => KeyValue::I32(*v),
            Cell::I64(v) => KeyValue::I64(*v),
            Cell::U8(v) => KeyValue::U8(*v),
            Cell::U16(v) => KeyValue::U16(*v),
            Cell::U32(v) => KeyValue::U32(*v),
            Cell::U64(v) => KeyValue::U64(*v),
            Cell::F32(b) => KeyValue::F32(f32::from_bits(*b)),
            Cell::F64(b) => KeyValue::F64(f64::from_bits(*b)),
            Cell::Str(s) => KeyValue::Str(s),
            Cell::Bin(b) => KeyValue::Bytes(b),
            Cell::Null | Cell::I128(_) => panic!("{self:?} cannot be a key value"),
        }
    }

    /// Bytes of a string or binary cell (0 for the others).
    pub fn var_len(&self) -> usize {
        match self {
            Cell::Str(s) => s.len(),
            Cell::Bin(b) => b.len(),
            _ => 0,
        }
    }
}

/// Whether a key value's variant is the one the table API documents for a
/// key column of `data_type` (`Table::get` and range bounds).
pub fn key_value_fits(v: &KeyValue<'_>, data_type: &DataType) -> bool {
    use DataType as D;
    matches!(
        (v, data_type),
        (KeyValue::Bool(_), D::Boolean)
            | (KeyValue::I8(_), D::Int8)
            | (KeyValue::I16(_), D::Int16)
            | (KeyValue::I32(_), D::Int32 | D::Date32)
            | (KeyValue::I64(_), D::Int64 | D::Date64 | D::Timestamp(_, _))
            | (KeyValue::U8(_), D::UInt8)
            | (KeyValue::U16(_), D::UInt16)
            | (KeyValue::U32(_), D::UInt32)
            | (KeyValue::U64(_), D::UInt64)
            | (KeyValue::F32(_), D::Float32)
            | (KeyValue::F64(_), D::Float64)
            | (KeyValue::Str(_), D::Utf8 | D::LargeUtf8)
            | (KeyValue::Bytes(_), D::Binary | D::LargeBinary)
    )
}

/// One key value of every variant that does not fit `data_type`.
pub fn wrong_key_values(data_type: &DataType) -> Vec<KeyValue<'static>> {
    let all = [
        KeyValue::Bool(true),
        KeyValue::I8(1),
        KeyValue::I16(1),
        KeyValue::I32(1),
        KeyValue::I64(1),
        KeyValue::U8(1),
        KeyValue::U16(1),
        KeyValue::U32(1),
        KeyValue::U64(1),
        KeyValue::F32(1.0),
        KeyValue::F64(1.0),
        KeyValue::Bytes(b"a"),
        KeyValue::Str("a"),
    ];
    all.into_iter().filter(|v| !key_value_fits(v, data_type)).collect()
}

/// Every type a table column may have, one instance of each parametrised
/// family with random parameters.
pub fn random_type(rng: &mut StdRng, key: bool) -> DataType {
    let tz = |rng: &mut StdRng| -> Option<Arc<str>> {
        [None, Some(Arc::from("+02:00")), Some(Arc::from("UTC"))][rng.random_range(0..3)].clone()
    };
    // Floats twice: their order is where key codec, zone maps and Arrow differ.
    let choices = if key { 21 } else { 22 };
    match rng.random_range(0..choices) {
        0 => DataType::Boolean,
        1 => DataType::Int8,
        2 => DataType::Int16,
        3 => DataType::Int32,
        4 => DataType::Int64,
        5 => DataType::UInt8,
        6 => DataType::UInt16,
        7 => DataType::UInt32,
        8 => DataType::UInt64,
        9 | 10 => DataType::Float32,
        11 | 12 => DataType::Float64,
        13 => DataType::Utf8,
        14 => DataType::LargeUtf8,
        15 => DataType::Binary,
        16 => DataType::LargeBinary,
        17 => DataType::Date32,
        18 => DataType::Date64,
        19 | 20 => {
            let unit = [TimeUnit::Second, TimeUnit::Millisecond, TimeUnit::Microsecond, TimeUnit::Nanosecond]
                [rng.random_range(0..4)];
            DataType::Timestamp(unit, tz(rng))
        }
        _ => {
            let precision = rng.random_range(1..=38u8);
            DataType::Decimal128(precision, rng.random_range(-3..=precision.min(10) as i8))
        }
    }
}

/// A table to generate: its schema, its primary key (schema indices, in key
/// order) and, per key column, the small pool its key values come from.
#[derive(Debug, Clone)]
pub struct TableSpec {
    pub schema: SchemaRef,
    pub key: Vec<usize>,
    pub pools: Vec<Vec<Cell>>,
}

/// The shape of the tables to draw.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Columns, inclusive range.
    pub columns: (usize, usize),
    /// Force every column into the key.
    pub key_only: bool,
}

impl TableSpec {
    /// A random table: 1 to 4 key columns at random schema positions (a
    /// fifth of the one-column keys are `Utf8` or `Binary`, the engine's raw
    /// key path; some narrow tables are key-only), nullable value columns
    /// half the time, now and then column names beyond ASCII.
    pub fn random(rng: &mut StdRng, shape: Shape) -> TableSpec {
        let columns = rng.random_range(shape.columns.0..=shape.columns.1);
        let key_only = shape.key_only || (columns <= 4 && rng.random_bool(0.15));
        let keys = if key_only { columns } else { rng.random_range(1..=columns.min(4)) };
        let mut positions: Vec<usize> = (0..columns).collect();
        positions.shuffle(rng);
        let key: Vec<usize> = positions[..keys].to_vec();
        let raw = keys == 1 && rng.random_bool(0.2);
        let prefix = if rng.random_bool(0.1) { "列 é-" } else { "c" };
        let fields: Vec<Field> = (0..columns)
            .map(|i| {
                let is_key = key.contains(&i);
                let data_type = if is_key && raw {
                    if rng.random_bool(0.5) { DataType::Utf8 } else { DataType::Binary }
                } else {
                    random_type(rng, is_key)
                };
                Field::new(format!("{prefix}{i}"), data_type, !is_key && rng.random_bool(0.5))
            })
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let pool_size = KEY_SPACE_ROWS_MAX.powf(1.0 / keys as f64).ceil() as usize;
        let pools = key.iter().map(|&i| key_pool(rng, schema.field(i).data_type(), pool_size)).collect();
        TableSpec { schema, key, pools }
    }

    /// Names of the primary key columns, in key order.
    pub fn key_names(&self) -> Vec<String> {
        self.key.iter().map(|&i| self.schema.field(i).name().clone()).collect()
    }

    /// The schema of a batch of key columns, in key order.
    pub fn key_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(self.key.iter().map(|&i| self.schema.field(i).clone()).collect::<Vec<_>>()))
    }

    /// The key cells of a full row, in key order.
    pub fn key_of(&self, row: &[Cell]) -> Vec<Cell> {
        self.key.iter().map(|&i| row[i].clone()).collect()
    }

    /// A key: mostly from the pools, now and then a fresh value.
    pub fn random_key(&self, rng: &mut StdRng) -> Vec<Cell> {
        self.key
            .iter()
            .zip(&self.pools)
            .map(|(&i, pool)| {
                if rng.random_bool(0.05) {
                    random_value(rng, self.schema.field(i).data_type())
                } else {
                    pool[rng.random_range(0..pool.len())].clone()
                }
            })
            .collect()
    }

    /// A full row with a key from [`TableSpec::random_key`]; one string or
    /// bytes value in a hundred is kilobytes long.
    pub fn random_row(&self, rng: &mut StdRng) -> Vec<Cell> {
        let key = self.random_key(rng);
        let mut row: Vec<Cell> = self
            .schema
            .fields()
            .iter()
            .map(|f| {
                if f.is_nullable() && rng.random_bool(0.2) {
                    Cell::Null
                } else if rng.random_bool(0.01) {
                    long_value(f.data_type(), rng.random_range(1_000..20_000))
                        .unwrap_or_else(|| random_value(rng, f.data_type()))
                } else {
                    random_value(rng, f.data_type())
                }
            })
            .collect();
        for (&i, k) in self.key.iter().zip(key) {
            row[i] = k;
        }
        row
    }

    /// Position in the key of a column holding strings or bytes (so a key
    /// can be made as long as wanted).
    pub fn var_key_column(&self) -> Option<usize> {
        self.key.iter().position(|&i| {
            matches!(
                self.schema.field(i).data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
            )
        })
    }

    /// True when the key is one `Utf8` or `Binary` column, stored as its
    /// bytes (`docs/format.md`, "User key").
    pub fn raw_key(&self) -> bool {
        self.key.len() == 1
            && matches!(self.schema.field(self.key[0]).data_type(), DataType::Utf8 | DataType::Binary)
    }

    /// Bounds on the bytes of a row's stored form (`docs/format.md`, "Row
    /// bytes"): at least its strings and bytes (but for a raw key's, which
    /// is not stored), at most those plus 16 bytes per value (a length
    /// prefix, or a fixed-width value) and the null bitmap.
    pub fn row_bytes_bounds(&self, row: &[Cell]) -> (usize, usize) {
        let raw = self.raw_key().then(|| self.key[0]);
        let stored: Vec<&Cell> =
            row.iter().enumerate().filter(|(i, _)| Some(*i) != raw).map(|(_, c)| c).collect();
        let bytes: usize = stored.iter().map(|c| c.var_len()).sum();
        (bytes, bytes + stored.len() * 16 + stored.len().div_ceil(8))
    }

    /// Schema indices of the string or bytes columns outside the key.
    pub fn var_value_columns(&self) -> Vec<usize> {
        (0..self.schema.fields().len())
            .filter(|i| !self.key.contains(i) && long_value(self.schema.field(*i).data_type(), 0).is_some())
            .collect()
    }

    /// Bytes of the user key of `key` (key cells in key order): the raw
    /// bytes of a raw key, else the memcomparable encoding, whose widths
    /// `docs/key-encoding.md` lists (strings and bytes escape each `00` as
    /// two bytes and end with two).
    pub fn key_bytes(&self, key: &[Cell]) -> usize {
        if self.raw_key() {
            return key[0].var_len();
        }
        key.iter()
            .map(|c| match c {
                Cell::Bool(_) | Cell::I8(_) | Cell::U8(_) => 1,
                Cell::I16(_) | Cell::U16(_) => 2,
                Cell::I32(_) | Cell::U32(_) | Cell::F32(_) => 4,
                Cell::I64(_) | Cell::U64(_) | Cell::F64(_) => 8,
                Cell::Str(s) => escaped_len(s.as_bytes()),
                Cell::Bin(b) => escaped_len(b),
                Cell::Null | Cell::I128(_) => panic!("{c:?} is no key part"),
            })
            .sum()
    }

    /// `key` with its string or bytes part at `part` replaced so that the
    /// user key is exactly `bytes` long (`None` when the other parts alone
    /// are longer).
    pub fn key_of_len(&self, key: &[Cell], part: usize, bytes: usize) -> Option<Vec<Cell>> {
        let mut key = key.to_vec();
        key[part] = match key[part] {
            Cell::Str(_) => Cell::Str(String::new()),
            _ => Cell::Bin(Vec::new()),
        };
        let len = bytes.checked_sub(self.key_bytes(&key))?;
        key[part] = match key[part] {
            Cell::Str(_) => Cell::Str("k".repeat(len)),
            _ => Cell::Bin(vec![0xab; len]),
        };
        debug_assert_eq!(self.key_bytes(&key), bytes);
        Some(key)
    }
}

/// A string or bytes value of `len` bytes (`None` for other types).
pub fn long_value(data_type: &DataType, len: usize) -> Option<Cell> {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 => Some(Cell::Str("v".repeat(len))),
        DataType::Binary | DataType::LargeBinary => Some(Cell::Bin(vec![0xcd; len])),
        _ => None,
    }
}

/// Bytes of an escaped and terminated string or bytes key part.
#[expect(clippy::naive_bytecount, reason = "key parts are short; not worth a crate")]
fn escaped_len(b: &[u8]) -> usize {
    b.len() + b.iter().filter(|&&x| x == 0).count() + 2
}

/// A pool of about `size` key values of `data_type`; float pools hold both
/// zeros and NaNs of both signs half the time (each pair is one key).
fn key_pool(rng: &mut StdRng, data_type: &DataType, size: usize) -> Vec<Cell> {
    let mut pool: Vec<Cell> = match data_type {
        DataType::Boolean => vec![Cell::Bool(false), Cell::Bool(true)],
        _ => (0..size.max(2)).map(|_| random_value(rng, data_type)).collect(),
    };
    if rng.random_bool(0.5) {
        match data_type {
            DataType::Float64 => pool.extend([
                Cell::F64(0),
                Cell::F64(1 << 63),
                Cell::F64(f64::NAN.to_bits()),
                Cell::F64(NEG_NAN_F64_BITS),
            ]),
            DataType::Float32 => pool.extend([
                Cell::F32(0),
                Cell::F32(1 << 31),
                Cell::F32(f32::NAN.to_bits()),
                Cell::F32(NEG_NAN_F32_BITS),
            ]),
            _ => {}
        }
    }
    pool
}

fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())].clone()
}

/// Extremes a third of the time, small values (`$small`) half the time,
/// else any value.
macro_rules! int_value {
    ($rng:expr, $t:ty, $small:expr) => {
        match $rng.random_range(0..10) {
            0..3 => pick($rng, &[<$t>::MIN, <$t>::MAX, 0, 1, <$t>::MAX / 2, <$t>::default().wrapping_sub(1)]),
            3..8 => $rng.random_range($small) as $t,
            _ => $rng.random(),
        }
    };
}

/// A non-null random value of `data_type`.
pub fn random_value(rng: &mut StdRng, data_type: &DataType) -> Cell {
    match data_type {
        DataType::Boolean => Cell::Bool(rng.random()),
        DataType::Int8 => Cell::I8(int_value!(rng, i8, -20..20i32)),
        DataType::Int16 => Cell::I16(int_value!(rng, i16, -20..20i32)),
        DataType::Int32 | DataType::Date32 => Cell::I32(int_value!(rng, i32, -20..20i32)),
        DataType::Int64 | DataType::Date64 | DataType::Timestamp(_, _) => {
            Cell::I64(int_value!(rng, i64, -20..20i32))
        }
        DataType::UInt8 => Cell::U8(int_value!(rng, u8, 0..40u32)),
        DataType::UInt16 => Cell::U16(int_value!(rng, u16, 0..40u32)),
        DataType::UInt32 => Cell::U32(int_value!(rng, u32, 0..40u32)),
        DataType::UInt64 => Cell::U64(int_value!(rng, u64, 0..40u32)),
        DataType::Float32 => Cell::F32(random_f32(rng).to_bits()),
        DataType::Float64 => Cell::F64(random_f64(rng).to_bits()),
        DataType::Decimal128(precision, _) => {
            let max = 10i128.pow(u32::from(*precision)) - 1;
            Cell::I128(match rng.random_range(0..4) {
                0 => pick(rng, &[0, 1, -1, max, -max]),
                _ => rng.random_range(-max..=max),
            })
        }
        DataType::Utf8 | DataType::LargeUtf8 => Cell::Str(random_string(rng)),
        DataType::Binary | DataType::LargeBinary => Cell::Bin(random_bytes(rng)),
        other => panic!("no generator for {other}"),
    }
}

/// Special floats (signed NaNs and zeros, infinities, extremes, a
/// subnormal), small integers (so literals hit), or random bits.
pub fn random_f64(rng: &mut StdRng) -> f64 {
    let zero = std::hint::black_box(0.0f64);
    #[expect(clippy::eq_op, reason = "0.0 / 0.0 at run time: x86 gives a NaN with the sign bit set")]
    let runtime_nan = zero / zero;
    match rng.random_range(0..10) {
        0..4 => pick(
            rng,
            &[
                0.0,
                -0.0,
                f64::NAN,
                f64::from_bits(NEG_NAN_F64_BITS),
                runtime_nan,
                f64::from_bits(0x7ff0_0000_0000_0001),
                f64::from_bits(0xfff0_0000_dead_beef),
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::MIN,
                f64::MAX,
                f64::MIN_POSITIVE,
                -f64::MIN_POSITIVE,
                f64::from_bits(1),
                1.0,
                -1.0,
            ],
        ),
        4..8 => f64::from(rng.random_range(-30..30i32)) / 2.0,
        _ => f64::from_bits(rng.random()),
    }
}

/// As [`random_f64`], for `f32`.
pub fn random_f32(rng: &mut StdRng) -> f32 {
    let zero = std::hint::black_box(0.0f32);
    #[expect(clippy::eq_op, reason = "0.0 / 0.0 at run time: x86 gives a NaN with the sign bit set")]
    let runtime_nan = zero / zero;
    match rng.random_range(0..10) {
        0..4 => pick(
            rng,
            &[
                0.0,
                -0.0,
                f32::NAN,
                f32::from_bits(NEG_NAN_F32_BITS),
                runtime_nan,
                f32::from_bits(0x7f80_0001),
                f32::from_bits(0xff80_beef),
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::MIN,
                f32::MAX,
                f32::MIN_POSITIVE,
                f32::from_bits(1),
                1.0,
                -1.0,
            ],
        ),
        4..8 => f32::from(rng.random_range(-30..30i16)) / 2.0,
        _ => f32::from_bits(rng.random()),
    }
}

/// Strings rich in NUL, prefixes and multi-byte characters; one in twenty
/// longer than a zone map records.
fn random_string(rng: &mut StdRng) -> String {
    const ALPHABET: [char; 7] = ['\0', '\u{1}', 'a', 'b', 'é', '\u{ff}', '\u{10000}'];
    match rng.random_range(0..20) {
        0..6 => pick(rng, &["", "\0", "\0\0", "a", "a\0", "a\0b", "ab", "b", "é", "\u{10000}", "\u{7f}"])
            .to_string(),
        6 => (0..rng.random_range(65..200)).map(|_| pick(rng, &ALPHABET)).collect(),
        _ => (0..rng.random_range(0..8)).map(|_| pick(rng, &ALPHABET)).collect(),
    }
}

/// Bytes rich in the key codec's escape and terminator bytes; one in twenty
/// longer than a zone map records.
fn random_bytes(rng: &mut StdRng) -> Vec<u8> {
    const ALPHABET: [u8; 6] = [0x00, 0x01, 0x61, 0x80, 0xfe, 0xff];
    match rng.random_range(0..20) {
        0..6 => pick(rng, &[&[][..], &[0], &[0, 0], &[0xff], &[0, 0xff], &[1], b"a", &[0xff, 0xff]]).to_vec(),
        6 => (0..rng.random_range(65..200)).map(|_| rng.random()).collect(),
        _ => (0..rng.random_range(0..8)).map(|_| pick(rng, &ALPHABET)).collect(),
    }
}

fn primitive<T: ArrowPrimitiveType>(
    data_type: &DataType,
    cells: &[&Cell],
    get: impl Fn(&Cell) -> T::Native,
) -> ArrayRef {
    let values = cells.iter().map(|c| (**c != Cell::Null).then(|| get(c)));
    Arc::new(values.collect::<PrimitiveArray<T>>().with_data_type(data_type.clone()))
}

macro_rules! unwrap_cell {
    ($variant:ident) => {
        |c: &Cell| match c {
            Cell::$variant(v) => v.clone(),
            other => panic!("expected {}, got {other:?}", stringify!($variant)),
        }
    };
}

/// An Arrow array of `data_type` holding `cells`.
pub fn array_of(data_type: &DataType, cells: &[&Cell]) -> ArrayRef {
    let str_of = |c: &&Cell| match c {
        Cell::Null => None,
        Cell::Str(s) => Some(s.clone()),
        other => panic!("expected a string, got {other:?}"),
    };
    let bin_of = |c: &&Cell| match c {
        Cell::Null => None,
        Cell::Bin(b) => Some(b.clone()),
        other => panic!("expected bytes, got {other:?}"),
    };
    let dt = data_type;
    match data_type {
        DataType::Boolean => Arc::new(
            cells
                .iter()
                .map(|c| (**c != Cell::Null).then(|| unwrap_cell!(Bool)(c)))
                .collect::<BooleanArray>(),
        ),
        DataType::Int8 => primitive::<Int8Type>(dt, cells, unwrap_cell!(I8)),
        DataType::Int16 => primitive::<Int16Type>(dt, cells, unwrap_cell!(I16)),
        DataType::Int32 => primitive::<Int32Type>(dt, cells, unwrap_cell!(I32)),
        DataType::Int64 => primitive::<Int64Type>(dt, cells, unwrap_cell!(I64)),
        DataType::UInt8 => primitive::<UInt8Type>(dt, cells, unwrap_cell!(U8)),
        DataType::UInt16 => primitive::<UInt16Type>(dt, cells, unwrap_cell!(U16)),
        DataType::UInt32 => primitive::<UInt32Type>(dt, cells, unwrap_cell!(U32)),
        DataType::UInt64 => primitive::<UInt64Type>(dt, cells, unwrap_cell!(U64)),
        DataType::Float32 => primitive::<Float32Type>(dt, cells, |c| f32::from_bits(unwrap_cell!(F32)(c))),
        DataType::Float64 => primitive::<Float64Type>(dt, cells, |c| f64::from_bits(unwrap_cell!(F64)(c))),
        DataType::Date32 => primitive::<Date32Type>(dt, cells, unwrap_cell!(I32)),
        DataType::Date64 => primitive::<Date64Type>(dt, cells, unwrap_cell!(I64)),
        DataType::Timestamp(TimeUnit::Second, _) => {
            primitive::<TimestampSecondType>(dt, cells, unwrap_cell!(I64))
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            primitive::<TimestampMillisecondType>(dt, cells, unwrap_cell!(I64))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            primitive::<TimestampMicrosecondType>(dt, cells, unwrap_cell!(I64))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            primitive::<TimestampNanosecondType>(dt, cells, unwrap_cell!(I64))
        }
        DataType::Decimal128(_, _) => primitive::<Decimal128Type>(dt, cells, unwrap_cell!(I128)),
        DataType::Utf8 => Arc::new(cells.iter().map(str_of).collect::<StringArray>()),
        DataType::LargeUtf8 => Arc::new(cells.iter().map(str_of).collect::<LargeStringArray>()),
        DataType::Binary => Arc::new(cells.iter().map(bin_of).collect::<BinaryArray>()),
        DataType::LargeBinary => Arc::new(cells.iter().map(bin_of).collect::<LargeBinaryArray>()),
        other => panic!("no array builder for {other}"),
    }
}

/// A batch of `schema` holding `rows` (each a full row of cells).
pub fn batch_of<R: AsRef<[Cell]>>(schema: &SchemaRef, rows: &[R]) -> RecordBatch {
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let cells: Vec<&Cell> = rows.iter().map(|r| &r.as_ref()[i]).collect();
            array_of(f.data_type(), &cells)
        })
        .collect();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows.len()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options).expect("a batch of generated rows")
}

/// Element `i` of an array of any supported type.
pub fn cell_at(array: &dyn Array, i: usize) -> Cell {
    if array.is_null(i) {
        return Cell::Null;
    }
    match array.data_type() {
        DataType::Boolean => Cell::Bool(array.as_boolean().value(i)),
        DataType::Int8 => Cell::I8(array.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => Cell::I16(array.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => Cell::I32(array.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => Cell::I64(array.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => Cell::U8(array.as_primitive::<UInt8Type>().value(i)),
        DataType::UInt16 => Cell::U16(array.as_primitive::<UInt16Type>().value(i)),
        DataType::UInt32 => Cell::U32(array.as_primitive::<UInt32Type>().value(i)),
        DataType::UInt64 => Cell::U64(array.as_primitive::<UInt64Type>().value(i)),
        DataType::Float32 => Cell::F32(array.as_primitive::<Float32Type>().value(i).to_bits()),
        DataType::Float64 => Cell::F64(array.as_primitive::<Float64Type>().value(i).to_bits()),
        DataType::Date32 => Cell::I32(array.as_primitive::<Date32Type>().value(i)),
        DataType::Date64 => Cell::I64(array.as_primitive::<Date64Type>().value(i)),
        DataType::Timestamp(TimeUnit::Second, _) => {
            Cell::I64(array.as_primitive::<TimestampSecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            Cell::I64(array.as_primitive::<TimestampMillisecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Cell::I64(array.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Cell::I64(array.as_primitive::<TimestampNanosecondType>().value(i))
        }
        DataType::Decimal128(_, _) => Cell::I128(array.as_primitive::<Decimal128Type>().value(i)),
        DataType::Utf8 => Cell::Str(array.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Cell::Str(array.as_string::<i64>().value(i).to_string()),
        DataType::Binary => Cell::Bin(array.as_binary::<i32>().value(i).to_vec()),
        DataType::LargeBinary => Cell::Bin(array.as_binary::<i64>().value(i).to_vec()),
        other => panic!("no reader for {other}"),
    }
}

/// The rows of a batch as cells.
pub fn rows_of(batch: &RecordBatch) -> Vec<Vec<Cell>> {
    (0..batch.num_rows()).map(|r| batch.columns().iter().map(|c| cell_at(c.as_ref(), r)).collect()).collect()
}

/// A row view's values as cells, read through the typed accessor of each
/// column's type and, as a second reading that must agree, through
/// `RowRef::value`.
pub fn row_of_view(row: basalt::RowRef<'_>) -> Vec<Cell> {
    view_cells(row, &(0..row.num_columns()).collect::<Vec<_>>())
}

/// [`row_of_view`] of the columns `columns` (schema positions), in order.
pub fn view_cells(row: basalt::RowRef<'_>, columns: &[usize]) -> Vec<Cell> {
    use basalt::Cell as V;
    columns
        .iter()
        .map(|&c| {
            let by_value = match row.value(c).expect("value") {
                V::Null => Cell::Null,
                V::Boolean(v) => Cell::Bool(v),
                V::Int8(v) => Cell::I8(v),
                V::Int16(v) => Cell::I16(v),
                V::Int32(v) | V::Date32(v) => Cell::I32(v),
                V::Int64(v) | V::Date64(v) | V::Timestamp(v) => Cell::I64(v),
                V::UInt8(v) => Cell::U8(v),
                V::UInt16(v) => Cell::U16(v),
                V::UInt32(v) => Cell::U32(v),
                V::UInt64(v) => Cell::U64(v),
                V::Float32(v) => Cell::F32(v.to_bits()),
                V::Float64(v) => Cell::F64(v.to_bits()),
                V::Decimal128(v) => Cell::I128(v),
                V::Utf8(v) => Cell::Str(v.to_string()),
                V::Binary(v) => Cell::Bin(v.to_vec()),
                other => panic!("no cell for {other:?}"),
            };
            let typed = |v: Option<Cell>| v.unwrap_or(Cell::Null);
            let by_accessor = match row.schema().field(c).data_type() {
                DataType::Boolean => typed(row.bool(c).expect("bool").map(Cell::Bool)),
                DataType::Int8 => typed(row.i8(c).expect("i8").map(Cell::I8)),
                DataType::Int16 => typed(row.i16(c).expect("i16").map(Cell::I16)),
                DataType::Int32 | DataType::Date32 => typed(row.i32(c).expect("i32").map(Cell::I32)),
                DataType::Int64 | DataType::Date64 | DataType::Timestamp(..) => {
                    typed(row.i64(c).expect("i64").map(Cell::I64))
                }
                DataType::UInt8 => typed(row.u8(c).expect("u8").map(Cell::U8)),
                DataType::UInt16 => typed(row.u16(c).expect("u16").map(Cell::U16)),
                DataType::UInt32 => typed(row.u32(c).expect("u32").map(Cell::U32)),
                DataType::UInt64 => typed(row.u64(c).expect("u64").map(Cell::U64)),
                DataType::Float32 => typed(row.f32(c).expect("f32").map(|v| Cell::F32(v.to_bits()))),
                DataType::Float64 => typed(row.f64(c).expect("f64").map(|v| Cell::F64(v.to_bits()))),
                DataType::Decimal128(..) => typed(row.decimal128(c).expect("decimal").map(Cell::I128)),
                DataType::Utf8 | DataType::LargeUtf8 => {
                    typed(row.str(c).expect("str").map(|s| Cell::Str(s.to_string())))
                }
                DataType::Binary | DataType::LargeBinary => {
                    typed(row.bytes(c).expect("bytes").map(|b| Cell::Bin(b.to_vec())))
                }
                other => panic!("no accessor for {other}"),
            };
            assert_eq!(by_value, by_accessor, "column {c}: value and typed accessor disagree");
            assert_eq!(row.is_null(c).expect("is_null"), by_value == Cell::Null, "column {c}: is_null");
            by_value
        })
        .collect()
}
