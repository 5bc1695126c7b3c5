//! Deleting files no version needs: the set of files running jobs hold
//! (outputs not yet in a version, compaction inputs being read), which no
//! collection may delete, and the collection itself, one at a time. Its
//! locks are taken here only.

use std::collections::HashSet;

use super::DbInner;
use crate::error::{Error, Result};
use crate::files::{self, FileKind};
use crate::ranked::{Rank, RankedMutex};

pub(crate) struct FileCleanup {
    /// Files a running job uses: outputs being written, not yet in any
    /// version, and compaction inputs being read. Never obsolete.
    in_use: RankedMutex<HashSet<u64>>,
    /// Held while obsolete files are collected: the flush and compaction
    /// threads both collect, and neither may delete what the other did.
    collecting: RankedMutex<()>,
}

impl FileCleanup {
    pub(crate) fn new() -> FileCleanup {
        FileCleanup {
            in_use: RankedMutex::new(Rank::InUse, HashSet::new()),
            collecting: RankedMutex::new(Rank::Collecting, ()),
        }
    }

    /// Keeps the files `numbers` from collection until released. A job
    /// holds a file from the moment its number is handed out (under the
    /// versions lock, so no collection sees the number in neither set).
    pub(crate) fn hold(&self, numbers: impl IntoIterator<Item = u64>) {
        self.in_use.lock().extend(numbers);
    }

    /// Gives files back to collection: installed in a version (the caller
    /// holds the versions lock, as the collection does while it reads both
    /// sets) or abandoned (collected as garbage). A number may repeat (the
    /// blob file several compaction inputs point into); each must have
    /// been held.
    pub(crate) fn release(&self, numbers: &[u64]) {
        let mut in_use = self.in_use.lock();
        for (i, n) in numbers.iter().enumerate() {
            let held = in_use.remove(n);
            debug_assert!(held || numbers[..i].contains(n), "file {n} released but never held");
        }
    }

    /// Forgets every held file: recovery installed them all.
    pub(crate) fn release_all(&self) {
        self.in_use.lock().clear();
    }

    /// The files held now.
    fn held(&self) -> HashSet<u64> {
        self.in_use.lock().clone()
    }
}

impl DbInner {
    /// Deletes SSTs and blob files no live version references and no job
    /// holds, WALs below the log number, and (at open) MANIFESTs other than
    /// the live one and temporary files.
    pub(crate) fn delete_obsolete_files(&self, at_open: bool) -> Result<()> {
        // The flush and compaction threads both collect garbage; one at a
        // time, so that neither deletes a file the other already deleted.
        let _collecting = self.files.collecting.lock();
        let manifest = self.versions.lock().manifest_number();
        // List first: a file created after the listing is not touched. Then
        // read the live and held sets under the versions lock, which
        // flush and compaction also hold while moving a file from held to
        // live, so no file is seen in neither set.
        let names = self.fs.list(&self.dir)?;
        let (live, held, log_number, numbered_below) = {
            let mut versions = self.versions.lock();
            let live: HashSet<u64> = versions.live_files();
            (live, self.files.held(), versions.log_number(), versions.next_file_number())
        };
        for name in names {
            let obsolete = match files::parse(&name) {
                // A number this handle never handed out is not its file: a
                // handle that opened the directory after this one closed
                // made it (`lifecycle.rs`).
                Some(FileKind::Sst(n) | FileKind::Blob(n) | FileKind::Wal(n)) if n >= numbered_below => false,
                Some(FileKind::Sst(n) | FileKind::Blob(n)) => !live.contains(&n) && !held.contains(&n),
                Some(FileKind::Wal(n)) => n < log_number,
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
}
