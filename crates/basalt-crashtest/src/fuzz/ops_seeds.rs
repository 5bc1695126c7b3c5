//! Seed inputs of the `ops` target, written in its input format (see
//! [`super::ops`] and [`super::input`]) with names for the bytes, so that
//! the fuzzer starts from inputs that reach every op: the key-value store
//! alone, composite keys, raw `Utf8` and `Binary` keys, float keys with
//! every NaN and zero, a twelve-column table of every type, and requests
//! the engine must refuse.

use super::ops::op::{
    COMPACT, CRASH, FLUSH, MIXED_BATCH, REOPEN, SNAPSHOT, SNAPSHOT_READ, TABLE_DELETE, TABLE_GET,
    TABLE_GET_MANY, TABLE_SCAN, TABLE_WRITE,
};

// Column type bytes (`input::column_type`); bit 7 makes a column nullable.
const BOOL: u8 = 0;
const I8: u8 = 1;
const I16: u8 = 2;
const I32: u8 = 3;
const I64: u8 = 4;
const U8: u8 = 5;
const U64: u8 = 8;
const F32: u8 = 9;
const F64: u8 = 10;
const DATE64: u8 = 12;
const TS_US_UTC: u8 = 15;
const TS_NS_EMPTY_TZ: u8 = 16;
const DEC38: u8 = 17;
const DEC10_2: u8 = 18;
const DEC4_NEG2: u8 = 19;
const UTF8: u8 = 20;
const LARGE_UTF8: u8 = 21;
const LARGE_BINARY: u8 = 23;
const NULLABLE: u8 = 0x80;
/// The type byte of a one-column table keyed by raw `Utf8` (and `Binary`).
const RAW_UTF8_KEY: u8 = 0x40;
const RAW_BINARY_KEY: u8 = 0x41;

// Value bytes: palette entries (`input::palette_cell`), null, raw.
const INT_ZERO: u8 = 0;
const INT_ONE: u8 = 1;
const INT_MINUS_ONE: u8 = 2;
const INT_MIN: u8 = 8;
const INT_MAX: u8 = 9;
const F_ZERO: u8 = 0;
const F_NEG_ZERO: u8 = 1;
const F_ONE: u8 = 2;
const F_INF: u8 = 4;
const F_NEG_INF: u8 = 5;
const F_NAN: u8 = 6;
const F_NEG_NAN: u8 = 7;
const F_SIGNALLING_NAN: u8 = 8;
const F_SUBNORMAL: u8 = 12;
const F_42: u8 = 15;
const S_EMPTY: u8 = 0;
const S_NUL: u8 = 1;
const S_A: u8 = 2;
const S_A_NUL: u8 = 3;
const S_NUL_NUL: u8 = 7;
const B_FF: u8 = 3;
const NULL: u8 = 0xE0;
const RAW: u8 = 0xF0;

// Filter op bytes: the op plus a literal of the column's type (mode 4).
const EQ: u8 = 32;
const NOT_EQ: u8 = 33;
const LT: u8 = 34;
const LT_EQ: u8 = 35;
const GT: u8 = 36;
const GT_EQ: u8 = 37;
const IS_NULL: u8 = 38;
const IS_NOT_NULL: u8 = 39;

/// A full scan: no bounds, the default batch size, no projection, no filter.
const FULL_SCAN: [u8; 6] = [TABLE_SCAN, 0, 0, 0, 1, 0];

/// An input: options, a table of `columns` keyed by the columns at `key`,
/// then `steps`.
fn input(options: u8, columns: &[u8], key: &[u8], steps: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![options, (columns.len() - 1) as u8, (key.len() - 1) as u8];
    out.extend_from_slice(columns);
    out.extend_from_slice(key);
    for step in steps {
        out.extend_from_slice(step);
    }
    out
}

/// Every seed.
pub fn all() -> Vec<Vec<u8>> {
    vec![
        // The key-value seeds of the target's first version.
        input(0, &[I64], &[0], &[&[0, 1, 5, 0, 2, 9, 4, 1, 0, 6, 0, 0, 5, 0, 0, 2, 1, 0, 8, 0, 0, 4, 1, 0]]),
        input(0, &[I64], &[0], &[&[3, 4, 13, 5, 0, 1, 7, 0, 0, 9, 0, 0, 5, 9, 1]]),
        input(
            0,
            &[I64],
            &[0],
            &[&[0, 3, 60, 0, 4, 61, 0, 5, 62, 6, 0, 0, 0, 3, 1, 7, 0, 0, 4, 3, 0, 8, 0, 0, 5, 2, 0]],
        ),
        composite_key(),
        raw_utf8_key(),
        raw_binary_key(),
        float_key(),
        wide(),
        refusals(),
    ]
}

/// `(c0 Int32, c1 Utf8)` keys, a nullable Float64 and Decimal128: a
/// duplicate key in one batch, prefix bounds, a filter before and after a
/// flush, deletes, a reopen, projections (one empty).
fn composite_key() -> Vec<u8> {
    input(
        0,
        &[I32, UTF8, F64 | NULLABLE, DEC10_2 | NULLABLE],
        &[0, 1],
        &[
            &[TABLE_WRITE, 3],
            &[INT_ONE, S_A, F_NAN, 6],
            &[INT_ONE, S_A_NUL, F_NEG_ZERO, NULL],
            &[INT_MINUS_ONE, S_EMPTY, NULL, INT_MAX],
            &[INT_ONE, S_A, F_NEG_NAN, INT_MIN],
            &FULL_SCAN,
            // c0 = 1 (a prefix, both bounds included), batches of 1, c2 < 0.0.
            &[TABLE_SCAN, 4, INT_ONE, 4, INT_ONE, 1, 1, 1, 2, LT, F_ZERO],
            &[FLUSH, 0, 0],
            &[TABLE_SCAN, 4, INT_ONE, 4, INT_ONE, 1, 1, 1, 2, LT, F_ZERO],
            &[TABLE_GET, 0, INT_ONE, S_A],
            &[TABLE_DELETE, 0, 0, INT_MINUS_ONE, S_EMPTY],
            &[REOPEN, 0, 0],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 3, IS_NULL, 0],
            &[TABLE_GET_MANY, 1, 1, 0, INT_ONE, S_A],
            // Columns 3 and 1, in that order; then no column at all.
            &[TABLE_SCAN, 0, 0, 0, 8, 0b1010, 0, 0],
            &[TABLE_SCAN, 0, 0, 0, 0, 0, 0, 0],
            &[COMPACT, 0, 0],
        ],
    )
}

/// A key-only table keyed by raw `Utf8`: empty and NUL strings, an
/// excluded lower bound, a bound of the wrong type, a crash.
fn raw_utf8_key() -> Vec<u8> {
    input(
        0,
        &[RAW_UTF8_KEY],
        &[0],
        &[
            &[TABLE_WRITE, 3, S_EMPTY, S_NUL, S_A, S_NUL_NUL],
            &FULL_SCAN,
            &[FLUSH, 0, 0],
            &[TABLE_SCAN, 5, S_NUL, 0, 2, 1, 0],
            // An Int64 lower bound: refused.
            &[TABLE_SCAN, 4, 0xFC, 0, 0, 0, 1, 0],
            &[TABLE_GET, 0, S_A],
            &[TABLE_DELETE, 0, 1],
            &[CRASH, 0, 0],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 0, GT, S_NUL],
        ],
    )
}

/// A key-only table keyed by raw `Binary`, with raw values, without the
/// learned index.
fn raw_binary_key() -> Vec<u8> {
    input(
        2,
        &[RAW_BINARY_KEY],
        &[0],
        &[
            &[TABLE_WRITE, 2, S_EMPTY, B_FF, RAW, 3, 0xff, 0x00, 0xff],
            &[FLUSH, 0, 0],
            &[TABLE_SCAN, 0, 4, B_FF, 0, 1, 0],
            &[TABLE_DELETE, 0, 0, B_FF],
            &[REOPEN, 0, 0],
            &FULL_SCAN,
        ],
    )
}

/// A Float64 key with both zeros, NaNs of both signs and payloads, the
/// infinities; filters on NaN and zeros over one 4 KiB block (zone maps);
/// automatic compaction; reads at a snapshot taken before an overwrite and
/// a delete.
fn float_key() -> Vec<u8> {
    input(
        0x61,
        &[F64, F32 | NULLABLE, BOOL | NULLABLE],
        &[0],
        &[
            &[TABLE_WRITE, 7],
            &[F_ZERO, F_ONE, 0],
            &[F_NEG_ZERO, F_NAN, 1],
            &[F_NAN, F_NEG_NAN, NULL],
            &[F_NEG_NAN, F_NEG_ZERO, 0],
            &[F_SIGNALLING_NAN, F_INF, 1],
            &[F_INF, F_NEG_INF, 0],
            &[F_NEG_INF, NULL, 1],
            &[F_42, F_SUBNORMAL, 0],
            &[TABLE_GET, 0, F_NEG_ZERO],
            &[TABLE_GET, 0, F_NAN],
            &[FLUSH, 0, 0],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 0, GT, F_ZERO],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 0, EQ, F_NEG_NAN],
            &[TABLE_SCAN, 0, 0, 0, 1, 2, 1, LT_EQ, F_INF, 2, IS_NOT_NULL, 0],
            // -inf <= c0 < NaN.
            &[TABLE_SCAN, 4, F_NEG_INF, 5, F_NAN, 2, 1, 0],
            &[COMPACT, 0, 0],
            &[SNAPSHOT],
            &[TABLE_WRITE, 0, F_ZERO, F_NEG_NAN, 1],
            &[TABLE_DELETE, 0, 0, F_NAN],
            &[FLUSH, 0, 0],
            &[SNAPSHOT_READ, 0, 0, 0, 0, 1, 1, 1, NOT_EQ, F_NAN],
            &[SNAPSHOT_READ, 1, 0, F_NEG_ZERO],
            &[SNAPSHOT_READ, 2, 5],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 1, LT, F_NEG_ZERO],
        ],
    )
}

/// Twelve columns, a four-column key (`u64::MAX` among its values; a
/// Boolean key column, asked for as nullable, which `create_table` must
/// refuse), raw values, LZ4, pread reads and no Bloom filters.
fn wide() -> Vec<u8> {
    let max_u64 = [RAW, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    let raw_decimal =
        [RAW, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0xff];
    input(
        0x1C,
        &[
            BOOL | NULLABLE,
            I8,
            I16 | NULLABLE,
            U64,
            DATE64,
            TS_NS_EMPTY_TZ,
            DEC38 | NULLABLE,
            LARGE_UTF8,
            LARGE_BINARY | NULLABLE,
            U8,
            TS_US_UTC,
            DEC4_NEG2 | NULLABLE,
        ],
        &[3, 0, 7, 10],
        &[
            &[TABLE_WRITE, 2, 1, INT_ZERO, INT_MAX],
            &max_u64,
            &[INT_MIN, INT_MAX],
            &raw_decimal,
            &[S_A, NULL, INT_MAX, INT_MIN, INT_MAX],
            &[NULL, INT_MIN, NULL, INT_MAX, INT_ONE, INT_ZERO, INT_MIN, S_EMPTY, 0, 0, INT_ZERO, NULL],
            &[0, INT_MINUS_ONE, INT_MINUS_ONE, INT_ZERO, 3, 3, 3, RAW, 3, b'x', b'y', b'z', RAW, 2, 0, 0],
            &[9, 9, 9],
            &[FLUSH, 0, 0],
            &[TABLE_GET, 1],
            // The whole key as the lower bound, batches of 7, c6 >= 0.
            &[TABLE_SCAN, 13, INT_MAX, 1, S_EMPTY, INT_ZERO, 0, 4, 1, 1, 6, GT_EQ, INT_ZERO],
            // One row, one key of a row held, then a key-value put.
            &[
                MIXED_BATCH,
                0,
                INT_ONE,
                INT_ONE,
                INT_ONE,
                INT_ONE,
                INT_ONE,
                INT_ONE,
                INT_ONE,
                S_A,
                S_A,
                INT_ONE,
            ],
            &[INT_ONE, INT_ONE, 0, 1, 3, 4],
            &[CRASH, 0, 0],
            &[TABLE_SCAN, 0, 0, 0, 1, 3, 0, LT, 1, 8, NOT_EQ, 0, 11, IS_NULL, 0],
            &[COMPACT, 0, 0],
            &[REOPEN, 0, 0],
            &FULL_SCAN,
        ],
    )
}

/// Requests the engine must refuse: a Decimal128 and nullable key (the
/// table is then created with valid key columns), a null key, keys of
/// the wrong length or type, bad filters, a bound too long, an unknown
/// projected column.
fn refusals() -> Vec<u8> {
    input(
        0,
        &[DEC38 | NULLABLE, I64 | NULLABLE, UTF8 | NULLABLE],
        &[0, 1],
        &[
            &[TABLE_WRITE, 0xF0, INT_ONE, INT_ONE, S_A],
            &[TABLE_WRITE, 0, INT_ONE, INT_ONE, S_A],
            &[TABLE_GET, 15, INT_ONE],
            &[TABLE_GET, 0x2F, INT_ONE, INT_ONE, INT_ONE],
            &[TABLE_GET, 0, 0xFB, 0, INT_ONE],
            // Filters: an unknown column, a null literal, an Int64 literal,
            // two values, then IS NULL with a null literal (accepted).
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 2, 0, S_A],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 2, 8],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 2, 16, I64, INT_ONE],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 2, 24, S_A],
            &[TABLE_SCAN, 0, 0, 0, 1, 1, 2, 14],
            &[TABLE_SCAN, 0xF1, INT_ONE, INT_ONE, INT_ONE, 0, 0, 1, 0],
            &[TABLE_SCAN, 0, 0, 0, 0xFC, 1, 0, 0],
            &FULL_SCAN,
        ],
    )
}
