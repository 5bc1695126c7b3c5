//! Checkpoints: a consistent, openable copy of the database at one moment,
//! made of hard links to its SSTs and blob files (which are never written
//! again), as RocksDB's `Checkpoint`.

use std::path::Path;

use crate::db::state::inner::DbInner;
use crate::error::{Error, Result};
use crate::files;
use crate::log::writer::LogWriter;

impl DbInner {
    /// Writes a checkpoint into `dir`, which must not exist. Every write
    /// acknowledged before the call is in it. The memtables are flushed
    /// first, so the checkpoint is SSTs and blob files (hard links where
    /// the file system allows, copies elsewhere), a MANIFEST holding the
    /// version of that moment, an empty WAL and `CURRENT`, written last:
    /// a checkpoint cut short by a crash has no `CURRENT` and is refused
    /// by `Db::open` (never opened half made) once it holds a file; one cut
    /// before its first file is an empty directory, which `Db::open` with
    /// `create_if_missing` would make a new, empty database. Delete it
    /// and retry. A
    /// read-only database checkpoints too (nothing in its own directory is
    /// written) when its WALs held no writes.
    pub(crate) fn checkpoint(&self, dir: &Path) -> Result<()> {
        if self.read_only {
            // Nothing to flush, or nothing may be: a read-only database
            // whose WALs held writes cannot put them in SSTs.
            self.check_open()?;
            let sv = self.versions.load();
            if !sv.mem.is_empty() || !sv.imms.is_empty() {
                return Err(Error::ReadOnly(format!(
                    "{} was opened read-only with writes in its WAL, which a checkpoint would need flushed",
                    self.dir.display()
                )));
            }
        } else {
            self.check_writable()?;
        }
        if self.fs.exists(dir)? {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} already exists",
                dir.display()
            )));
        }
        if !self.read_only {
            self.flush_all()?;
        }
        // A version handed out: the collection keeps its files while they
        // are linked. The edit and both numbers come under the same lock,
        // so the counters match the version.
        let (version, edit, manifest_number) = self.versions.checkpoint_edit();
        self.fs.create_dir_all(dir)?;
        let sst_names = version.trees.values().flat_map(|t| t.all_files().map(|(_, f)| files::sst(f.number)));
        let blob_names = version.blobs.keys().map(|&n| files::blob(n));
        for name in sst_names.chain(blob_names) {
            self.fs.link(&self.dir.join(&name), &dir.join(&name))?;
        }
        let wal_number = edit.log_number.unwrap_or_default();
        let mut wal = self.fs.create(&dir.join(files::wal(wal_number)))?;
        wal.sync()?;
        let mut manifest = LogWriter::new(self.fs.create(&dir.join(files::manifest(manifest_number)))?);
        manifest.append([edit.encode().as_slice()])?;
        manifest.sync()?;
        // Every file's entry durable before CURRENT names the MANIFEST.
        self.fs.sync_dir(dir)?;
        let tmp = dir.join(files::current_temp());
        let mut current = self.fs.create(&tmp)?;
        current.append(format!("{}\n", files::manifest(manifest_number)).as_bytes())?;
        current.sync()?;
        drop(current);
        self.fs.rename(&tmp, &dir.join(files::CURRENT))?;
        self.fs.sync_dir(dir)?;
        // The checkpoint's own entry: in its parent (the current directory
        // for a relative one-part path).
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        self.fs.sync_dir(parent)?;
        drop(version);
        Ok(())
    }
}
