//! The row codec: how a table's Arrow rows become keys and row bytes and
//! back (`layout`, `encode`, `decode`; one value at a time, `cell`), filters over them (`filter`) and the zone maps that
//! skip blocks (`zone`), and the Arrow IPC streams the WAL and MANIFEST
//! keep. Its decoders do not know which file their bytes came from: their
//! `Error::Corruption` has an empty file, and each caller reports the
//! `reason` under the file and offset it read (`catalog.rs`, WAL recovery).

pub mod cell;
pub mod decode;
pub mod encode;
pub mod evolve;
pub mod filter;
pub mod index;
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

/// Checks the framing of an Arrow IPC stream before arrow-ipc reads it:
/// every message's metadata must be a valid flatbuffer and every length
/// must fit in the bytes given. arrow-ipc allocates what a length claims
/// and panics on some malformed metadata, so nothing reaches it unchecked.
fn check_ipc_stream(bytes: &[u8]) -> Result<()> {
    let bad = |what: String| Error::corruption("", 0, format!("Arrow IPC stream: {what}"));
    let mut at = 0usize;
    while at < bytes.len() {
        let word = |i: usize| -> Result<u32> {
            let b = bytes.get(i..i + 4).ok_or_else(|| bad(format!("truncated at {i}")))?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let mut len = word(at)?;
        at += 4;
        if len == u32::MAX {
            len = word(at)?;
            at += 4;
        }
        if len == 0 {
            // End-of-stream marker.
            return if at == bytes.len() { Ok(()) } else { Err(bad("bytes after the end marker".into())) };
        }
        let len = len as usize;
        let meta = bytes.get(at..at + len).ok_or_else(|| bad(format!("message of {len} bytes at {at}")))?;
        let message = arrow_ipc::root_as_message(meta).map_err(|e| bad(format!("message metadata: {e}")))?;
        at += len;
        let body = usize::try_from(message.bodyLength()).map_err(|_| bad("negative body length".into()))?;
        if body > bytes.len() - at {
            return Err(bad(format!("body of {body} bytes at {at}")));
        }
        at += body;
    }
    Err(bad("no end marker".into()))
}

/// Runs an arrow-ipc decoder on checked bytes, turning any panic inside it
/// into a corruption error: a damaged stream must never take the process
/// down.
fn decode_ipc<T>(bytes: &[u8], decode: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
    check_ipc_stream(bytes)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode(bytes)))
        .unwrap_or_else(|_| Err(Error::corruption("", 0, "Arrow IPC stream: the decoder rejected it")))
}

/// Reads a schema written by [`schema_to_ipc`]; damage is `Error::Corruption`.
pub fn schema_from_ipc(bytes: &[u8]) -> Result<SchemaRef> {
    decode_ipc(bytes, |b| {
        let r = StreamReader::try_new(Cursor::new(b), None)
            .map_err(|e| Error::corruption("", 0, e.to_string()))?;
        Ok(r.schema())
    })
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
        let enc = encode::KeyEncoder::new(layout, batch)?;
        for r in 0..batch.num_rows() {
            let mut k = Vec::new();
            enc.key(r, &mut k);
            rows.push((bytes::Bytes::from(k), bytes::Bytes::new()));
        }
    } else {
        let enc = encode::RowEncoder::new(layout, batch)?;
        for r in 0..batch.num_rows() {
            let (mut k, mut v) = (Vec::new(), Vec::new());
            enc.key(r, &mut k);
            enc.row(r, &mut v);
            rows.push((bytes::Bytes::from(k), bytes::Bytes::from(v)));
        }
    }
    Ok(crate::wal::batch::EncodedRows { rows, schema_version: Some(layout.version()) })
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

/// Reads the one batch of an IPC stream written by [`batch_to_ipc`];
/// damage is `Error::Corruption`.
pub(crate) fn batch_from_ipc(bytes: &[u8]) -> Result<arrow_array::RecordBatch> {
    decode_ipc(bytes, |b| {
        let corrupt = |e: String| Error::corruption("", 0, e);
        let mut r = StreamReader::try_new(Cursor::new(b), None).map_err(|e| corrupt(e.to_string()))?;
        match r.next() {
            Some(Ok(batch)) => Ok(batch),
            Some(Err(e)) => Err(corrupt(e.to_string())),
            None => Err(corrupt("IPC stream holds no batch".into())),
        }
    })
}

/// A table's user key as text, for errors: its key columns' values, or
/// the escaped bytes of a key that does not decode.
pub(crate) fn describe_key(layout: &layout::TableLayout, key: &[u8]) -> String {
    let escaped = || format!("{:?}", key.escape_ascii().to_string());
    if layout.raw_key() {
        return escaped();
    }
    let types: Option<Vec<_>> = layout
        .primary_key()
        .iter()
        .map(|&i| layout::key_type_of(layout.schema().field(i).data_type()))
        .collect();
    match types.and_then(|types| crate::codec::key::decode(key, &types).ok()) {
        Some(values) => {
            let shown: Vec<String> = values.iter().map(|v| format!("{:?}", v.as_value())).collect();
            format!("({})", shown.join(", "))
        }
        None => escaped(),
    }
}
