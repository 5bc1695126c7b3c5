//! Names of the files in a database directory. The names are part of the
//! on-disk format: `NNNNNN.wal`, `NNNNNN.sst`, `NNNNNN.blob`,
//! `MANIFEST-NNNNNN`, `CURRENT`,
//! `LOCK`, and `*.tmp` for files being written before a rename.

/// A file a database directory may hold, parsed from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Write-ahead log number N.
    Wal(u64),
    /// Sorted string table number N.
    Sst(u64),
    /// Blob file number N (values kept apart from their keys).
    Blob(u64),
    /// Version-edit log number N.
    Manifest(u64),
    /// Names the live MANIFEST.
    Current,
    /// The lock file.
    Lock,
    /// A file being written, renamed into place when complete.
    Temp,
}

/// Name of the lock file.
pub const LOCK: &str = "LOCK";
/// Name of the file that names the live MANIFEST.
pub const CURRENT: &str = "CURRENT";

/// Name of WAL number `n`.
pub fn wal(n: u64) -> String {
    format!("{n:06}.wal")
}

/// Name of SST number `n`.
pub fn sst(n: u64) -> String {
    format!("{n:06}.sst")
}

/// Name of blob file number `n`.
pub fn blob(n: u64) -> String {
    format!("{n:06}.blob")
}

/// Name of MANIFEST number `n`.
pub fn manifest(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}

/// Name of the temporary file used to replace CURRENT.
pub fn current_temp() -> String {
    format!("{CURRENT}.tmp")
}

fn number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses a directory entry; `None` for names Basalt never writes. A number
/// must be written as Basalt writes it (`000001.sst`, not `1.sst`): the
/// engine deletes the files it parses once no version needs them, and a
/// file it did not name is not its to delete.
pub fn parse(name: &str) -> Option<FileKind> {
    let kind = parse_any_width(name)?;
    let canonical = match kind {
        FileKind::Wal(n) => wal(n) == name,
        FileKind::Sst(n) => sst(n) == name,
        FileKind::Blob(n) => blob(n) == name,
        FileKind::Manifest(n) => manifest(n) == name,
        FileKind::Current | FileKind::Lock | FileKind::Temp => true,
    };
    canonical.then_some(kind)
}

fn parse_any_width(name: &str) -> Option<FileKind> {
    match name {
        LOCK => return Some(FileKind::Lock),
        CURRENT => return Some(FileKind::Current),
        _ => {}
    }
    // Only names Basalt writes: a foreign `*.tmp` is not ours to delete.
    if name == current_temp() {
        return Some(FileKind::Temp);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return number(n).map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_suffix(".wal") {
        return number(n).map(FileKind::Wal);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return number(n).map(FileKind::Sst);
    }
    if let Some(n) = name.strip_suffix(".blob") {
        return number(n).map(FileKind::Blob);
    }
    None
}

/// The WAL numbers among directory `names`, ascending.
pub fn wal_numbers(names: &[String]) -> Vec<u64> {
    let mut numbers: Vec<u64> = names
        .iter()
        .filter_map(|n| match parse(n) {
            Some(FileKind::Wal(x)) => Some(x),
            _ => None,
        })
        .collect();
    numbers.sort_unstable();
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(parse(&wal(7)), Some(FileKind::Wal(7)));
        assert_eq!(parse(&sst(1_234_567)), Some(FileKind::Sst(1_234_567)));
        assert_eq!(parse(&manifest(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse(&blob(42)), Some(FileKind::Blob(42)));
        assert_eq!(parse("42.blob"), None);
        assert_eq!(parse(CURRENT), Some(FileKind::Current));
        assert_eq!(parse(&current_temp()), Some(FileKind::Temp));
        assert_eq!(parse("notes.txt"), None);
        assert_eq!(parse("scratch.tmp"), None);
        assert_eq!(parse("x.sst"), None);
        assert_eq!(parse("MANIFEST-"), None);
    }

    /// The outside review's (b): a stray `1.sst` was parsed as SST 1 and
    /// deleted as obsolete. Only names Basalt writes are its files.
    #[test]
    fn names_basalt_does_not_write_are_not_its_files() {
        for stray in ["1.sst", "0000001.sst", "+00001.sst", "12.wal", "MANIFEST-1", "MANIFEST-0000003"] {
            assert_eq!(parse(stray), None, "{stray}");
        }
        assert_eq!(parse("1000000.sst"), Some(FileKind::Sst(1_000_000)));
    }
}
