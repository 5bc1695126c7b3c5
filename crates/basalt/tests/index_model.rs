//! Secondary indexes against an oracle, over RANDOM schemas: indexes of one
//! to three columns of every key-encodable type (integers with negatives,
//! floats with `-0.0` and NaN of both signs, strings and bytes with NUL
//! bytes, booleans, dates, timestamps), nullable columns, indexes over
//! primary-key columns, included (covering) columns of every type, unique
//! indexes. Random upserts that change indexed values, deletes, flushes,
//! compactions, reopens, snapshots, index creation and drops in the middle
//! of the sequence, unique violations; every `lookup` (equality, prefix,
//! range, projection, limit, reverse) and `count` must equal a filter over
//! a `BTreeMap` model of the table, ordered as the key codec documents.
//!
//! A failure prints its seed; `BASALT_SEED=<seed>` replays it.

mod common;

use std::cmp::Ordering;
use std::ops::Bound;

use arrow_schema::DataType;
use basalt::testing::MemFs;
use basalt::{
    CmpOp, Db, Error, Filter, IndexOptions, IndexPredicate, KeyValue, LookupOptions, Options, Predicate,
    ScanOptions, ScanPlan, Table, TableOptions,
};
use common::schema_gen::{self, Cell, Shape, TableSpec, batch_of, rows_of, view_cells};
use common::table_oracle::{
    OracleKey, PredSpec, Rows, ScanPlan as OraclePlan, expected_scan, in_range, prefix_cmp,
};
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};

/// One index of the model.
#[derive(Debug, Clone)]
struct IndexSpec {
    name: String,
    columns: Vec<usize>,
    include: Vec<usize>,
    unique: bool,
}

/// Whether a column can be indexed (has a key encoding).
fn indexable(data_type: &DataType) -> bool {
    !matches!(data_type, DataType::Decimal128(_, _))
}

/// A random index over `spec`'s columns.
fn random_index(rng: &mut StdRng, spec: &TableSpec, n: usize) -> IndexSpec {
    let mut candidates: Vec<usize> =
        (0..spec.schema.fields().len()).filter(|&i| indexable(spec.schema.field(i).data_type())).collect();
    candidates.shuffle(rng);
    let width = rng.random_range(1..=3.min(candidates.len()));
    let columns = candidates[..width].to_vec();
    let include = (0..spec.schema.fields().len())
        .filter(|i| !columns.contains(i) && !spec.key.contains(i) && rng.random_bool(0.3))
        .collect();
    IndexSpec { name: format!("ix{n}"), columns, include, unique: rng.random_bool(0.25) }
}

/// Small pools of values for every column, so indexed values repeat.
fn value_pools(rng: &mut StdRng, spec: &TableSpec) -> Vec<Vec<Cell>> {
    spec.schema
        .fields()
        .iter()
        .map(|f| {
            let mut pool: Vec<Cell> =
                (0..rng.random_range(2..6)).map(|_| schema_gen::random_value(rng, f.data_type())).collect();
            if f.is_nullable() {
                pool.push(Cell::Null);
            }
            pool
        })
        .collect()
}

/// A row whose non-key values come mostly from the pools.
fn random_row(rng: &mut StdRng, spec: &TableSpec, pools: &[Vec<Cell>]) -> Vec<Cell> {
    let mut row = spec.random_row(rng);
    for (i, cell) in row.iter_mut().enumerate() {
        if !spec.key.contains(&i) && rng.random_bool(0.8) {
            *cell = pools[i][rng.random_range(0..pools[i].len())].clone();
        }
    }
    row
}

/// The order of index entries: indexed values (nulls first, floats
/// canonical), then the primary key.
fn entry_cmp(ix: &IndexSpec, spec: &TableSpec, a: &[Cell], b: &[Cell]) -> Ordering {
    let values = |r: &[Cell]| ix.columns.iter().map(|&c| r[c].clone()).collect::<Vec<_>>();
    prefix_cmp(&values(a), &values(b)).then_with(|| OracleKey(spec.key_of(a)).cmp(&OracleKey(spec.key_of(b))))
}

/// The values of a predicate as the API takes them.
fn key_values(cells: &[Cell]) -> Vec<Option<KeyValue<'_>>> {
    cells.iter().map(|c| if *c == Cell::Null { None } else { Some(c.key_value()) }).collect()
}

/// A predicate of cells, and whether an entry's values satisfy it.
#[derive(Debug, Clone)]
enum Pred {
    Eq(Vec<Cell>),
    Prefix(Vec<Cell>),
    Range(Bound<Vec<Cell>>, Bound<Vec<Cell>>),
}

impl Pred {
    fn matches(&self, values: &[Cell]) -> bool {
        match self {
            Pred::Eq(v) | Pred::Prefix(v) => prefix_cmp(values, v).is_eq(),
            Pred::Range(lo, hi) => in_range(values, &(lo.clone(), hi.clone())),
        }
    }

    fn api(&self) -> IndexPredicate<'_> {
        fn bound(b: &Bound<Vec<Cell>>) -> Bound<Vec<Option<KeyValue<'_>>>> {
            match b {
                Bound::Unbounded => Bound::Unbounded,
                Bound::Included(v) => Bound::Included(key_values(v)),
                Bound::Excluded(v) => Bound::Excluded(key_values(v)),
            }
        }
        match self {
            Pred::Eq(v) => IndexPredicate::Eq(key_values(v)),
            Pred::Prefix(v) => IndexPredicate::Prefix(key_values(v)),
            Pred::Range(lo, hi) => IndexPredicate::Range(bound(lo), bound(hi)),
        }
    }
}

/// A tuple of `n` leading indexed values from a row (or the pools).
fn random_tuple(
    rng: &mut StdRng,
    ix: &IndexSpec,
    rows: &[&Vec<Cell>],
    pools: &[Vec<Cell>],
    n: usize,
) -> Vec<Cell> {
    let source = rows.choose(rng).map(|r| (*r).clone());
    ix.columns[..n]
        .iter()
        .map(|&c| match &source {
            Some(r) if rng.random_bool(0.8) => r[c].clone(),
            _ => pools[c][rng.random_range(0..pools[c].len())].clone(),
        })
        .collect()
}

/// A predicate drawn from values the rows hold (or the pools).
fn random_pred(rng: &mut StdRng, ix: &IndexSpec, rows: &Rows, pools: &[Vec<Cell>]) -> Pred {
    let rows: Vec<&Vec<Cell>> = rows.values().collect();
    let width = ix.columns.len();
    match rng.random_range(0..3) {
        0 => Pred::Eq(random_tuple(rng, ix, &rows, pools, width)),
        1 => {
            let n = rng.random_range(1..=width);
            Pred::Prefix(random_tuple(rng, ix, &rows, pools, n))
        }
        _ => {
            let bound = |rng: &mut StdRng| {
                let n = rng.random_range(1..=width);
                match rng.random_range(0..3) {
                    0 => Bound::Unbounded,
                    1 => Bound::Included(random_tuple(rng, ix, &rows, pools, n)),
                    _ => Bound::Excluded(random_tuple(rng, ix, &rows, pools, n)),
                }
            };
            let lo = bound(rng);
            Pred::Range(lo, bound(rng))
        }
    }
}

/// Drops nulls from a non-nullable column's values (the API refuses a
/// null there), keeping the predicate meaningful.
fn fits_columns(pred: &Pred, ix: &IndexSpec, spec: &TableSpec) -> bool {
    let ok = |v: &Vec<Cell>| {
        v.iter().zip(&ix.columns).all(|(c, &i)| *c != Cell::Null || spec.schema.field(i).is_nullable())
    };
    match pred {
        Pred::Eq(v) | Pred::Prefix(v) => ok(v),
        Pred::Range(lo, hi) => [lo, hi].iter().all(|b| match b {
            Bound::Included(v) | Bound::Excluded(v) => ok(v),
            Bound::Unbounded => true,
        }),
    }
}

/// Whether a unique index holds two rows with equal non-null values.
fn violates(ix: &IndexSpec, rows: &Rows) -> bool {
    let mut tuples: Vec<Vec<Cell>> = rows
        .values()
        .map(|r| ix.columns.iter().map(|&c| r[c].clone()).collect::<Vec<_>>())
        .filter(|t| !t.contains(&Cell::Null))
        .collect();
    tuples.sort_by(|a, b| prefix_cmp(a, b));
    tuples.windows(2).any(|w| prefix_cmp(&w[0], &w[1]).is_eq())
}

/// A bound of cells as a bound of key values.
fn kv(b: &Bound<Vec<Cell>>) -> Bound<Vec<KeyValue<'_>>> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(t) => Bound::Included(t.iter().map(Cell::key_value).collect()),
        Bound::Excluded(t) => Bound::Excluded(t.iter().map(Cell::key_value).collect()),
    }
}

struct Case {
    rng: StdRng,
    fs: MemFs,
    opts: Options,
    spec: TableSpec,
    pools: Vec<Vec<Cell>>,
    db: Option<Db>,
    table: Option<Table>,
    rows: Rows,
    indexes: Vec<IndexSpec>,
    created: usize,
}

impl Case {
    fn table(&self) -> &Table {
        self.table.as_ref().expect("open")
    }

    fn reopen(&mut self) {
        self.table = None;
        if let Some(db) = self.db.take() {
            db.close().expect("close");
        }
        let db = Db::open("/db", self.opts.clone()).expect("reopen");
        self.table = Some(db.table("t").expect("table"));
        self.db = Some(db);
    }

    fn write(&mut self) {
        let n = self.rng.random_range(1..6);
        let batch: Vec<Vec<Cell>> =
            (0..n).map(|_| random_row(&mut self.rng, &self.spec, &self.pools)).collect();
        let mut after = self.rows.clone();
        for r in &batch {
            after.insert(OracleKey(self.spec.key_of(r)), r.clone());
        }
        let refused: Vec<String> = self
            .indexes
            .iter()
            .filter(|ix| ix.unique && violates(ix, &after))
            .map(|ix| ix.name.clone())
            .collect();
        let got = self.table().write(&batch_of(&self.spec.schema, &batch));
        match got {
            Ok(()) if refused.is_empty() => self.rows = after,
            Err(Error::UniqueViolation { index, .. }) if refused.contains(&index) => {}
            got => panic!("write of {batch:?}: expected refusal by one of {refused:?}, got {got:?}"),
        }
    }

    fn delete(&mut self) {
        let keys: Vec<Vec<Cell>> = (0..self.rng.random_range(1..4))
            .map(|_| match self.rows.keys().collect::<Vec<_>>().choose(&mut self.rng) {
                Some(k) if self.rng.random_bool(0.8) => k.0.clone(),
                _ => self.spec.random_key(&mut self.rng),
            })
            .collect();
        self.table().delete(&batch_of(&self.spec.key_schema(), &keys)).expect("delete");
        for k in keys {
            self.rows.remove(&OracleKey(k));
        }
    }

    /// A range delete between two keys (present ones mostly), or from one
    /// on: the rows go, and with them their index entries.
    fn delete_range(&mut self) {
        let pick = |rng: &mut StdRng| match self.rows.keys().collect::<Vec<_>>().choose(rng) {
            Some(k) if rng.random_bool(0.8) => k.0.clone(),
            _ => self.spec.random_key(rng),
        };
        let (a, b) = (pick(&mut self.rng), pick(&mut self.rng));
        let hi = if self.rng.random_bool(0.2) { Bound::Unbounded } else { Bound::Included(b) };
        let range = (Bound::Included(a), hi);
        self.table().delete_range((kv(&range.0), kv(&range.1))).expect("delete_range");
        self.rows.retain(|k, _| !in_range(&k.0, &range));
    }

    fn create_index(&mut self) {
        let ix = random_index(&mut self.rng, &self.spec, self.created);
        self.created += 1;
        let names = |cols: &[usize]| cols.iter().map(|&c| self.spec.schema.field(c).name().clone()).collect();
        let columns: Vec<String> = names(&ix.columns);
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        let opts = IndexOptions::default().unique(ix.unique).include(names(&ix.include));
        let got = self.table().create_index(&ix.name, &columns, opts);
        if ix.unique && violates(&ix, &self.rows) {
            assert!(matches!(got, Err(Error::UniqueViolation { .. })), "{ix:?}: {got:?}");
            assert!(self.table().indexes().iter().all(|i| i.name != ix.name), "a refused index stays");
        } else {
            got.unwrap_or_else(|e| panic!("create {ix:?}: {e}"));
            self.indexes.push(ix);
        }
    }

    fn check(&mut self) {
        let listed: Vec<String> = self.table().indexes().into_iter().map(|i| i.name).collect();
        let want: Vec<String> = self.indexes.iter().map(|i| i.name.clone()).collect();
        assert_eq!(listed, want, "indexes listed");
        for ix in self.indexes.clone() {
            for _ in 0..3 {
                let pred = random_pred(&mut self.rng, &ix, &self.rows, &self.pools);
                if !fits_columns(&pred, &ix, &self.spec) {
                    let got = self.table().lookup(&ix.name, pred.api(), LookupOptions::default());
                    assert!(
                        matches!(got, Err(Error::InvalidArgument(_))),
                        "null in a non-nullable column: {got:?}"
                    );
                    continue;
                }
                self.check_lookup(&ix, &pred);
            }
            self.check_planned_scan(&ix);
        }
    }

    /// A filtered scan whose predicates pin an index's leading columns
    /// answers exactly as the oracle's filter, whichever plan it took; a
    /// selective one takes the index.
    fn check_planned_scan(&mut self, ix: &IndexSpec) {
        let rows: Vec<&Vec<Cell>> = self.rows.values().collect();
        let first = ix.columns[0];
        let pick = |rng: &mut StdRng, c: usize| match rows.choose(rng) {
            Some(r) if rng.random_bool(0.8) => r[c].clone(),
            _ => self.pools[c][rng.random_range(0..self.pools[c].len())].clone(),
        };
        let mut preds = Vec::new();
        if self.rng.random_bool(0.6) {
            for &c in &ix.columns[..self.rng.random_range(1..=ix.columns.len())] {
                let literal = pick(&mut self.rng, c);
                if literal == Cell::Null {
                    break;
                }
                preds.push(PredSpec { column: c, op: CmpOp::Eq, literal });
            }
        } else {
            for op in [CmpOp::GtEq, CmpOp::Gt, CmpOp::Lt, CmpOp::LtEq] {
                let literal = pick(&mut self.rng, first);
                if literal != Cell::Null && self.rng.random_bool(0.5) {
                    preds.push(PredSpec { column: first, op, literal });
                }
            }
        }
        // Now and then a predicate on another column too.
        if self.rng.random_bool(0.3) {
            let c = self.rng.random_range(0..self.spec.schema.fields().len());
            let literal = pick(&mut self.rng, c);
            if literal != Cell::Null
                && !matches!(self.spec.schema.field(c).data_type(), DataType::Decimal128(_, _))
            {
                preds.push(PredSpec { column: c, op: CmpOp::GtEq, literal });
            }
        }
        if preds.is_empty() {
            return;
        }
        let plan = OraclePlan {
            range: (Bound::Unbounded, Bound::Unbounded),
            preds: Some(preds.clone()),
            projection: None,
            batch_size: 0,
        };
        let expected = expected_scan(&self.spec, &self.rows, &plan);
        let filter = Filter::all(
            preds
                .iter()
                .map(|p| {
                    let field = self.spec.schema.field(p.column);
                    Predicate::new(field.name(), p.op, schema_gen::array_of(field.data_type(), &[&p.literal]))
                })
                .collect(),
        );
        let scan = self.table().scan(ScanOptions::default().filter(Some(filter))).expect("scan");
        let chose = scan.plan().clone();
        let mut got = Vec::new();
        for batch in scan {
            got.extend(rows_of(&batch.expect("scan batch")));
        }
        assert_eq!(got, expected, "planned scan {preds:?} took {chose:?}");
        if let ScanPlan::Index { entries, .. } = chose {
            assert!(entries >= expected.len() as u64, "an index plan fetched fewer rows than match");
        }
    }

    fn check_lookup(&mut self, ix: &IndexSpec, pred: &Pred) {
        let mut expected: Vec<Vec<Cell>> = self
            .rows
            .values()
            .filter(|r| pred.matches(&ix.columns.iter().map(|&c| r[c].clone()).collect::<Vec<_>>()))
            .cloned()
            .collect();
        expected.sort_by(|a, b| entry_cmp(ix, &self.spec, a, b));
        let count = self.table().count(&ix.name, pred.api()).expect("count");
        assert_eq!(count, expected.len() as u64, "count of {pred:?} on {ix:?}");
        let reverse = self.rng.random_bool(0.3);
        if reverse {
            expected.reverse();
        }
        let limit = self.rng.random_bool(0.3).then(|| self.rng.random_range(0..4));
        if let Some(l) = limit {
            expected.truncate(l);
        }
        let width = self.spec.schema.fields().len();
        let projection: Option<Vec<usize>> = match self.rng.random_range(0..3) {
            0 => None,
            // The covering columns: indexed, key and included.
            1 => Some(ix.columns.iter().chain(&self.spec.key).chain(&ix.include).copied().collect()),
            _ => Some((0..width).filter(|_| self.rng.random_bool(0.5)).collect()),
        };
        let mut opts = LookupOptions::default().reverse(reverse).limit(limit);
        if let Some(p) = &projection {
            let mut seen = Vec::new();
            let p: Vec<usize> = p
                .iter()
                .copied()
                .filter(|c| {
                    !seen.contains(c) && {
                        seen.push(*c);
                        true
                    }
                })
                .collect();
            opts =
                opts.projection(Some(p.iter().map(|&c| self.spec.schema.field(c).name().clone()).collect()));
            expected = expected.into_iter().map(|r| p.iter().map(|&c| r[c].clone()).collect()).collect();
        }
        // The same lookup as row views, reading the columns projected.
        let columns: Vec<usize> = match &opts.projection {
            None => (0..width).collect(),
            Some(names) => names.iter().map(|n| self.spec.schema.index_of(n).expect("column")).collect(),
        };
        let mut viewed = Vec::new();
        let n = self
            .table()
            .lookup_with(&ix.name, pred.api(), opts.clone(), |row| {
                viewed.push(view_cells(row, &columns));
                Ok::<_, basalt::Error>(())
            })
            .unwrap_or_else(|e| panic!("lookup_with {pred:?} on {ix:?} in {:?}: {e}", self.spec.schema));
        assert_eq!(n, viewed.len(), "rows lookup_with counted");
        assert_eq!(
            viewed, expected,
            "lookup_with {pred:?} on {ix:?} (projection {projection:?}, limit {limit:?}, reverse {reverse})"
        );
        let got = self.table().lookup(&ix.name, pred.api(), opts).unwrap_or_else(|e| {
            panic!("lookup {pred:?} on {ix:?} (projection {projection:?}) in {:?}: {e}", self.spec.schema)
        });
        let got = rows_of(&got);
        assert_eq!(
            got, expected,
            "lookup {pred:?} on {ix:?} (projection {projection:?}, limit {limit:?}, reverse {reverse})"
        );
    }
}

fn run_case(seed: u64) {
    let mut rng = common::rng(seed);
    let spec = TableSpec::random(&mut rng, Shape { columns: (2, 7), key_only: false });
    let pools = value_pools(&mut rng, &spec);
    let fs = MemFs::new();
    // A small write buffer also makes index builds sort in several runs
    // (each takes up to that much).
    let write_buffer = rng.random_range(2_000..200_000);
    let opts = common::small_options(&fs, &mut rng).write_buffer_bytes_max(write_buffer);
    let db = Db::open("/db", opts.clone()).expect("open");
    let table = db
        .create_table(
            "t",
            spec.schema.clone(),
            &spec.key_names().iter().map(String::as_str).collect::<Vec<_>>(),
            TableOptions::default(),
        )
        .expect("create");
    let mut case = Case {
        rng,
        fs,
        opts,
        spec,
        pools,
        db: Some(db),
        table: Some(table),
        rows: Rows::new(),
        indexes: Vec::new(),
        created: 0,
    };
    let _ = &case.fs;
    case.create_index();
    for step in 0..120 {
        match case.rng.random_range(0..100) {
            0..50 => case.write(),
            50..60 => case.delete(),
            60..65 => case.delete_range(),
            65..70 => case.db.as_ref().expect("open").flush().expect("flush"),
            70..73 => case.table().compact().expect("compact"),
            73..76 => case.reopen(),
            76..80 => case.create_index(),
            80..82 if !case.indexes.is_empty() => {
                let i = case.rng.random_range(0..case.indexes.len());
                let ix = case.indexes.remove(i);
                case.table().drop_index(&ix.name).expect("drop index");
            }
            _ => {}
        }
        if step % 4 == 0 {
            case.check();
        }
    }
    case.check();
}

#[test]
fn indexes_match_a_model_over_random_schemas() {
    common::run_seeded("indexes_match_a_model_over_random_schemas", 24, run_case);
}
