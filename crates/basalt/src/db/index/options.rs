//! What a caller says of an index it creates, and what it is told of one.

crate::options::option_struct! {
/// How an index is made ([`Table::create_index`](crate::Table::create_index)).
#[derive(Debug, Clone, Default)]
pub struct IndexOptions {
    /// At most one row per indexed value. Rows with a null in an indexed
    /// column do not take part (as in SQL: nulls are never equal).
    pub unique: bool,
    /// Columns stored in each entry, by name, so a query that needs only
    /// indexed, primary-key and included columns is answered from the
    /// index alone.
    pub include: Vec<String>,
}
}

/// An index as [`Table::indexes`](crate::Table::indexes) lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexInfo {
    /// The index's name, unique within its table.
    pub name: String,
    /// Indexed columns, in key order.
    pub columns: Vec<String>,
    /// Included columns.
    pub include: Vec<String>,
    /// At most one row per indexed value.
    pub unique: bool,
}
