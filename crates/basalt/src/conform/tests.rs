use std::sync::Arc;

use arrow_array::{Float32Array, Float64Array, Int8Array, Int64Array, StringArray, TimestampNanosecondArray};
use arrow_schema::{Field, Schema, TimeUnit};

use super::*;

fn schema(fields: Vec<Field>) -> SchemaRef {
    Arc::new(Schema::new(fields))
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(schema(fields), columns).expect("batch")
}

fn table() -> SchemaRef {
    schema(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("score", DataType::Float64, true),
        Field::new("name", DataType::Utf8, true),
    ])
}

#[test]
fn by_name_fills_missing_nullable_columns_and_refuses_extra_or_missing_required_ones() {
    let b = batch(vec![Field::new("id", DataType::Int8, false)], vec![Arc::new(Int8Array::from(vec![1, 2]))]);
    let (out, bad) = conform(&b, &table(), Columns::ByName, Casts::Lossless).expect("fits");
    assert!(bad.is_empty());
    assert_eq!(out.schema(), table());
    assert_eq!(out.column(1).null_count(), 2);
    let extra = batch(
        vec![Field::new("id", DataType::Int64, false), Field::new("extra", DataType::Int64, true)],
        vec![Arc::new(Int64Array::from(vec![1])), Arc::new(Int64Array::from(vec![1]))],
    );
    assert_eq!(
        conform(&extra, &table(), Columns::ByName, Casts::Lossless).expect_err("refused"),
        ConformError::ExtraColumn { name: "extra".into() }
    );
    let no_id = batch(
        vec![Field::new("score", DataType::Float64, true)],
        vec![Arc::new(Float64Array::from(vec![1.0]))],
    );
    for casts in [Casts::Lossless, Casts::Parse, Casts::Arrow] {
        assert_eq!(
            conform(&no_id, &table(), Columns::ByName, casts).expect_err("refused"),
            ConformError::MissingColumn { name: "id".into() }
        );
    }
}

#[test]
fn lossless_refuses_changed_values_and_text_into_numbers() {
    let target = schema(vec![
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), false),
        Field::new("f", DataType::Float32, true),
    ]);
    let ok = batch(
        vec![
            Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
            Field::new("f", DataType::Float64, true),
        ],
        vec![
            Arc::new(TimestampNanosecondArray::from(vec![1000, 2000])),
            Arc::new(Float64Array::from(vec![1.5, f64::NAN])),
        ],
    );
    assert!(conform(&ok, &target, Columns::ByName, Casts::Lossless).is_ok(), "NaN and exact values pass");
    let cut = batch(
        vec![Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), false)],
        vec![Arc::new(TimestampNanosecondArray::from(vec![1000, 1001]))],
    );
    let err = conform(&cut, &target, Columns::ByName, Casts::Lossless).expect_err("refused");
    assert!(matches!(&err, ConformError::Inexact { column, .. } if column == "t"), "{err}");
    let narrowed = batch(
        vec![Field::new("f", DataType::Float64, true)],
        vec![Arc::new(Float64Array::from(vec![1e300]))],
    );
    let with_t = schema(vec![Field::new("f", DataType::Float32, true)]);
    assert!(matches!(
        conform(&narrowed, &with_t, Columns::ByName, Casts::Lossless),
        Err(ConformError::Inexact { .. })
    ));
    let text =
        batch(vec![Field::new("id", DataType::Utf8, false)], vec![Arc::new(StringArray::from(vec!["1"]))]);
    assert!(matches!(
        conform(&text, &table(), Columns::ByName, Casts::Lossless),
        Err(ConformError::Uncastable { .. })
    ));
    let overflow =
        batch(vec![Field::new("i", DataType::Int64, false)], vec![Arc::new(Int64Array::from(vec![300]))]);
    let small = schema(vec![Field::new("i", DataType::Int8, false)]);
    assert!(conform(&overflow, &small, Columns::ByName, Casts::Lossless).is_err(), "overflow");
    let null_key = batch(
        vec![Field::new("id", DataType::Int64, true)],
        vec![Arc::new(Int64Array::from(vec![Some(1), None]))],
    );
    assert_eq!(
        conform(&null_key, &table(), Columns::ByName, Casts::Lossless).expect_err("refused"),
        ConformError::Null { column: "id".into() }
    );
}

#[test]
fn parse_reports_bad_rows_and_keeps_the_others() {
    let b = batch(
        vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("score", DataType::Utf8, true),
            Field::new("name", DataType::Utf8, true),
        ],
        vec![
            Arc::new(StringArray::from(vec![Some("1"), Some("2"), None, Some("x"), Some("5")])),
            Arc::new(StringArray::from(vec![Some("1.5"), Some("lots"), Some("3"), Some("4"), None])),
            Arc::new(StringArray::from(vec![Some("a"), Some("b"), Some("c"), Some("d"), Some("e")])),
        ],
    );
    let (out, bad) = conform(&b, &table(), Columns::ByName, Casts::Parse).expect("conforms");
    assert_eq!(out.num_rows(), 2);
    assert_eq!(out.column(0).as_ref(), &Int64Array::from(vec![1, 5]) as &dyn Array);
    let rows: Vec<(usize, &str)> = bad.iter().map(|b| (b.row, b.column.as_str())).collect();
    assert_eq!(rows, vec![(1, "score"), (2, "id"), (3, "id")]);
    assert_eq!(bad[0].problem, RowProblem::NotA { value: "lots".into(), data_type: DataType::Float64 });
    assert_eq!(bad[1].problem, RowProblem::Null);
    let fraction = batch(
        vec![Field::new("id", DataType::Float64, false)],
        vec![Arc::new(Float64Array::from(vec![1.0, 1.7]))],
    );
    let (out, bad) = conform(&fraction, &table(), Columns::ByName, Casts::Parse).expect("conforms");
    assert_eq!((out.num_rows(), bad.len()), (1, 1));
    assert_eq!(bad[0].problem, RowProblem::Inexact { value: "1.7".into(), data_type: DataType::Int64 });
    // A float narrowed is the table's choice.
    let narrowed =
        batch(vec![Field::new("f", DataType::Float64, true)], vec![Arc::new(Float64Array::from(vec![0.1]))]);
    let f32s = schema(vec![Field::new("f", DataType::Float32, true)]);
    let (out, bad) = conform(&narrowed, &f32s, Columns::ByName, Casts::Parse).expect("conforms");
    assert!(bad.is_empty());
    assert_eq!(out.column(0).as_ref(), &Float32Array::from(vec![0.1f32]) as &dyn Array);
}

#[test]
fn by_position_casts_as_arrow_does_and_refuses_nulls_in_required_columns() {
    let b = batch(
        vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Int64, true),
            Field::new("c", DataType::Utf8View, true),
        ],
        vec![
            Arc::new(arrow_array::Int32Array::from(vec![1])),
            Arc::new(Int64Array::from(vec![2])),
            Arc::new(arrow_array::StringViewArray::from(vec!["x"])),
        ],
    );
    let (out, _) = conform(&b, &table(), Columns::ByPosition, Casts::Arrow).expect("fits");
    assert_eq!(out.schema(), table());
    let short =
        batch(vec![Field::new("a", DataType::Int64, true)], vec![Arc::new(Int64Array::from(vec![1]))]);
    assert_eq!(
        conform(&short, &table(), Columns::ByPosition, Casts::Arrow).expect_err("refused"),
        ConformError::ColumnCount { given: 1, table: 3 }
    );
    let null = batch(
        vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Float64, true),
            Field::new("c", DataType::Utf8, true),
        ],
        vec![
            Arc::new(Int64Array::from(vec![None])),
            Arc::new(Float64Array::from(vec![1.0])),
            Arc::new(StringArray::from(vec!["x"])),
        ],
    );
    assert_eq!(
        conform(&null, &table(), Columns::ByPosition, Casts::Arrow).expect_err("refused"),
        ConformError::Null { column: "id".into() }
    );
}
