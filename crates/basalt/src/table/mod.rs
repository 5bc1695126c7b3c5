//! Tables: an Arrow schema and a primary key over one LSM tree. Rows go in
//! and come out as `RecordBatch`es.

pub mod filter;
pub mod layout;
pub mod zone;

use std::io::Cursor;

use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Schema, SchemaRef};

use crate::error::{Error, Result};

/// A schema as an Arrow IPC stream with no batches (how the MANIFEST keeps
/// table schemas).
pub fn schema_to_ipc(schema: &Schema) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = StreamWriter::try_new(&mut out, schema).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    w.finish().map_err(|e| Error::InvalidArgument(e.to_string()))?;
    drop(w);
    Ok(out)
}

/// Reads a schema written by [`schema_to_ipc`].
pub fn schema_from_ipc(bytes: &[u8]) -> Result<SchemaRef> {
    let r =
        StreamReader::try_new(Cursor::new(bytes), None).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    Ok(r.schema())
}

/// Encodes every row of a checked batch: (user key, row bytes), or for a
/// delete of key rows, (user key, empty).
pub(crate) fn encode_rows(
    layout: &layout::TableLayout,
    batch: &arrow_array::RecordBatch,
    delete: bool,
) -> Result<crate::wal::batch::EncodedRows> {
    let mut rows = Vec::with_capacity(batch.num_rows());
    if delete {
        let enc = layout::KeyEncoder::new(layout, batch)?;
        for r in 0..batch.num_rows() {
            let mut k = Vec::new();
            enc.key(r, &mut k);
            rows.push((bytes::Bytes::from(k), bytes::Bytes::new()));
        }
    } else {
        let enc = layout::RowEncoder::new(layout, batch)?;
        for r in 0..batch.num_rows() {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            enc.key(r, &mut k);
            enc.row(r, &mut v);
            rows.push((bytes::Bytes::from(k), bytes::Bytes::from(v)));
        }
    }
    Ok(crate::wal::batch::EncodedRows { rows })
}

/// A batch as an Arrow IPC stream (how the WAL keeps table writes).
pub(crate) fn batch_to_ipc(batch: &arrow_array::RecordBatch) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = StreamWriter::try_new(&mut out, &batch.schema())
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    w.write(batch).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    w.finish().map_err(|e| Error::InvalidArgument(e.to_string()))?;
    drop(w);
    Ok(out)
}

/// Reads the one batch of an IPC stream written by [`batch_to_ipc`].
pub(crate) fn batch_from_ipc(bytes: &[u8]) -> Result<arrow_array::RecordBatch> {
    let mut r =
        StreamReader::try_new(Cursor::new(bytes), None).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    match r.next() {
        Some(Ok(b)) => Ok(b),
        Some(Err(e)) => Err(Error::InvalidArgument(e.to_string())),
        None => Err(Error::InvalidArgument("IPC stream holds no batch".into())),
    }
}
