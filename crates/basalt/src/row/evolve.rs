//! Schema evolution: a table's columns change (`ADD`, `DROP`, `RENAME
//! COLUMN`) without rewriting a file. Each change makes a new version of the
//! table's layout; the MANIFEST keeps every version (`catalog.rs`), each SST
//! names the version it was written under, and a file of an older version
//! is read through a [`ColumnMap`] into the current one: a column it lacks
//! reads as null or as the default given when the column was added, a
//! column dropped since is skipped. Columns are matched by id, not name or
//! position, so a rename touches nothing stored and a column dropped and
//! added again under its old name is a new column.
//!
//! The memtables never hold rows of two versions: a change flushes them
//! first, and a write encoded under an older version is refused when it
//! reaches the write path (`db/alter.rs`). Compaction writes the current
//! version, so old versions fade from the files as they are rewritten.

use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, UInt32Array};
use arrow_schema::{Field, FieldRef, Schema};

use super::layout::TableLayout;
use crate::error::{Error, Result};

/// A change to a table's columns.
#[derive(Debug, Clone)]
pub enum ColumnChange {
    /// Appends a column. Rows written before it read `default` (a one-row,
    /// non-null array of the column's type), or null without one; a column
    /// that is not nullable needs a default.
    Add {
        /// The new column.
        field: FieldRef,
        /// What rows written before it read there.
        default: Option<ArrayRef>,
    },
    /// Drops a column that is neither a key column nor indexed.
    Drop {
        /// The column dropped.
        name: String,
    },
    /// Renames a column.
    Rename {
        /// Its name now.
        from: String,
        /// Its new name.
        to: String,
    },
}

/// Where a column of the current version comes from in an older one.
#[derive(Debug, Clone)]
pub enum Origin {
    /// The older version's column at this position.
    Column(usize),
    /// Not in the older version: every row reads this value (`None`: null).
    Fill(Option<ArrayRef>),
}

/// How the columns of an older version become the current version's.
#[derive(Debug, Clone)]
pub struct ColumnMap {
    origins: Vec<Origin>,
}

/// An earlier version of a table and its map into the current version.
#[derive(Debug)]
pub struct OlderVersion {
    pub layout: Arc<TableLayout>,
    /// The current version's column ids and defaults, shared by every
    /// older version: what its map is made from.
    current: Arc<CurrentColumns>,
    /// Made when a file of this version is first read: a change would
    /// otherwise cost a map per earlier version, and a table changed many
    /// times has many that no file holds any more.
    map: OnceLock<ColumnMap>,
}

/// The columns of a table's current version, as older versions map to them.
#[derive(Debug)]
struct CurrentColumns {
    ids: Vec<u32>,
    defaults: Vec<Option<ArrayRef>>,
}

impl OlderVersion {
    /// How this version's columns become the current version's.
    pub fn map(&self) -> &ColumnMap {
        self.map.get_or_init(|| ColumnMap::between(&self.layout, &self.current))
    }
}

impl ColumnMap {
    fn between(older: &TableLayout, current: &CurrentColumns) -> ColumnMap {
        // By id through a map: a search per column made a change of a
        // 1,000-column table cost a million comparisons per older version.
        let positions: std::collections::HashMap<u32, usize> =
            older.column_ids.iter().enumerate().map(|(p, &id)| (id, p)).collect();
        let origins: Vec<Origin> = current
            .ids
            .iter()
            .zip(&current.defaults)
            .map(|(id, default)| match positions.get(id) {
                Some(&p) => Origin::Column(p),
                None => Origin::Fill(default.clone()),
            })
            .collect();
        // Every current column has an origin, and each older column one
        // reads is one the older version has.
        debug_assert_eq!(origins.len(), current.ids.len(), "a column map misses current columns");
        debug_assert!(
            origins.iter().all(|o| !matches!(o, Origin::Column(p) if *p >= older.column_ids.len())),
            "a column map reads past the older version's columns"
        );
        ColumnMap { origins }
    }

    /// Where current column `c` comes from.
    pub fn origin(&self, c: usize) -> &Origin {
        &self.origins[c]
    }

    /// The current version's columns of `rows` rows, from the older
    /// version's `arrays` (one per older column).
    pub fn adapt(&self, current: &TableLayout, arrays: &[ArrayRef], rows: usize) -> Result<Vec<ArrayRef>> {
        self.origins
            .iter()
            .enumerate()
            .map(|(c, origin)| match origin {
                Origin::Column(p) => arrays.get(*p).cloned().ok_or_else(|| {
                    Error::corruption("", 0, format!("no column {p} in an older version's block"))
                }),
                Origin::Fill(value) => Ok(filled(current.schema().field(c), value.as_ref(), rows)),
            })
            .collect()
    }
}

/// `rows` copies of `value`, or `rows` nulls of the field's type.
fn filled(field: &Field, value: Option<&ArrayRef>, rows: usize) -> ArrayRef {
    match value {
        None => arrow_array::new_null_array(field.data_type(), rows),
        Some(v) => {
            let zeros = UInt32Array::from(vec![0u32; rows]);
            // A one-row array taken at row 0: cannot fail.
            arrow_select::take::take(v.as_ref(), &zeros, None)
                .unwrap_or_else(|_| arrow_array::new_null_array(field.data_type(), rows))
        }
    }
}

impl TableLayout {
    /// Which version of the table's schema this is.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// A hash of everything that decides how a row of this layout is
    /// stored: the schema (names, types, nullability) as an Arrow IPC
    /// schema, the primary key's columns and each column's id. An SST
    /// written outside the database records it (format 9), so an ingest
    /// refuses rows of another table whose numbers happen to agree.
    pub fn fingerprint(&self) -> u64 {
        let mut bytes = super::schema_to_ipc(self.schema()).unwrap_or_default();
        for &k in self.primary_key() {
            bytes.extend_from_slice(&(k as u32).to_le_bytes());
        }
        bytes.push(0xff);
        for id in &self.column_ids {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }

    /// Each column's stable id.
    pub fn column_ids(&self) -> &[u32] {
        &self.column_ids
    }

    /// Per column, the value of rows written before it was added.
    pub fn defaults(&self) -> &[Option<ArrayRef>] {
        &self.defaults
    }

    /// The earlier version `version` and its map into this one; `None` when
    /// `version` is this one. A version the table never had is corruption
    /// of whatever named it.
    pub fn older_version(&self, version: u32) -> Result<Option<&OlderVersion>> {
        if version == self.version {
            return Ok(None);
        }
        self.older.iter().find(|o| o.layout.version == version).map(Some).ok_or_else(|| {
            Error::corruption("", 0, format!("a file of schema version {version}, which the table never had"))
        })
    }

    /// The layout after `change`, checked: nothing about the table changes
    /// when this refuses.
    pub fn altered(&self, change: &ColumnChange) -> Result<TableLayout> {
        let fields: Vec<FieldRef> = self.schema().fields().iter().cloned().collect();
        let position = |name: &str| {
            fields
                .iter()
                .position(|f| f.name() == name)
                .ok_or_else(|| Error::InvalidArgument(format!("no column {name}")))
        };
        let key_names: Vec<&str> = self.primary_key.iter().map(|&i| fields[i].name().as_str()).collect();
        let (mut fields, mut ids, mut defaults) =
            (fields.clone(), self.column_ids.clone(), self.defaults.clone());
        match change {
            ColumnChange::Add { field, default } => {
                if fields.iter().any(|f| f.name() == field.name()) {
                    return Err(Error::InvalidArgument(format!("column {} already exists", field.name())));
                }
                if let Some(d) = default {
                    if d.len() != 1 || d.null_count() != 0 {
                        return Err(Error::InvalidArgument(format!(
                            "the default of column {} must be one non-null value, got {} values ({} null)",
                            field.name(),
                            d.len(),
                            d.null_count()
                        )));
                    }
                    if !super::layout::same_type(d.data_type(), field.data_type()) {
                        return Err(Error::SchemaMismatch(format!(
                            "the default of column {} has type {}, the column {}",
                            field.name(),
                            d.data_type(),
                            field.data_type()
                        )));
                    }
                } else if !field.is_nullable() {
                    return Err(Error::InvalidArgument(format!(
                        "column {} is NOT NULL without a default: the rows already there would have no value",
                        field.name()
                    )));
                }
                fields.push(field.clone());
                ids.push(self.next_column_id());
                defaults.push(default.clone());
            }
            ColumnChange::Drop { name } => {
                let p = position(name)?;
                if self.primary_key.contains(&p) {
                    return Err(Error::InvalidArgument(format!(
                        "column {name} is part of the primary key ({}): a row's key cannot change, so key columns cannot be dropped",
                        key_names.join(", ")
                    )));
                }
                fields.remove(p);
                ids.remove(p);
                defaults.remove(p);
            }
            ColumnChange::Rename { from, to } => {
                let p = position(from)?;
                if fields.iter().any(|f| f.name() == to) {
                    return Err(Error::InvalidArgument(format!("column {to} already exists")));
                }
                fields[p] = Arc::new(fields[p].as_ref().clone().with_name(to.clone()));
            }
        }
        let key_ids: Vec<u32> = self.primary_key.iter().map(|&i| self.column_ids[i]).collect();
        let primary_key: Vec<usize> =
            key_ids.iter().filter_map(|id| ids.iter().position(|i| i == id)).collect();
        let schema = Arc::new(Schema::new_with_metadata(fields, self.schema().metadata().clone()));
        let next = self.next_version(schema, &primary_key, ids, defaults)?;
        self.debug_assert_altered_into(&next);
        Ok(next)
    }

    /// What a change keeps true of the layout it makes (`next_version`
    /// checks a MANIFEST's record against less: its ids may come in any
    /// order): the version is the next one, column ids are unique and
    /// rising and below the next id, and defaults have their column's type.
    fn debug_assert_altered_into(&self, next: &TableLayout) {
        debug_assert_eq!(next.version, self.version + 1, "an altered layout skips a version");
        debug_assert!(
            next.column_ids.windows(2).all(|w| w[0] < w[1]),
            "column ids not unique and rising: {:?}",
            next.column_ids
        );
        debug_assert!(
            next.column_ids.last().is_none_or(|&last| last < next.column_id_next),
            "a column id at or above the next one"
        );
        debug_assert!(
            next.defaults.iter().zip(next.schema().fields()).all(|(d, f)| d
                .as_ref()
                .is_none_or(|d| super::layout::same_type(d.data_type(), f.data_type()))),
            "a default of another type than its column"
        );
    }

    /// The id a column added next takes: above every id of every version,
    /// so a file never mistakes a new column for a dropped one.
    fn next_column_id(&self) -> u32 {
        self.column_id_next
    }

    /// The version after this one, with `schema`, key and column ids (as
    /// [`TableLayout::altered`] made them, or as the MANIFEST recorded
    /// them): checked against this version, so that a damaged record cannot
    /// make files read wrongly. A column kept keeps its type; the key keeps
    /// its columns.
    pub fn next_version(
        &self,
        schema: arrow_schema::SchemaRef,
        primary_key: &[usize],
        column_ids: Vec<u32>,
        defaults: Vec<Option<ArrayRef>>,
    ) -> Result<TableLayout> {
        let mut next = TableLayout::new(schema, primary_key)?;
        let bad =
            |what: String| Error::InvalidArgument(format!("schema version {}: {what}", self.version + 1));
        if column_ids.len() != next.columns.len() || defaults.len() != next.columns.len() {
            return Err(bad(format!("{} columns, {} ids", next.columns.len(), column_ids.len())));
        }
        let first_new = self.next_column_id();
        let positions: std::collections::HashMap<u32, usize> =
            self.column_ids.iter().enumerate().map(|(p, &id)| (id, p)).collect();
        let mut seen = std::collections::HashSet::with_capacity(column_ids.len());
        for (c, &id) in column_ids.iter().enumerate() {
            if !seen.insert(id) {
                return Err(bad(format!("column id {id} twice")));
            }
            match positions.get(&id).copied() {
                Some(p) => {
                    let (was, is) = (self.schema().field(p), next.schema().field(c));
                    if !super::layout::same_type(was.data_type(), is.data_type()) {
                        return Err(bad(format!("column {} changes type", is.name())));
                    }
                }
                None if id < first_new => return Err(bad(format!("column id {id} reused"))),
                None => {}
            }
        }
        let old_key: Vec<u32> = self.primary_key.iter().map(|&i| self.column_ids[i]).collect();
        let new_key: Vec<u32> = primary_key.iter().map(|&i| column_ids[i]).collect();
        if old_key != new_key {
            return Err(bad("the primary key changes".into()));
        }
        next.version = self.version + 1;
        next.column_id_next = column_ids.iter().map(|&id| id.saturating_add(1)).fold(first_new, u32::max);
        let current = Arc::new(CurrentColumns { ids: column_ids.clone(), defaults: defaults.clone() });
        next.column_ids = column_ids;
        next.defaults = defaults;
        let mut bare = self.clone();
        bare.older = Arc::default();
        let older = self.older.iter().map(|o| o.layout.clone()).chain([Arc::new(bare)]);
        next.older = Arc::new(
            older
                .map(|layout| OlderVersion { layout, current: current.clone(), map: OnceLock::new() })
                .collect(),
        );
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::DataType;

    fn base() -> TableLayout {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("a", DataType::Utf8, true),
            Field::new("b", DataType::Int64, true),
        ]));
        TableLayout::new(schema, &[0]).expect("valid")
    }

    fn add(name: &str, default: Option<i64>) -> ColumnChange {
        ColumnChange::Add {
            field: Arc::new(Field::new(name, DataType::Int64, default.is_none())),
            default: default.map(|d| Arc::new(Int64Array::from(vec![d])) as ArrayRef),
        }
    }

    #[test]
    fn an_added_column_reads_as_its_default_from_older_rows() {
        let v0 = base();
        let v1 = v0.altered(&add("c", Some(7))).expect("valid");
        assert_eq!((v1.version(), v1.column_ids()), (1, &[0, 1, 2, 3][..]));
        let old = v1.older_version(0).expect("valid").expect("valid");
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec![Some("x"), None])),
            Arc::new(Int64Array::from(vec![None, Some(5)])),
        ];
        let got = old.map().adapt(&v1, &arrays, 2).expect("valid");
        assert_eq!(got[3].as_ref(), &Int64Array::from(vec![7, 7]) as &dyn Array);
    }

    #[test]
    fn a_dropped_and_re_added_name_is_a_new_column() {
        let v1 = base().altered(&ColumnChange::Drop { name: "b".into() }).expect("valid");
        let v2 = v1.altered(&add("b", None)).expect("valid");
        assert_eq!(v2.column_ids(), &[0, 1, 3]);
        let from_v0 = v2.older_version(0).expect("valid").expect("valid");
        assert!(matches!(from_v0.map().origin(2), Origin::Fill(None)));
        assert!(matches!(from_v0.map().origin(1), Origin::Column(1)));
    }

    #[test]
    fn refusals_change_nothing_and_say_why() {
        let v0 = base();
        let err = |c: ColumnChange| v0.altered(&c).expect_err("refused").to_string();
        assert!(err(ColumnChange::Drop { name: "id".into() }).contains("primary key"));
        assert!(err(ColumnChange::Drop { name: "zz".into() }).contains("no column zz"));
        assert!(err(add("a", None)).contains("already exists"));
        let not_null =
            ColumnChange::Add { field: Arc::new(Field::new("n", DataType::Int64, false)), default: None };
        assert!(err(not_null).contains("NOT NULL"));
        let wrong = ColumnChange::Add {
            field: Arc::new(Field::new("n", DataType::Int64, true)),
            default: Some(Arc::new(StringArray::from(vec!["x"]))),
        };
        assert!(err(wrong).contains("has type Utf8"));
        assert!(err(ColumnChange::Rename { from: "a".into(), to: "b".into() }).contains("already exists"));
        assert_eq!(v0.version(), 0);
    }

    #[test]
    fn a_record_that_reuses_an_id_or_changes_a_type_is_refused() {
        let v0 = base();
        let v1 = v0.altered(&ColumnChange::Drop { name: "b".into() }).expect("valid");
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("a", DataType::Utf8, true),
            Field::new("b2", DataType::Int64, true),
        ]));
        let reused = v1.next_version(schema.clone(), &[0], vec![0, 1, 2], vec![None; 3]);
        assert!(reused.expect_err("refused").to_string().contains("reused"));
        let retyped = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("a", DataType::Int64, true),
        ]));
        assert!(
            v1.next_version(retyped, &[0], vec![0, 1], vec![None; 2])
                .expect_err("refused")
                .to_string()
                .contains("type")
        );
    }

    /// A table changed hundreds of times: no older version's map is made
    /// until a file of it is read, ids keep rising past every dropped one,
    /// and the map of the first version is still right.
    #[test]
    fn a_long_history_makes_maps_only_when_read_and_never_reuses_an_id() {
        let mut v = base();
        for i in 0..400 {
            let change = if i % 2 == 0 {
                add(&format!("c{i}"), Some(i))
            } else {
                ColumnChange::Drop { name: format!("c{}", i - 1) }
            };
            v = v.altered(&change).expect("valid");
        }
        v = v.altered(&add("last", None)).expect("valid");
        assert_eq!(v.version(), 401);
        assert!(v.older.iter().all(|o| o.map.get().is_none()), "maps made before any read");
        assert_eq!(v.column_ids(), &[0, 1, 2, 203], "200 columns were added and dropped before");
        let from_v0 = v.older_version(0).expect("valid").expect("older");
        assert!(matches!(from_v0.map().origin(1), Origin::Column(1)));
        assert!(matches!(from_v0.map().origin(3), Origin::Fill(None)));
        let from_v1 = v.older_version(1).expect("valid").expect("older");
        assert_eq!(from_v1.layout.column_ids(), &[0, 1, 2, 3]);
        assert!(matches!(from_v1.map().origin(3), Origin::Fill(None)), "c0 (id 3) was dropped: not `last`");
        assert_eq!(v.older.iter().filter(|o| o.map.get().is_some()).count(), 2);
    }
}
