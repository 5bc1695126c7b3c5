//! Tests of `row/layout.rs`.

use arrow_array::{BinaryArray, Int64Array, StringArray};

use super::*;
use crate::row::decode::{builders_for, decode_row};
use crate::row::encode::RowEncoder;
use arrow_array::ArrayRef;

fn users() -> (TableLayout, RecordBatch) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("blob", DataType::Binary, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![-5, 7])),
            Arc::new(StringArray::from(vec![Some("ann"), None])),
            Arc::new(BinaryArray::from(vec![&b"x"[..], &b""[..]])),
        ],
    )
    .expect("batch");
    (TableLayout::new(schema, &[0]).expect("layout"), batch)
}

#[test]
fn rows_round_trip_through_row_bytes() {
    let (layout, batch) = users();
    layout.check_batch(&batch).expect("matches");
    let enc = RowEncoder::new(&layout, &batch).expect("encoder");
    let mut builders = builders_for(&layout);
    let mut keys = Vec::new();
    for r in 0..2 {
        let (mut k, mut row) = (Vec::new(), Vec::new());
        enc.key(r, &mut k);
        enc.row(r, &mut row);
        keys.push(k);
        decode_row(&layout, Some(&row), &mut builders).expect("decodes");
    }
    assert!(keys[0] < keys[1], "-5 sorts before 7 in key bytes");
    let arrays: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish().expect("array")).collect();
    let back = RecordBatch::try_new(layout.schema().clone(), arrays).expect("batch");
    assert_eq!(back, batch);
}

#[test]
fn key_value_layout_stores_raw_values() {
    let layout = TableLayout::key_value();
    assert!(layout.raw_key());
    assert_eq!(layout.stored(), &[1]);
    let mut b = builders_for(&layout);
    decode_row(&layout, Some(b"raw value"), &mut b).expect("raw");
    assert_eq!(b[1].len(), 1);
}

#[test]
fn bad_schemas_and_batches_are_refused() {
    let (layout, batch) = users();
    let schema = layout.schema().clone();
    assert!(TableLayout::new(schema.clone(), &[]).is_err());
    assert!(TableLayout::new(schema.clone(), &[0, 0]).is_err());
    assert!(TableLayout::new(schema.clone(), &[9]).is_err());
    let renamed = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("nom", DataType::Utf8, true),
            Field::new("blob", DataType::Binary, false),
        ])),
        batch.columns().to_vec(),
    )
    .expect("batch");
    assert!(matches!(layout.check_batch(&renamed), Err(Error::SchemaMismatch(m)) if m.contains("name")));
}

#[test]
fn damaged_row_bytes_are_errors() {
    let (layout, _) = users();
    let mut b = builders_for(&layout);
    // Row bytes live inside checksummed WAL records and blocks; these are
    // structurally impossible.
    for bad in [&b""[..], &[0u8, 1, 2][..], &[0b001u8, 0, 0, 0, 0, 0, 0, 0, 0, 0][..]] {
        assert!(decode_row(&layout, Some(bad), &mut b).is_err());
    }
}

/// `RowEncoder::row_len` is the length `row` writes, and `rows_len_bound`
/// bounds their sum, over random schemas
/// (every width, nullable or not, the last column variable or not) and
/// values whose lengths cross the varint prefix's one- and two-byte
/// boundaries.
#[test]
fn row_len_is_the_length_of_the_row_bytes() {
    use arrow_array::{BooleanArray, Float64Array, Int32Array, LargeStringArray};
    use rand::{Rng, SeedableRng};
    for seed in 0..300u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let rows = rng.random_range(1..20);
        let mut fields = vec![Field::new("k", DataType::Int64, false)];
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(0..rows as i64))];
        for c in 0..rng.random_range(0..6) {
            let nullable = rng.random_bool(0.5);
            let mut valid = || !nullable || rng.random_bool(0.7);
            let valids: Vec<bool> = (0..rows).map(|_| valid()).collect();
            let lens: Vec<usize> =
                (0..rows).map(|_| [0, 1, 127, 128, 16_383, 16_384][rng.random_range(0..6)]).collect();
            let text = |r: usize| valids[r].then(|| "x".repeat(lens[r]));
            let (ty, array): (DataType, ArrayRef) = match rng.random_range(0..5) {
                0 => (
                    DataType::Int32,
                    Arc::new((0..rows).map(|r| valids[r].then_some(r as i32)).collect::<Int32Array>()),
                ),
                1 => (
                    DataType::Float64,
                    Arc::new((0..rows).map(|r| valids[r].then_some(0.5)).collect::<Float64Array>()),
                ),
                2 => (
                    DataType::Boolean,
                    Arc::new((0..rows).map(|r| valids[r].then_some(r % 2 == 0)).collect::<BooleanArray>()),
                ),
                3 => (DataType::Utf8, Arc::new((0..rows).map(text).collect::<StringArray>())),
                _ => (DataType::LargeUtf8, Arc::new((0..rows).map(text).collect::<LargeStringArray>())),
            };
            fields.push(Field::new(format!("c{c}"), ty, nullable));
            columns.push(array);
        }
        let schema = Arc::new(Schema::new(fields));
        let layout = TableLayout::new(schema.clone(), &[0]).expect("layout");
        let batch = RecordBatch::try_new(schema, columns).expect("batch");
        let enc = RowEncoder::new(&layout, &batch).expect("encoder");
        let mut total = 0;
        for r in 0..rows {
            let mut row = Vec::new();
            enc.row(r, &mut row);
            assert_eq!(enc.row_len(r), row.len(), "seed {seed}, row {r}");
            total += row.len();
            assert!(total <= enc.rows_len_bound(r + 1), "seed {seed}, rows to {r}");
        }
    }
}
