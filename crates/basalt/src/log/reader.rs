//! Reads the records of a log file back, telling a torn tail (the crash cut
//! the last write short) from corruption before the tail.

use std::path::Path;

use super::format::{self, HEADER_BYTES};
use crate::error::{Error, Result};

/// Everything readable from one log file.
#[derive(Debug)]
pub struct LogContents {
    /// Each record's payload with the file offset of its header.
    pub records: Vec<(u64, Vec<u8>)>,
    /// Where a damaged or incomplete final record starts, if there was one.
    /// Those bytes were dropped as a torn write.
    pub torn_tail_at: Option<u64>,
    /// The times of timed seals (a WAL's appends): (records before the
    /// seal, unix milliseconds).
    pub seal_times: Vec<(usize, u64)>,
}

/// Parses a whole log file held in memory.
///
/// A record that fails its checks is a torn tail when no valid record follows
/// it anywhere in the file: a crash can only cut short the last write. If a
/// valid record follows, the damage is corruption, reported with the file
/// and the offset of the damaged record. Every write ends with a seal record
/// (`format::SEAL_PAYLOAD`), so damage to a completely written data record
/// is always followed by a valid seal; seals are not returned.
pub fn read_log(path: &Path, data: &[u8]) -> Result<LogContents> {
    let mut records = Vec::new();
    let mut seal_times = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        match record_at(data, pos) {
            Some((len, payload_ok)) if payload_ok => {
                let start = pos + HEADER_BYTES;
                let payload = &data[start..start + len];
                match format::payload_kind(payload) {
                    format::Payload::Data => records.push((pos as u64, payload.to_vec())),
                    format::Payload::TimedSeal(ms) => seal_times.push((records.len(), ms)),
                    format::Payload::Seal => {}
                }
                pos = start + len;
            }
            damaged => {
                // Skip past the damaged record when its header is intact; else
                // look for any later record start.
                let resume = damaged.map_or(pos + 1, |(len, _)| pos + HEADER_BYTES + len);
                if let Some(next) = next_valid_record(data, resume.min(data.len())) {
                    return Err(Error::corruption(
                        path,
                        pos as u64,
                        format!("damaged log record before a valid one at offset {next}"),
                    ));
                }
                return Ok(LogContents { records, torn_tail_at: Some(pos as u64), seal_times });
            }
        }
    }
    Ok(LogContents { records, torn_tail_at: None, seal_times })
}

/// Checks the record starting at `pos`: `None` if its header is damaged or
/// incomplete; otherwise its payload length and whether the payload is
/// complete and matches its checksum.
fn record_at(data: &[u8], pos: usize) -> Option<(usize, bool)> {
    let header = format::parse_header(data.get(pos..)?)?;
    let start = pos + HEADER_BYTES;
    let Some(payload) = data.get(start..start + header.len) else {
        // Incomplete payload: it can only be the last record.
        return Some((data.len() - start, false));
    };
    let ok = format::mask_crc(crc32c::crc32c(payload)) == header.payload_crc;
    Some((header.len, ok))
}

/// The offset of the first complete, checksum-valid record at or after
/// `from`, trying every byte offset.
fn next_valid_record(data: &[u8], from: usize) -> Option<usize> {
    (from..data.len().saturating_sub(HEADER_BYTES - 1))
        .find(|&p| matches!(record_at(data, p), Some((_, true))))
}

/// Reads a log file through the file system.
pub fn read_log_file(fs: &dyn crate::io::Fs, path: &Path) -> Result<LogContents> {
    let data = fs.read_all(path)?;
    read_log(path, &data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            format::encode_record(p, &mut out);
        }
        out
    }

    #[test]
    fn reads_back_records() {
        let data = log_of(&[b"one", b"two", b"three"]);
        let got = read_log(Path::new("w"), &data).expect("valid log");
        let payloads: Vec<_> = got.records.iter().map(|r| r.1.clone()).collect();
        assert_eq!(payloads, vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
        assert_eq!(got.torn_tail_at, None);
    }

    #[test]
    fn every_truncation_is_a_torn_tail() {
        let data = log_of(&[b"first record", b"second record", b"third"]);
        let full = read_log(Path::new("w"), &data).expect("valid").records.len();
        for cut in 0..data.len() {
            let got = read_log(Path::new("w"), &data[..cut]).expect("a cut log is a torn tail");
            assert!(got.records.len() < full);
            for (i, (_, p)) in got.records.iter().enumerate() {
                assert_eq!(p, &read_log(Path::new("w"), &data).expect("valid").records[i].1);
            }
        }
    }

    #[test]
    fn zero_filled_tail_is_torn() {
        let mut data = log_of(&[b"first", b"second"]);
        let n = data.len();
        data[n - 3..].fill(0);
        data.extend_from_slice(&[0u8; 100]);
        let got = read_log(Path::new("w"), &data).expect("torn");
        assert_eq!(got.records.len(), 1);
        assert!(got.torn_tail_at.is_some());
    }

    #[test]
    fn damage_to_a_sealed_final_record_is_corruption() {
        let mut data = log_of(&[b"first", b"last record"]);
        format::encode_record(format::SEAL_PAYLOAD, &mut data);
        let got = read_log(Path::new("w"), &data).expect("valid");
        assert_eq!(got.records.len(), 2, "seals are not returned");
        let last = HEADER_BYTES + 5;
        for i in last..last + HEADER_BYTES + 11 {
            let mut bad = data.clone();
            bad[i] ^= 0x20;
            assert!(read_log(Path::new("w"), &bad).is_err(), "flip at {i} went unnoticed");
        }
        // Damage to the seal itself loses nothing.
        let mut bad = data.clone();
        let n = bad.len();
        bad[n - 1] ^= 0x01;
        assert_eq!(read_log(Path::new("w"), &bad).expect("torn seal").records.len(), 2);
    }

    #[test]
    fn damage_before_the_tail_is_corruption_with_offset() {
        let data = log_of(&[b"first record", b"second record", b"third"]);
        let second = HEADER_BYTES + b"first record".len();
        for i in 0..second {
            let mut bad = data.clone();
            bad[i] ^= 0x55;
            match read_log(Path::new("w"), &bad) {
                Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 0),
                other => panic!("flip at {i}: expected corruption, got {other:?}"),
            }
        }
    }
}
