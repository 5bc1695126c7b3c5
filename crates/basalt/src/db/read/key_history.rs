//! A key's history: its versions newest first, each with its seqno,
//! commit time and whether it was a delete (ResilientDB's `GetHistory` and
//! `GetTopHistory`), for a keyspace as values and for a table as rows.
//!
//! What is returned is exactly what the tree's window guarantees to keep
//! (`read/history.rs`), never a version compaction may have collected in
//! part: with a duration, every version above the oldest readable point
//! and the one the key had at it; with a count, the key's newest that
//! many versions committed after the window's `since` (and the one it had
//! then). Anything older may still lie in a file, but it is not shown:
//! a history with holes would read as a history that never happened.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arrow_array::{ArrayRef, BooleanArray, RecordBatch, TimestampMillisecondArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;

use std::ops::Bound;
use std::path::Path;

use crate::codec::internal::{Kind, SeqNo, unpack_trailer};
use crate::codec::key;
use crate::db::read::cursor::{Source, TreeCursor};
use crate::db::read::point::{Value, older_row};
use crate::db::state::inner::DbInner;
use crate::db::state::versions::SuperVersion;
use crate::error::{Error, Result};
use crate::ids::TreeId;
use crate::row::decode::ColumnBuilder;
use crate::row::layout::{ColumnSource, TableLayout, key_type_of};
use crate::sst::iter::Blocks;

crate::options::option_struct! {
/// Bounds of a key's history read. Versions come newest first.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryOptions {
    /// At most this many versions.
    pub limit: Option<usize>,
    /// Only versions with a seqno at or above this.
    pub min_seqno: Option<u64>,
    /// Only versions with a seqno at or below this (default: the latest).
    pub max_seqno: Option<u64>,
    /// Only versions committed at or after this time.
    pub since: Option<SystemTime>,
    /// Only versions committed at or before this time.
    pub until: Option<SystemTime>,
}
}

/// One version of a key-value key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVersion {
    /// The seqno of the write.
    pub seqno: u64,
    /// When it was committed (to the millisecond), if on record.
    pub commit_time: Option<SystemTime>,
    /// The value written; `None` for a delete.
    pub value: Option<Bytes>,
}

/// Names of the columns a table's history puts before the row's.
pub const HISTORY_SEQNO: &str = "_seqno";
/// See [`HISTORY_SEQNO`].
pub const HISTORY_COMMIT_TIME: &str = "_commit_time";
/// See [`HISTORY_SEQNO`].
pub const HISTORY_DELETED: &str = "_deleted";

impl DbInner {
    /// Walks the versions of `user_key` in `tree` that its window shows,
    /// newest first, within `opts`; `found` gets each with its value.
    /// Refused for a tree keeping no history.
    fn walk_history(
        &self,
        view: (SeqNo, &SuperVersion),
        (tree, name): (TreeId, &str),
        user_key: &[u8],
        layout: Option<&TableLayout>,
        opts: &HistoryOptions,
        found: &mut dyn FnMut(SeqNo, Kind, Value<'_>) -> Result<()>,
    ) -> Result<()> {
        let (visible, sv) = view;
        let Some(history) = sv.version.catalog.history(tree) else {
            return Err(Error::HistoryUnavailable {
                what: format!("{name} keeps no history (set a history window first)"),
                oldest_seqno: None,
            });
        };
        check_tree(sv, tree, name)?;
        // The window's start for a duration, the `since` for a count.
        let oldest = self.oldest_readable(tree, &history);
        let count = history.window.keep_versions.unwrap_or(0);
        let (low, high) = self.seqno_bounds(opts, visible)?;
        let limit = opts.limit.unwrap_or(usize::MAX);
        let (mut by_time, mut by_count) = (oldest.is_some(), count > 0);
        let (mut rank, mut emitted) = (0u32, 0usize);
        // One cursor over every source that may hold the key, walked from
        // the newest version down: a seek per source, then a step per
        // version (a point lookup per version cost a seek per source each).
        let Some(files) = sv.version.tree(tree) else {
            return Err(Error::InvalidArgument(format!("{name} was dropped")));
        };
        let range = (Bound::Included(user_key.to_vec()), Bound::Included(user_key.to_vec()));
        let mut cursor =
            TreeCursor::open(&self.sst_readers, sv, tree, files, (&range, true), Blocks::Cached, None)?;
        // A range delete over the key is a delete of it among its versions.
        let mut ranged = sv
            .range_tombstones(
                tree,
                (user_key, Some(user_key)),
                visible,
                crate::db::read::ttl::NOTHING_EXPIRED,
            )
            .map(|set| set.all_covering(user_key).to_vec())
            .unwrap_or_default()
            .into_iter()
            .peekable();
        while (by_time || by_count) && emitted < limit {
            // The next version, newest first: the cursor's or a range
            // tombstone's (`None` for the source).
            let at = cursor.next_source().and_then(|i| {
                let (key, trailer) = cursor.sources()[i].key()?;
                (key == user_key).then_some((i, trailer))
            });
            let cursor_first = at.is_some_and(|(_, trailer)| ranged.peek().is_none_or(|&t| t < trailer >> 8));
            let (source, seqno, kind) = match (at.filter(|_| cursor_first), ranged.peek()) {
                (Some((i, trailer)), _) => {
                    let Some((seqno, kind)) = unpack_trailer(trailer) else {
                        let source = &cursor.sources()[i];
                        return Err(Error::corruption(
                            source.sst().map_or(Path::new("memtable"), |s| s.reader().path()),
                            0,
                            format!("a version of unknown kind {trailer:#x}"),
                        ));
                    };
                    (Some(i), seqno, kind)
                }
                (_, Some(&t)) => {
                    ranged.next();
                    (None, t, Kind::Delete)
                }
                (None, None) => break,
            };
            if seqno > visible {
                // Committed after this read began.
                if let Some(i) = source {
                    cursor.step(i)?;
                }
                continue;
            }
            if seqno < low.max(1) {
                break;
            }
            let shown_by_time = by_time;
            let shown_by_count = by_count && rank < count;
            if oldest.is_some_and(|o| seqno <= o) {
                by_time = false;
            }
            rank += 1;
            if seqno <= history.since || rank >= count {
                by_count = false;
            }
            if (shown_by_time || shown_by_count) && seqno <= high {
                match source {
                    Some(i) => {
                        let source = &cursor.sources()[i];
                        self.version_value(sv, source, kind, layout, &mut |kind, value| {
                            found(seqno, kind, value)
                        })?;
                    }
                    None => found(seqno, Kind::Delete, Value::Borrowed(&[]))?,
                }
                emitted += 1;
            }
            if let Some(i) = source {
                cursor.step(i)?;
            }
        }
        Ok(())
    }

    /// The value of the version `source` is on, handed to `found`: a
    /// memtable's row or value, an SST block's row (read through an older
    /// schema version into the current `layout` where the file is of
    /// one), a blob resolved (and reported as a put).
    fn version_value(
        &self,
        sv: &SuperVersion,
        source: &Source,
        kind: Kind,
        layout: Option<&TableLayout>,
        found: &mut dyn FnMut(Kind, Value<'_>) -> Result<()>,
    ) -> Result<()> {
        if let Some(value) = source.mem_value() {
            return found(kind, Value::Borrowed(value));
        }
        let (Some(sst), Some(file)) = (source.sst(), source.file()) else {
            return Err(Error::internal("a history cursor lost its block"));
        };
        let Some((block, i)) = sst.current() else {
            return Err(Error::internal("a history cursor lost its block"));
        };
        match (kind, layout) {
            (Kind::Delete, _) => found(kind, Value::Borrowed(&[])),
            (Kind::Blob, _) => {
                let bytes = self.read_blob_cold(&sv.version, block.rows().value(i), sst.reader().path())?;
                found(Kind::Put, Value::Shared(bytes))
            }
            (_, Some(layout)) if !block.is_key_value() => {
                if file.schema_version == layout.version() {
                    found(kind, Value::TableRow(block, i))
                } else {
                    found(kind, Value::Shared(older_row(layout, file, block, i)?))
                }
            }
            _ => found(kind, Value::Borrowed(block.rows().value(i))),
        }
    }

    /// The seqno range `opts` asks for: its seqno bounds, narrowed by its
    /// times through the commit clock.
    fn seqno_bounds(&self, opts: &HistoryOptions, visible: SeqNo) -> Result<(SeqNo, SeqNo)> {
        let ms = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        };
        // The last seqno committed at or before `ms`; refused where the
        // clock has no time of the commits before its oldest mark (they
        // cannot be placed on either side of the bound).
        let seqno_at = |ms: u64| -> Result<SeqNo> {
            match self.clock.seqno_at(ms) {
                Some(s) => Ok(s),
                None if self.clock.known_after() == 0 => Ok(0),
                None => Err(Error::HistoryUnavailable {
                    what: format!(
                        "commit times before {} are not on record: bound the history by seqno instead",
                        self.clock
                            .span()
                            .1
                            .map_or_else(|| "now".into(), crate::db::read::history::describe_ms)
                    ),
                    oldest_seqno: None,
                }),
            }
        };
        let mut low = opts.min_seqno.unwrap_or(0);
        let mut high = opts.max_seqno.unwrap_or(visible).min(visible);
        if let Some(since) = opts.since {
            // The first seqno committed at or after `since`.
            let before = match ms(since).checked_sub(1) {
                Some(m) => seqno_at(m)?,
                None => 0,
            };
            low = low.max(before.saturating_add(1));
        }
        if let Some(until) = opts.until {
            high = high.min(seqno_at(ms(until))?);
        }
        Ok((low, high))
    }

    /// A keyspace key's versions, newest first.
    pub(crate) fn key_history(
        &self,
        tree: TreeId,
        name: &str,
        user_key: &[u8],
        opts: &HistoryOptions,
    ) -> Result<Vec<KeyVersion>> {
        self.check_open()?;
        let (visible, sv) = self.read_view(None);
        let mut versions = Vec::new();
        self.walk_history((visible, &sv), (tree, name), user_key, None, opts, &mut |seqno, kind, value| {
            versions.push(KeyVersion {
                seqno,
                commit_time: None,
                value: (kind != Kind::Delete).then(|| value.into_bytes()),
            });
            Ok(())
        })?;
        let times = self.clock.times_of(versions.iter().map(|v| v.seqno));
        for (v, t) in versions.iter_mut().zip(times) {
            v.commit_time = t.map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        }
        Ok(versions)
    }

    /// A table row's versions, newest first, as a batch: `_seqno`,
    /// `_commit_time`, `_deleted`, then the table's columns in `layout`
    /// (a delete's row holds its key and nulls).
    pub(crate) fn row_history(
        &self,
        tree: TreeId,
        name: &str,
        user_key: &[u8],
        opts: &HistoryOptions,
    ) -> Result<RecordBatch> {
        self.check_open()?;
        let (visible, sv) = self.read_view(None);
        // The layout of the state read: rows of older versions are read
        // into it.
        // (A keyspace's table face reads its key-value layout.)
        let layout = match sv.version.catalog.tree(tree).map(|t| &t.kind) {
            Some(crate::catalog::TreeKind::Table(t)) => t.layout.clone(),
            Some(crate::catalog::TreeKind::Keyspace) => Arc::new(TableLayout::key_value()),
            _ => return Err(Error::InvalidArgument(format!("{name} was dropped"))),
        };
        let layout = &layout;
        let schema = history_schema(layout);
        let mut builders: Vec<ColumnBuilder> = layout
            .columns()
            .iter()
            .map(|c| ColumnBuilder::new(Arc::new(nullable_unless_key(layout, c.index)), c.width))
            .collect();
        let (mut seqnos, mut deleted) = (Vec::new(), Vec::new());
        let mut key_row: Option<Vec<key::OwnedKeyValue>> = None;
        self.walk_history(
            (visible, &sv),
            (tree, name),
            user_key,
            Some(layout),
            opts,
            &mut |seqno, kind, value| {
                if kind == Kind::Delete {
                    if key_row.is_none() {
                        key_row = Some(decode_key(layout, user_key)?);
                    }
                    push_deleted_row(layout, user_key, key_row.as_deref().unwrap_or_default(), &mut builders);
                } else {
                    value.push_row(layout, user_key, &mut builders)?;
                }
                seqnos.push(seqno);
                deleted.push(kind == Kind::Delete);
                Ok(())
            },
        )?;
        let times = self.clock.times_of(seqnos.iter().copied());
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(seqnos)),
            Arc::new(
                TimestampMillisecondArray::from(
                    times
                        .into_iter()
                        .map(|t| t.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
                        .collect::<Vec<_>>(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(BooleanArray::from(deleted)),
        ];
        for b in builders {
            columns.push(b.into_array()?);
        }
        RecordBatch::try_new(schema, columns).map_err(|e| Error::internal(format!("a history batch: {e}")))
    }
}

/// Refuses a read of a dropped tree.
fn check_tree(sv: &SuperVersion, tree: TreeId, name: &str) -> Result<()> {
    if sv.version.tree(tree).is_none() {
        return Err(Error::InvalidArgument(format!("{name} was dropped")));
    }
    Ok(())
}

/// The schema of a table's history: the version columns, then the
/// table's, every column but the key nullable (a delete has only its key).
pub(crate) fn history_schema(layout: &TableLayout) -> SchemaRef {
    let mut fields = vec![
        Field::new(HISTORY_SEQNO, DataType::UInt64, false),
        Field::new(HISTORY_COMMIT_TIME, DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true),
        Field::new(HISTORY_DELETED, DataType::Boolean, false),
    ];
    fields.extend((0..layout.schema().fields().len()).map(|c| nullable_unless_key(layout, c)));
    Arc::new(Schema::new(fields))
}

/// Field `c` of `layout`, made nullable unless it is a key column.
pub(crate) fn nullable_unless_key(layout: &TableLayout, c: usize) -> Field {
    let f = layout.schema().field(c).clone();
    if layout.primary_key().contains(&c) { f } else { f.with_nullable(true) }
}

/// The key's values, one per primary key column.
fn decode_key(layout: &TableLayout, user_key: &[u8]) -> Result<Vec<key::OwnedKeyValue>> {
    if layout.raw_key() {
        return Ok(Vec::new());
    }
    let types = layout
        .primary_key()
        .iter()
        .map(|&i| key_type_of(layout.schema().field(i).data_type()))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::internal("a primary key column of no key type"))?;
    key::decode(user_key, &types)
}

/// Appends a deleted row: its key's values, nulls elsewhere.
fn push_deleted_row(
    layout: &TableLayout,
    user_key: &[u8],
    key_values: &[key::OwnedKeyValue],
    builders: &mut [ColumnBuilder],
) {
    for c in layout.columns() {
        let b = &mut builders[c.index];
        if c.source == ColumnSource::Key {
            b.push(user_key);
            continue;
        }
        match layout.primary_key().iter().position(|&k| k == c.index).and_then(|j| key_values.get(j)) {
            Some(v) => crate::row::index::with_row_bytes(v, |bytes| b.push(bytes)),
            None => b.push_null(),
        }
    }
}
