//! The table operations of the `ops` target and their model: a `BTreeMap`
//! from the key tuple (in the engine's key order, see [`KeyCell`]) to the
//! row as last written. Every read is compared with it; filters with
//! Arrow's own kernels (`arrow_ord::cmp`, `arrow_select::filter`) run over
//! the model's rows.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Scalar};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::OwnedKeyValue;
use basalt::{CmpOp, Db, Filter, Predicate, ReadOptions, ScanOptions, Snapshot, Table, WriteBatch};

use super::cells::{Cell, KeyCell, array_of, batch_of, cells_of, key_cell, key_value, rows_of};
use super::input::{Input, TableSpec, cell, column_type, key_part, key_type_of};

/// Most rows one write or delete takes, so one input runs in milliseconds.
const ROWS_MAX: usize = 8;
/// Most predicates of one filter.
const PREDICATES_MAX: u8 = 3;
/// Batch sizes a scan asks for (0: the engine's default).
const BATCH_SIZES: [usize; 6] = [0, 1, 2, 3, 7, 64];

/// The rows of a table by key.
pub type Rows = BTreeMap<Vec<KeyCell>, Vec<Cell>>;

/// A generated table and what it should hold.
#[derive(Debug, Clone)]
pub struct TableModel {
    /// Schema and key.
    pub spec: TableSpec,
    /// The rows.
    pub rows: Rows,
}

impl TableModel {
    /// An empty table of `spec`.
    pub fn new(spec: TableSpec) -> TableModel {
        TableModel { spec, rows: Rows::new() }
    }

    fn key_types(&self) -> impl Iterator<Item = &DataType> {
        self.spec.key.iter().map(|&i| self.spec.schema.field(i).data_type())
    }

    /// The model key of a tuple of key column values.
    fn key_of(&self, key: &[Cell]) -> Vec<KeyCell> {
        self.key_types().zip(key).map(|(ty, c)| key_cell(&key_value(ty, c))).collect()
    }

    fn key_cells<'r>(&self, row: &'r [Cell]) -> Vec<&'r Cell> {
        self.spec.key.iter().map(|&i| &row[i]).collect()
    }

    /// The schema of a batch of keys: the key columns, in key order.
    pub fn key_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.spec.key.iter().map(|&i| self.spec.schema.field(i).clone()).collect::<Vec<Field>>(),
        ))
    }

    /// One to `ROWS_MAX` rows: a count byte, then a value per column.
    fn decode_rows(&self, count: u8, inp: &mut Input<'_>) -> Vec<Vec<Cell>> {
        let n = 1 + usize::from(count) % ROWS_MAX;
        let fields = self.spec.schema.fields();
        (0..n).map(|_| fields.iter().map(|f| cell(inp, f.data_type(), f.is_nullable())).collect()).collect()
    }

    /// One to `ROWS_MAX` keys: a count byte, then per key a selector byte
    /// (odd: the key of a row the model holds) and values.
    fn decode_keys(&self, inp: &mut Input<'_>) -> Vec<Vec<Cell>> {
        let n = 1 + usize::from(inp.byte()) % ROWS_MAX;
        (0..n)
            .map(|_| {
                let selector = inp.byte();
                if selector & 1 == 1 && !self.rows.is_empty() {
                    let at = usize::from(selector >> 1) % self.rows.len();
                    let row = self.rows.values().nth(at).expect("a row at an index below the count");
                    self.key_cells(row).into_iter().cloned().collect()
                } else {
                    self.key_types().map(|ty| cell(inp, ty, false)).collect::<Vec<_>>()
                }
            })
            .collect()
    }

    fn put(&mut self, row: Vec<Cell>) {
        let key: Vec<Cell> = self.key_cells(&row).into_iter().cloned().collect();
        self.rows.insert(self.key_of(&key), row);
    }

    fn delete(&mut self, key: &[Cell]) {
        self.rows.remove(&self.key_of(key));
    }
}

fn refs(rows: &[Vec<Cell>]) -> Vec<&[Cell]> {
    rows.iter().map(Vec::as_slice).collect()
}

/// Panics unless `got` equals `want`, naming the first difference.
pub fn assert_rows(got: &[Vec<Cell>], want: &[Vec<Cell>], what: &dyn Fn() -> String) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
    panic!(
        "{}: {} rows, the model {}; first difference at row {at}: got {:?}, want {:?}",
        what(),
        got.len(),
        want.len(),
        got.get(at),
        want.get(at)
    );
}

/// Upserts a batch of rows (later rows win over earlier ones of the same
/// key). A count byte of `0xF0` or more makes the batch invalid instead:
/// a null in a key column, which must be refused and change nothing.
pub fn write(table: &Table, model: &mut TableModel, inp: &mut Input<'_>) {
    let count = inp.byte();
    let mut rows = model.decode_rows(count, inp);
    if count >= 0xF0 {
        let k = model.spec.key[0];
        let fields: Vec<Field> = model
            .spec
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| if i == k { f.as_ref().clone().with_nullable(true) } else { f.as_ref().clone() })
            .collect();
        rows.last_mut().expect("at least one row")[k] = Cell::Null;
        let batch = batch_of(&Arc::new(Schema::new(fields)), &refs(&rows));
        let result = table.write(&batch);
        assert!(result.is_err(), "a table write with a null key was accepted: {rows:?}");
        return;
    }
    let batch = batch_of(&model.spec.schema, &refs(&rows));
    if let Err(e) = table.write(&batch) {
        panic!("table write of {rows:?}: {e}");
    }
    for row in rows {
        model.put(row);
    }
}

/// Deletes a batch of keys.
pub fn delete(table: &Table, model: &mut TableModel, inp: &mut Input<'_>) {
    let keys = model.decode_keys(inp);
    let batch = batch_of(&model.key_schema(), &refs(&keys));
    if let Err(e) = table.delete(&batch) {
        panic!("table delete of {keys:?}: {e}");
    }
    for key in &keys {
        model.delete(key);
    }
}

/// One write batch of table rows, then table deletes, then a key-value put:
/// applied in that order, atomically.
pub fn mixed_batch(
    db: &Db,
    table: &Table,
    model: &mut TableModel,
    kv: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    inp: &mut Input<'_>,
) {
    let count = inp.byte();
    let rows = model.decode_rows(count, inp);
    let keys = model.decode_keys(inp);
    let kv_key = vec![b'k', inp.byte() % 32];
    let kv_value = vec![b'm'; usize::from(inp.byte() % 16)];
    let mut wb = WriteBatch::new();
    wb.put_table(table, &batch_of(&model.spec.schema, &refs(&rows))).expect("put_table of valid rows");
    wb.delete_table(table, &batch_of(&model.key_schema(), &refs(&keys))).expect("delete_table of valid keys");
    wb.put(&kv_key, &kv_value);
    if let Err(e) = db.write(wb) {
        panic!("write batch of rows {rows:?} and deletes {keys:?}: {e}");
    }
    for row in rows {
        model.put(row);
    }
    for key in &keys {
        model.delete(key);
    }
    kv.insert(kv_key, kv_value);
}

/// Whether every part fits its key column's type (and there are no more
/// parts than key columns).
fn parts_fit(model: &TableModel, parts: &[OwnedKeyValue]) -> bool {
    parts.len() <= model.spec.key.len()
        && parts.iter().zip(model.key_types()).all(|(p, ty)| key_type_of(ty) == Some(p.key_type()))
}

/// A point read of a key: a mode byte (`% 4 == 1`: a key the model holds;
/// low nibble 15: one part too many or too few, which must be refused), then
/// the parts, each of which may be of a wrong type (see [`key_part`]).
pub fn get(table: &Table, model: &TableModel, rows: &Rows, inp: &mut Input<'_>, snapshot: Option<&Snapshot>) {
    let mode = inp.byte();
    let n = model.spec.key.len();
    let parts: Vec<OwnedKeyValue> = if mode % 4 == 1 && !rows.is_empty() {
        let row = rows.values().nth(usize::from(mode >> 2) % rows.len()).expect("a row below the count");
        model.spec.key.iter().map(|&i| key_value(model.spec.schema.field(i).data_type(), &row[i])).collect()
    } else {
        let len = if mode % 16 == 15 { if mode & 0x20 == 0 { n - 1 } else { n + 1 } } else { n };
        let types: Vec<&DataType> = model.key_types().collect();
        (0..len).map(|i| key_part(inp, types[i % n])).collect()
    };
    let values: Vec<_> = parts.iter().map(OwnedKeyValue::as_value).collect();
    let got = table.get_opt(&values, &ReadOptions::default().snapshot(snapshot));
    if parts.len() != n || !parts_fit(model, &parts) {
        assert!(got.is_err(), "Table::get of {parts:?} was accepted for a key of {:?}", model.key_schema());
        return;
    }
    let got = got.unwrap_or_else(|e| panic!("Table::get of {parts:?}: {e}"));
    let got = got.map(|b| {
        assert_eq!(*b.schema(), *table.schema(), "Table::get returned another schema");
        rows_of(&b)
    });
    let key: Vec<KeyCell> = parts.iter().map(key_cell).collect();
    let want: Option<Vec<Vec<Cell>>> = rows.get(&key).map(|r| vec![r.clone()]);
    assert_eq!(got, want, "Table::get of {parts:?} (snapshot: {})", snapshot.is_some());
}

/// A batch read of keys: the rows of those present, in the order asked.
pub fn get_many(table: &Table, model: &TableModel, inp: &mut Input<'_>) {
    let keys = model.decode_keys(inp);
    let got = table
        .get_many(&batch_of(&model.key_schema(), &refs(&keys)))
        .unwrap_or_else(|e| panic!("Table::get_many of {keys:?}: {e}"));
    let want: Vec<Vec<Cell>> =
        keys.iter().filter_map(|k| model.rows.get(&model.key_of(k))).cloned().collect();
    assert_rows(&rows_of(&got), &want, &|| format!("Table::get_many of {keys:?}"));
}

/// A bound of a scan: the engine's parts and the model's.
type PartsBound = Bound<Vec<OwnedKeyValue>>;

/// A range bound: a byte for its kind (`% 3`: none, included, excluded)
/// and length (`/ 3 % (keys + 1)`: a prefix of the key, or all of it;
/// `0xF0` and above: one part too many), then the parts.
fn decode_bound(model: &TableModel, inp: &mut Input<'_>) -> PartsBound {
    let b = inp.byte();
    let n = model.spec.key.len();
    let len = if b >= 0xF0 { n + 1 } else { usize::from(b / 3) % (n + 1) };
    let types: Vec<&DataType> = model.key_types().collect();
    let mut parts = || (0..len).map(|i| key_part(inp, types[i % n])).collect::<Vec<_>>();
    match b % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(parts()),
        _ => Bound::Excluded(parts()),
    }
}

fn bound_fits(model: &TableModel, b: &PartsBound) -> bool {
    match b {
        Bound::Unbounded => true,
        Bound::Included(p) | Bound::Excluded(p) => parts_fit(model, p),
    }
}

fn borrowed(b: &PartsBound) -> Bound<Vec<basalt::KeyValue<'_>>> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(p) => Bound::Included(p.iter().map(OwnedKeyValue::as_value).collect()),
        Bound::Excluded(p) => Bound::Excluded(p.iter().map(OwnedKeyValue::as_value).collect()),
    }
}

/// Whether a key lies within the bounds, which may be key prefixes: a
/// prefix compares with the key's first parts, so `Excluded(prefix)` as
/// the lower bound skips every key starting with it, `Included(prefix)`
/// as the upper bound keeps them all.
fn in_range(key: &[KeyCell], lower: &PartsBound, upper: &PartsBound) -> bool {
    let cmp = |p: &[OwnedKeyValue]| {
        let prefix: Vec<KeyCell> = p.iter().map(key_cell).collect();
        key[..prefix.len()].cmp(&prefix)
    };
    let above = match lower {
        Bound::Unbounded => true,
        Bound::Included(p) => cmp(p).is_ge(),
        Bound::Excluded(p) => cmp(p).is_gt(),
    };
    let below = match upper {
        Bound::Unbounded => true,
        Bound::Included(p) => cmp(p).is_le(),
        Bound::Excluded(p) => cmp(p).is_lt(),
    };
    above && below
}

const CMP_OPS: [CmpOp; 8] = [
    CmpOp::Eq,
    CmpOp::NotEq,
    CmpOp::Lt,
    CmpOp::LtEq,
    CmpOp::Gt,
    CmpOp::GtEq,
    CmpOp::IsNull,
    CmpOp::IsNotNull,
];

/// Type equality as batch checks see it (an empty time zone is none).
fn same_type(a: &DataType, b: &DataType) -> bool {
    let norm = |t: &DataType| match t {
        DataType::Timestamp(u, Some(tz)) if tz.is_empty() => DataType::Timestamp(*u, None),
        other => other.clone(),
    };
    norm(a) == norm(b)
}

/// A filter of up to three predicates: per predicate a column byte, an op
/// byte (`% 8` the op; `/ 8 % 16` the literal: 0 an unknown column, 1 a
/// null literal, 2 one of another type, 3 two values, else a value of the
/// column's type that follows). Returns the filter and whether the engine
/// must accept it.
fn decode_filter(schema: &SchemaRef, inp: &mut Input<'_>) -> (Filter, bool) {
    let mut valid = true;
    let mut predicates = Vec::new();
    for _ in 0..inp.byte() % (PREDICATES_MAX + 1) {
        let field = schema.field(usize::from(inp.byte()) % schema.fields().len());
        let ty = field.data_type();
        let o = inp.byte();
        let op = CMP_OPS[usize::from(o) % CMP_OPS.len()];
        let takes_no_literal = matches!(op, CmpOp::IsNull | CmpOp::IsNotNull);
        let mut column = field.name().clone();
        let literal: ArrayRef = match (o / 8) % 16 {
            0 => {
                column = "no such column".into();
                valid = false;
                array_of(ty, &[&cell(inp, ty, false)])
            }
            1 => {
                valid &= takes_no_literal;
                array_of(ty, &[&Cell::Null])
            }
            2 => {
                let mut other = column_type(usize::from(inp.byte()));
                if same_type(&other, ty) {
                    other = if matches!(ty, DataType::Int8) { DataType::Int16 } else { DataType::Int8 };
                }
                valid &= takes_no_literal;
                array_of(&other, &[&cell(inp, &other, false)])
            }
            3 => {
                let v = cell(inp, ty, false);
                valid &= takes_no_literal;
                array_of(ty, &[&v, &v])
            }
            _ => array_of(ty, &[&cell(inp, ty, false)]),
        };
        predicates.push(Predicate::new(column, op, literal));
    }
    (Filter::all(predicates), valid)
}

/// A filter in short: `column op [literal values]`, `and` between.
fn describe(filter: &Filter) -> String {
    let parts: Vec<String> = filter
        .predicates
        .iter()
        .map(|p| {
            format!("{} {:?} {:?} ({})", p.column, p.op, cells_of(p.literal.as_ref()), p.literal.data_type())
        })
        .collect();
    if parts.is_empty() { "none".into() } else { parts.join(" and ") }
}

/// The rows of `rows` a filter keeps, by Arrow's kernels over the values
/// as SQL compares them (a null comparison keeps no row; -0.0 = 0.0).
fn reference_filter(schema: &SchemaRef, rows: &[&[Cell]], filter: &Filter) -> Vec<Vec<Cell>> {
    use arrow_ord::cmp;
    let batch = batch_of(schema, rows);
    let compared: Vec<Vec<Cell>> = rows.iter().map(|r| r.iter().map(Cell::as_compared).collect()).collect();
    let compared = batch_of(schema, &compared.iter().map(Vec::as_slice).collect::<Vec<_>>());
    let mut keep = vec![true; rows.len()];
    for p in &filter.predicates {
        let col = compared.column(schema.index_of(&p.column).expect("a valid filter names a column"));
        let literal = cells_of(p.literal.as_ref()).iter().map(Cell::as_compared).collect::<Vec<_>>();
        // Made only for comparisons: IS NULL ignores its literal, which
        // may hold any number of values.
        let lit = || Scalar::new(array_of(p.literal.data_type(), &literal.iter().collect::<Vec<_>>()));
        let mask = match p.op {
            CmpOp::Eq => cmp::eq(col, &lit()),
            CmpOp::NotEq => cmp::neq(col, &lit()),
            CmpOp::Lt => cmp::lt(col, &lit()),
            CmpOp::LtEq => cmp::lt_eq(col, &lit()),
            CmpOp::Gt => cmp::gt(col, &lit()),
            CmpOp::GtEq => cmp::gt_eq(col, &lit()),
            CmpOp::IsNull => Ok((0..col.len()).map(|i| Some(col.is_null(i))).collect()),
            CmpOp::IsNotNull => Ok((0..col.len()).map(|i| Some(col.is_valid(i))).collect()),
        };
        let mask: BooleanArray =
            mask.unwrap_or_else(|e| panic!("arrow_ord::cmp on {}: {e}", col.data_type()));
        for (i, k) in keep.iter_mut().enumerate() {
            *k &= mask.is_valid(i) && mask.value(i);
        }
    }
    let kept = arrow_select::filter::filter_record_batch(&batch, &BooleanArray::from(keep))
        .expect("filtering the model's rows");
    rows_of(&kept)
}

/// A projection: a byte (`% 4` other than 0: none), then two bytes of a
/// column mask, listed from a rotation the first byte gives; `0xFC` adds
/// a column that does not exist. Returns the names and the indices.
fn decode_projection(schema: &SchemaRef, inp: &mut Input<'_>) -> Option<(Vec<String>, Vec<usize>)> {
    let b = inp.byte();
    if !b.is_multiple_of(4) {
        return None;
    }
    let mask = u16::from_le_bytes(inp.array());
    let n = schema.fields().len();
    let indices: Vec<usize> =
        (0..n).map(|i| (i + usize::from(b / 4)) % n).filter(|i| mask & (1 << i) != 0).collect();
    let mut names: Vec<String> = indices.iter().map(|&i| schema.field(i).name().clone()).collect();
    if b == 0xFC {
        names.push("no such column".into());
    }
    Some((names, indices))
}

/// A scan: its bounds, batch size, projection and filter from the input,
/// compared with the model's rows in range, filtered by Arrow's kernels
/// and projected. A scan the engine must refuse (a bound of a wrong type
/// or too long, an unknown column, a bad literal) must give an error,
/// never rows. Returns the rows the scan handed out without copying and
/// the blocks its zone maps skipped.
pub fn scan(
    table: &Table,
    model: &TableModel,
    rows: &Rows,
    inp: &mut Input<'_>,
    snapshot: Option<&Snapshot>,
) -> (u64, u64) {
    let schema = table.schema();
    let lower = decode_bound(model, inp);
    let upper = decode_bound(model, inp);
    let batch_size = BATCH_SIZES[usize::from(inp.byte()) % BATCH_SIZES.len()];
    let projection = decode_projection(&schema, inp);
    let (filter, filter_valid) = decode_filter(&schema, inp);
    let valid = bound_fits(model, &lower)
        && bound_fits(model, &upper)
        && filter_valid
        && projection.as_ref().is_none_or(|(names, indices)| names.len() == indices.len());
    let what = || {
        format!(
            "scan of {lower:?}..{upper:?}, batch size {batch_size}, projection {:?}, filter {}, snapshot {}",
            projection.as_ref().map(|p| &p.0),
            describe(&filter),
            snapshot.is_some()
        )
    };
    let opts = ScanOptions::default()
        .range((borrowed(&lower), borrowed(&upper)))
        .projection(projection.as_ref().map(|p| p.0.clone()))
        .filter((!filter.predicates.is_empty()).then(|| filter.clone()))
        .batch_size(batch_size)
        .snapshot(snapshot);
    let result = table.scan(opts);
    if !valid {
        // Refused when the scan starts or at the latest by its first batch.
        if let Ok(mut s) = result {
            let first = s.next().map(|b| b.map(|b| rows_of(&b)));
            assert!(matches!(first, Some(Err(_))), "{} was accepted: {first:?}", what());
        }
        return (0, 0);
    }
    let mut scan = result.unwrap_or_else(|e| panic!("{}: {e}", what()));
    let out_schema = match &projection {
        None => schema.clone(),
        Some((_, indices)) => Arc::new(schema.project(indices).expect("projecting the table's schema")),
    };
    assert_eq!(*scan.schema(), *out_schema, "{}: scan schema", what());
    let mut got = Vec::new();
    for batch in scan.by_ref() {
        let batch = batch.unwrap_or_else(|e| panic!("{}: {e}", what()));
        assert_eq!(*batch.schema(), *out_schema, "{}: batch schema", what());
        assert!(batch_size == 0 || batch.num_rows() <= batch_size, "{}: {} rows", what(), batch.num_rows());
        got.extend(rows_of(&batch));
    }
    let in_range: Vec<&[Cell]> =
        rows.iter().filter(|(k, _)| in_range(k, &lower, &upper)).map(|(_, r)| r.as_slice()).collect();
    let filtered = if filter.predicates.is_empty() {
        in_range.iter().map(|r| r.to_vec()).collect()
    } else {
        reference_filter(&schema, &in_range, &filter)
    };
    let want: Vec<Vec<Cell>> = match &projection {
        None => filtered,
        Some((_, indices)) => {
            filtered.iter().map(|r| indices.iter().map(|&i| r[i].clone()).collect()).collect()
        }
    };
    assert_rows(&got, &want, &what);
    (scan.rows_by_path().0, scan.blocks_skipped())
}

/// A full scan of the table and a point read of every row (of the first
/// 16), compared with the model.
pub fn check_all(table: &Table, model: &TableModel, what: &str) {
    let mut got = Vec::new();
    for batch in table.scan(ScanOptions::default()).unwrap_or_else(|e| panic!("{what}: full scan: {e}")) {
        got.extend(rows_of(&batch.unwrap_or_else(|e| panic!("{what}: full scan: {e}"))));
    }
    let want: Vec<Vec<Cell>> = model.rows.values().cloned().collect();
    assert_rows(&got, &want, &|| format!("{what}: full scan"));
    for row in model.rows.values().take(16) {
        let key: Vec<OwnedKeyValue> = model
            .spec
            .key
            .iter()
            .map(|&i| key_value(model.spec.schema.field(i).data_type(), &row[i]))
            .collect();
        let values: Vec<_> = key.iter().map(OwnedKeyValue::as_value).collect();
        let got = table.get(&values).unwrap_or_else(|e| panic!("{what}: Table::get of {key:?}: {e}"));
        assert_eq!(got.map(|b| rows_of(&b)), Some(vec![row.clone()]), "{what}: Table::get of {key:?}");
    }
}

/// Checks the table's schema and key as the engine reports them against
/// the ones it was created with (an empty time zone reads back as none).
pub fn check_created(table: &Table, spec: &TableSpec) {
    let schema = table.schema();
    let fields = schema.fields();
    assert_eq!(fields.len(), spec.schema.fields().len(), "created table's columns");
    for (got, want) in fields.iter().zip(spec.schema.fields()) {
        assert!(
            got.name() == want.name()
                && same_type(got.data_type(), want.data_type())
                && got.is_nullable() == want.is_nullable(),
            "created table has column {got:?}, asked for {want:?}"
        );
    }
    let key: Vec<String> = spec.key.iter().map(|&i| spec.schema.field(i).name().clone()).collect();
    assert_eq!(table.primary_key(), key, "created table's key");
}
