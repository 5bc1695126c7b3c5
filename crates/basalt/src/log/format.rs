//! Byte layout of a log record (drawn in `docs/format.md`):
//!
//! ```text
//! +---------------+-------------------+------------------+-----------------+
//! | len: u32 LE   | payload_crc: u32  | header_crc: u32  | payload (len B) |
//! +---------------+-------------------+------------------+-----------------+
//! ```
//!
//! `payload_crc` is the masked CRC32C of the payload; `header_crc` is the
//! masked CRC32C of the first 8 header bytes, so a damaged length is caught
//! before it is used and a scan can recognise the start of a valid record.

/// Payload of the *seal* record that ends every append. A data record is
/// therefore never the last record of a log once its write completed, and
/// damage to it is followed by a valid seal: corruption, never mistaken for
/// a torn tail. Data payloads are never exactly this byte (a WAL batch is at
/// least 12 bytes; a version edit never starts with tag 0xff).
pub const SEAL_PAYLOAD: &[u8] = &[0xff];

/// First byte of a WAL's *timed* seal, which carries the append's commit
/// time after it: `0xff | unix milliseconds: u64 LE` (9 bytes). No data
/// payload is 9 bytes starting with it either.
pub const SEAL_BYTE: u8 = 0xff;

/// Bytes of a timed seal's payload.
pub const TIMED_SEAL_BYTES: usize = 9;

/// The payload of a timed seal at `unix_ms`.
pub fn timed_seal(unix_ms: u64) -> [u8; TIMED_SEAL_BYTES] {
    let mut p = [SEAL_BYTE; TIMED_SEAL_BYTES];
    p[1..].copy_from_slice(&unix_ms.to_le_bytes());
    p
}

/// What a log record's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// A record's data.
    Data,
    /// The seal ending an append.
    Seal,
    /// A WAL's seal, with the append's commit time in unix milliseconds.
    TimedSeal(u64),
}

/// What `payload` is.
pub fn payload_kind(payload: &[u8]) -> Payload {
    match payload {
        [SEAL_BYTE] => Payload::Seal,
        [SEAL_BYTE, t @ ..] if t.len() == 8 => {
            Payload::TimedSeal(u64::from_le_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]))
        }
        _ => Payload::Data,
    }
}

/// Bytes before the payload of every record.
pub const HEADER_BYTES: usize = 12;

/// Largest payload a record may carry: one write batch, capped by
/// `Options::batch_bytes_max` (1 GiB) plus room for its header fields.
pub const PAYLOAD_BYTES_MAX: usize = (1 << 30) + 4096;

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC so that a CRC stored inside checksummed data does not make the
/// outer checksum degenerate (as LevelDB does).
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Encodes the header of a record carrying `payload`.
pub fn header(payload: &[u8]) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&mask_crc(crc32c::crc32c(payload)).to_le_bytes());
    let header_crc = mask_crc(crc32c::crc32c(&h[0..8]));
    h[8..12].copy_from_slice(&header_crc.to_le_bytes());
    h
}

/// A header that passed its own checksum.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    /// Payload length in bytes.
    pub len: usize,
    /// Expected masked CRC32C of the payload.
    pub payload_crc: u32,
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Decodes a header from at least `HEADER_BYTES` bytes; `None` if its checksum
/// fails or the length is zero or over the limit.
pub fn parse_header(b: &[u8]) -> Option<Header> {
    if b.len() < HEADER_BYTES || mask_crc(crc32c::crc32c(&b[0..8])) != le32(&b[8..12]) {
        return None;
    }
    let len = le32(&b[0..4]) as usize;
    if len == 0 || len > PAYLOAD_BYTES_MAX {
        return None;
    }
    Some(Header { len, payload_crc: le32(&b[4..8]) })
}

/// Appends one framed record to `out`.
pub fn encode_record(payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(!payload.is_empty() && payload.len() <= PAYLOAD_BYTES_MAX);
    out.extend_from_slice(&header(payload));
    out.extend_from_slice(payload);
}
