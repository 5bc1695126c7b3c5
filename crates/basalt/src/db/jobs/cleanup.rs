//! Deleting files no version needs and no job holds: obsolete SSTs, blob
//! files and WALs, and at open the MANIFESTs and temporary files a crash
//! left.

use crate::db::state::inner::DbInner;
use crate::db::state::versions::Collectable;
use crate::error::{Error, Result};
use crate::files::{self, FileKind};

impl DbInner {
    /// Deletes SSTs and blob files no live version references and no job
    /// holds, WALs below the log number, and (at open) MANIFESTs other than
    /// the live one and temporary files.
    pub(crate) fn delete_obsolete_files(&self, at_open: bool) -> Result<()> {
        // The flush and compaction threads both collect garbage; one at a
        // time, so that neither deletes a file the other already deleted.
        let _collecting = self.files.collecting();
        // List first: a file created after the listing is not touched. Then
        // read the live and held sets in one hold of the version set, which
        // installs also hold while moving a file from held to live, so no
        // file is seen in neither set.
        let names = self.fs.list(&self.dir)?;
        let Collectable { live, held, log_number, numbered_below, manifest } =
            self.versions.collectable(&self.files);
        // A WAL whose first record cannot be read is kept, with every later
        // one: collecting less is never wrong.
        let wals_kept = self.wals_kept_for_history(&names, log_number).unwrap_or(0);
        for name in names {
            let obsolete = match files::parse(&name) {
                // A number this handle never handed out is not its file: a
                // handle that opened the directory after this one closed
                // made it (`lifecycle.rs`).
                Some(FileKind::Sst(n) | FileKind::Blob(n) | FileKind::Wal(n)) if n >= numbered_below => false,
                Some(FileKind::Sst(n) | FileKind::Blob(n)) => !live.contains(&n) && !held.contains(&n),
                Some(FileKind::Wal(n)) => n < log_number && n < wals_kept,
                // At run time the version set removes the MANIFEST it replaces
                // itself; a failed switch may leave CURRENT naming either
                // one, so only an open (which just rewrote CURRENT) sweeps.
                Some(FileKind::Manifest(n)) => at_open && n != manifest,
                Some(FileKind::Temp) => at_open,
                _ => false,
            };
            if obsolete {
                match files::parse(&name) {
                    Some(FileKind::Sst(n)) => self.sst_readers.evict(n),
                    Some(FileKind::Blob(n)) => self.blob_files.evict(n),
                    Some(FileKind::Wal(n)) => self.feed_index.forget(n),
                    _ => {}
                }
                match self.fs.remove(&self.dir.join(&name)) {
                    Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                    other => other?,
                }
            }
        }
        Ok(())
    }

    /// The number of the oldest WAL below `log_number` that a history
    /// window keeps (it and every later one stay; `u64::MAX`: none): a
    /// WAL stays while it may hold a commit newer than the floor of the
    /// longest window with a duration, so the change feed reaches back as
    /// far as reads as of a past point do (`read/changes.rs`). A WAL's
    /// newest commit is just before the next WAL's first.
    fn wals_kept_for_history(&self, names: &[String], log_number: u64) -> Result<u64> {
        let catalog = self.versions.load().version.catalog.clone();
        let Some(ms) = catalog.longest_history_ms() else { return Ok(u64::MAX) };
        let floor = self.clock.seqno_at(self.clock.now_ms().saturating_sub(ms)).unwrap_or(0);
        let wals = files::wal_numbers(names);
        for (i, &n) in wals.iter().enumerate().filter(|&(_, &n)| n < log_number) {
            let mut newest = self.writer.last_seqno();
            for &next in &wals[i + 1..] {
                if let Some(first) = self.wal_first_seqno(next)? {
                    newest = first.saturating_sub(1);
                    break;
                }
            }
            if newest > floor {
                return Ok(n);
            }
        }
        Ok(u64::MAX)
    }
}
