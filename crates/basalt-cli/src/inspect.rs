//! Inspecting and checking the files, for an operator: `check` verifies
//! every checksum and invariant it can reach and names each damaged file
//! and offset; `dump-sst`, `dump-wal` and `dump-manifest` print what a
//! file holds. All of it is the engine's `inspect` module; nothing here
//! repairs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use basalt::fs::RealFs;
use basalt::inspect::{self, EntryKind, ManifestEdit, Sst};
use clap::Args;

use crate::error::{CliError, CliResult, Exit};
use crate::open;
use crate::output::grouped;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The database directory.
    db: PathBuf,
}

#[derive(Debug, Args)]
pub struct DumpSstArgs {
    /// The SST file (`NNNNNN.sst`).
    file: PathBuf,
    /// Entries to print (0: properties only).
    #[arg(long, default_value_t = 20)]
    limit: u64,
}

#[derive(Debug, Args)]
pub struct DumpWalArgs {
    /// The WAL file (`NNNNNN.wal`).
    file: PathBuf,
    /// Entries of each record to print.
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

/// Bytes as text: printable ASCII as is, anything else `\xNN`, cut at
/// 64 bytes.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes.iter().take(64) {
        if b.is_ascii_graphic() || b == b' ' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    if bytes.len() > 64 {
        let _ = write!(out, "…({} bytes)", bytes.len());
    }
    out
}

fn read(path: &Path) -> CliResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
}

/// The file number in a name like `000012.sst`.
fn file_number(path: &Path) -> CliResult<u64> {
    path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).ok_or_else(|| {
        CliError::usage(format!("{}: not a file the engine named (NNNNNN.sst)", path.display()))
    })
}

fn kind_name(trailer: u64) -> String {
    match EntryKind::from_u8((trailer & 0xff) as u8) {
        Some(kind) => format!("{kind:?}"),
        None => format!("kind {}", trailer & 0xff),
    }
}

pub fn dump_sst(args: &DumpSstArgs) -> CliResult<()> {
    let sst = Sst::open(&RealFs, &args.file, file_number(&args.file)?, false)?;
    out!("{}", args.file.display());
    out!("{:#?}", sst.properties());
    let mut cursor = sst.cursor();
    cursor.seek_to_first()?;
    let mut n = 0;
    while cursor.valid() && n < args.limit {
        let trailer = cursor.trailer();
        out!(
            "{n:>8}  seq {:<10} {:<7} key {}  value {} bytes",
            trailer >> 8,
            kind_name(trailer),
            escaped(cursor.user_key()),
            cursor.value().len()
        );
        n += 1;
        cursor.next()?;
    }
    if cursor.valid() {
        out!("… (--limit {} shown)", args.limit);
    }
    Ok(())
}

pub fn dump_wal(args: &DumpWalArgs) -> CliResult<()> {
    let bytes = read(&args.file)?;
    let log = inspect::read_log(&args.file, &bytes)?;
    out!("{}: {} records", args.file.display(), log.records.len());
    for (offset, payload) in &log.records {
        let batch = inspect::decode_wal_batch(payload, &args.file, *offset)?;
        out!("@{offset}: first seq {}, {} entries", batch.first_seqno, batch.entries.len());
        for e in batch.entries.iter().take(args.limit) {
            let rows =
                if e.arrow_rows > 0 { format!(", {} Arrow rows", e.arrow_rows) } else { String::new() };
            out!(
                "    {:?} tree {} key {} value {} bytes{rows}",
                e.kind,
                e.tree,
                escaped(e.key),
                e.value.len()
            );
        }
        if batch.entries.len() > args.limit {
            out!("    … ({} more)", batch.entries.len() - args.limit);
        }
    }
    if let Some(at) = log.torn_tail_at {
        out!("torn tail at offset {at} (an interrupted last write, dropped at recovery)");
    }
    Ok(())
}

fn current_manifest(db: &Path) -> CliResult<PathBuf> {
    let current = db.join("CURRENT");
    if !current.is_file() {
        return Err(CliError::new(
            Exit::Missing,
            format!("no Basalt database at {} (no CURRENT)", db.display()),
        ));
    }
    let name = std::fs::read_to_string(&current)?;
    Ok(db.join(name.trim()))
}

pub fn dump_manifest(args: &CheckArgs) -> CliResult<()> {
    let path = current_manifest(&args.db)?;
    let bytes = read(&path)?;
    let log = inspect::read_log(&path, &bytes)?;
    out!("{}: {} edits", path.display(), log.records.len());
    for (offset, payload) in &log.records {
        let edit = ManifestEdit::decode(payload, &path, *offset)?;
        out!("@{offset}: {edit:?}");
    }
    if let Some(at) = log.torn_tail_at {
        out!("torn tail at offset {at}");
    }
    Ok(())
}

/// Damage found, one line each.
#[derive(Default)]
struct Report {
    damage: Vec<String>,
}

impl Report {
    fn damaged(&mut self, e: &basalt::Error) {
        self.damage.push(e.to_string());
    }
}

pub fn check(args: &CheckArgs, create: bool) -> CliResult<()> {
    let mut report = Report::default();
    // Opening reads the MANIFEST and replays the WAL: damage there stops
    // the open and is reported by it (file and offset).
    // No compaction while files are being read: it could delete a file
    // between its listing and its check.
    let db = open::open_with(&args.db, create, basalt::Options::default().auto_compaction(false))?;
    let files = inspect::files(&db);
    let (mut entries, mut ssts) = (0u64, 0u64);
    for f in &files {
        let name = format!("{:06}.sst", f.number);
        let path = args.db.join(&name);
        match std::fs::metadata(&path) {
            Err(e) => {
                report
                    .damage
                    .push(format!("{name} (L{} of {}): listed in the MANIFEST but {e}", f.level, f.tree));
                continue;
            }
            Ok(meta) if meta.len() != f.size => {
                report.damage.push(format!(
                    "{name}: {} bytes on disk, the MANIFEST says {}",
                    meta.len(),
                    f.size
                ));
                continue;
            }
            Ok(_) => {}
        }
        // Opening checks the footer, index, filter, model, zone maps and
        // properties; verify reads every block through its checksum.
        match Sst::open(&RealFs, &path, f.number, false).and_then(|sst| sst.verify()) {
            Ok(n) if n != f.entries => {
                report.damage.push(format!("{name}: {n} entries, the MANIFEST says {}", f.entries));
            }
            Ok(n) => {
                entries += n;
                ssts += 1;
            }
            Err(e) => report.damaged(&e),
        }
    }
    // Every record of every live blob file, through its checksum, and
    // each file's footer against the MANIFEST.
    let blob_values = match inspect::verify_blob_files(&db) {
        Ok(n) => n,
        Err(e) => {
            report.damaged(&e);
            0
        }
    };
    let mut indexes = 0;
    for name in db.tables() {
        let table = db.table(&name)?;
        match inspect::check_indexes(&table) {
            Ok(checks) => {
                for c in checks {
                    indexes += 1;
                    if !c.consistent {
                        report.damage.push(format!(
                            "index {} of table {name}: {} entries for {} rows, and they are not the entries the rows make",
                            c.index,
                            grouped(c.entries),
                            grouped(c.rows)
                        ));
                    }
                }
            }
            Err(e) => report.damaged(&e),
        }
    }
    db.close()?;
    for d in &report.damage {
        out!("damage: {d}");
    }
    if report.damage.is_empty() {
        out!(
            "ok: {} SSTs ({} entries) and {} blob values read through their checksums, every file the MANIFEST lists is there with its size, {} indexes match their tables",
            grouped(ssts),
            grouped(entries),
            grouped(blob_values),
            indexes
        );
        Ok(())
    } else {
        Err(CliError::new(
            Exit::Corruption,
            format!("{} damaged: {}", args.db.display(), report.damage.join("; ")),
        ))
    }
}
