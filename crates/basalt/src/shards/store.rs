//! A sharded store's life cycle, in the engine: create it, begin a write
//! against the current version of its map, commit the next version with
//! one atomic replacement of the map (refused when another write
//! committed since this one began), and collect what no map names any
//! more (old versions, what crashed writes left).
//!
//! The store's directory holds `SHARDS` (the map), `write.lock` (held by
//! a commit or a collection: an exclusive lock through the engine's
//! [`Fs`], an `flock` on the real file system), the shard directories, and
//! `.staging/<tag>/`, one per write under way: its `LOCK` is held by the
//! writer from [`ShardedStore::begin_write`] to its commit or abort, and
//! the write's files and new shard directories (`shard-NNNNN.v<version>-
//! <tag>`) carry its tag, so a collection never takes what a live write is
//! making. Names are never reused: a crashed write's leftovers are told
//! apart by their tag, and collected once its lock is gone. A read pins
//! the version it reads (`.pins/v<version>-<tag>`, locked while the read
//! runs): that version's directories outlive commits until the read ends.
//!
//! The work between — writing a version's shards (`Db::checkpoint` of the
//! current one, `Table::ingest_files` of the written files) — is done by
//! the caller (Ray tasks, one per shard), with engine calls.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_schema::Field;

use super::{ShardMap, format};
use crate::codec::key::{self, OwnedKeyValue};
use crate::error::{Error, Result};
use crate::io::FileLock;
use crate::options::Options;
use crate::row::layout::key_type_of;

/// The file a commit or collection holds.
const WRITE_LOCK_FILE: &str = "write.lock";
/// The directory of the writes under way.
const STAGING_DIR: &str = ".staging";
/// The directory of the reads under way: one locked file per read, named
/// `v<version>-<tag>`.
const PINS_DIR: &str = ".pins";

/// A sharded store's directory (see the module documentation); its I/O
/// goes through `options.fs`, and its shards open with `options`.
#[derive(Debug, Clone)]
pub struct ShardedStore {
    dir: PathBuf,
    options: Options,
}

/// A write of a sharded store under way, begun against one version of its
/// map. Holding it keeps a collection off the write's files; dropping it
/// without [`ShardedStore::commit`] leaves them for the next collection.
pub struct StoreWrite {
    base: Option<ShardMap>,
    /// Each base shard's last seqno when the write began: a shard written
    /// since (a `ShardedDatabase` put) makes the commit a conflict, as the
    /// next version, made from a checkpoint, would lose that write.
    shard_seqnos: Vec<u64>,
    seqno: u64,
    tag: String,
    staging: PathBuf,
    _lock: Box<dyn FileLock>,
}

impl std::fmt::Debug for StoreWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWrite")
            .field("base_version", &self.base_version())
            .field("seqno", &self.seqno)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

/// A read of one version of a store: while it is held, neither a commit
/// nor a collection removes that version's shard directories, so a reader
/// that opens its shards one after another sees that version throughout,
/// whatever commits meanwhile. Dropping it releases the version (its
/// directories go at the next collection once no map names them).
pub struct StorePin {
    map: ShardMap,
    path: PathBuf,
    fs: std::sync::Arc<dyn crate::io::Fs>,
    _lock: Box<dyn FileLock>,
}

impl Drop for StorePin {
    /// The reader removes its own pin (while still holding its lock), so
    /// no other process ever removes a pin that might be live.
    fn drop(&mut self) {
        let _ = self.fs.remove(&self.path);
    }
}

impl std::fmt::Debug for StorePin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorePin").field("version", &self.map.version()).finish_non_exhaustive()
    }
}

impl StorePin {
    /// The map of the pinned version.
    pub fn map(&self) -> &ShardMap {
        &self.map
    }
}

/// What the first version of a new store's map is made of.
#[derive(Debug, Clone)]
pub struct NewStore<'a> {
    /// The table's name.
    pub table: &'a str,
    /// The primary key's columns, in key order.
    pub key: &'a [Field],
    /// Key tuples or prefixes, strictly ascending in the engine's order.
    pub split_points: Vec<Vec<OwnedKeyValue>>,
}

impl StoreWrite {
    /// The map the write began against (`None`: the store had none yet).
    pub fn base(&self) -> Option<&ShardMap> {
        self.base.as_ref()
    }

    /// The version of that map (0: none).
    pub fn base_version(&self) -> u64 {
        self.base.as_ref().map_or(0, ShardMap::version)
    }

    /// A seqno above every seqno any shard of the base version has used:
    /// the write's files (`Table::write_sst_files`) take seqnos from it on
    /// (0 for a new store: then above a new database's, once its table is
    /// created).
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// The write's tag: its staging directory's name, and the suffix of
    /// the directories of the version it makes.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The write's own directory, for the files it writes; removed at its
    /// commit or abort.
    pub fn staging_dir(&self) -> &Path {
        &self.staging
    }

    /// The map of the version this write makes: the base's table, key and
    /// split points (for a new store, `new` gives them), at the next
    /// version, each shard in a directory of its own,
    /// `shard-NNNNN.v<version>-<tag>`.
    pub fn next_map(&self, new: Option<NewStore<'_>>) -> Result<ShardMap> {
        let first = match (&self.base, new) {
            (Some(base), None) => base.clone(),
            (None, Some(n)) => ShardMap::new(n.table, n.key, n.split_points)?,
            (Some(_), Some(_)) => {
                return Err(Error::InvalidArgument("the store exists: its split points stay".into()));
            }
            (None, None) => {
                return Err(Error::InvalidArgument(
                    "a new store needs its table, key and split points".into(),
                ));
            }
        };
        let version = self.base_version() + 1;
        let paths =
            (0..first.shards().len()).map(|i| format!("shard-{i:05}.v{version}-{}", self.tag)).collect();
        first.with_paths(version, paths)
    }
}

impl ShardedStore {
    /// The store in `dir` (nothing is read or written yet).
    pub fn new(dir: impl AsRef<Path>, options: Options) -> ShardedStore {
        ShardedStore { dir: dir.as_ref().to_path_buf(), options }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options its shards open with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Creates the store: a shard per range `split_points` make, each a
    /// database holding an empty table `table` (every shard's table made
    /// alike, so files written for one are ingested by any), then the map,
    /// version 1. Refused when the directory holds a store already.
    pub fn create(
        &self,
        table: &str,
        schema: &arrow_schema::SchemaRef,
        primary_key: &[&str],
        split_points: Vec<Vec<OwnedKeyValue>>,
    ) -> Result<ShardMap> {
        let key = primary_key
            .iter()
            .map(|c| {
                schema.field_with_name(c).cloned().map_err(|_| {
                    Error::InvalidArgument(format!("primary key column {c} is not in the schema"))
                })
            })
            .collect::<Result<Vec<Field>>>()?;
        let map = ShardMap::new(table, &key, split_points)?;
        self.options.fs.create_dir_all(&self.dir)?;
        let _lock = self.write_lock()?;
        if self.map()?.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{} holds a sharded store already",
                self.dir.display()
            )));
        }
        for s in map.shards() {
            let db = crate::Db::open(self.dir.join(&s.path), self.options.clone())?;
            db.create_table(table, schema.clone(), primary_key, crate::TableOptions::default())?;
            db.close()?;
        }
        map.write(self.options.fs.as_ref(), &self.dir)?;
        Ok(map)
    }

    /// The current map, or `None` when the directory holds no store yet.
    pub fn map(&self) -> Result<Option<ShardMap>> {
        if !self.options.fs.exists(&self.dir.join(format::FILE))? {
            return Ok(None);
        }
        ShardMap::read(self.options.fs.as_ref(), &self.dir).map(Some)
    }

    /// Begins a write against the current version: takes the write's lock
    /// and reads, from every shard of the current version (opened
    /// read-only), the seqnos they have used. A shard open for writing
    /// elsewhere makes this fail (`Error::Locked`): its seqnos could grow.
    pub fn begin_write(&self) -> Result<StoreWrite> {
        let fs = &self.options.fs;
        let base = self.map()?;
        let shard_seqnos = match &base {
            Some(map) => {
                map.shards().iter().map(|s| self.shard_seqno(&s.path)).collect::<Result<Vec<_>>>()?
            }
            None => Vec::new(),
        };
        let seqno = shard_seqnos.iter().map(|s| s + 1).max().unwrap_or(0);
        let tag = unique_tag();
        let staging = self.dir.join(STAGING_DIR).join(&tag);
        // Made and locked under the store's lock: a collection, which
        // removes staging directories whose lock is free, never sees this
        // one between its creation and its lock.
        fs.create_dir_all(&self.dir)?;
        let lock = {
            let _store = self.write_lock()?;
            fs.create_dir_all(&staging)?;
            fs.lock(&staging.join("LOCK"), &staging)?
        };
        Ok(StoreWrite { base, shard_seqnos, seqno, tag, staging, _lock: lock })
    }

    /// The last seqno shard directory `path` has used.
    fn shard_seqno(&self, path: &str) -> Result<u64> {
        let db = crate::Db::open_read_only(self.dir.join(path), self.options.clone())?;
        let seqno = db.last_seqno();
        db.close()?;
        Ok(seqno)
    }

    /// Makes `next` (from [`StoreWrite::next_map`], its shard directories
    /// written) the store's current version, in one atomic replacement of
    /// the map, then removes the base version's directories (unless a read
    /// pins them) and the write's staging directory. Refused when another
    /// write committed since `write` began, the shards were placed
    /// elsewhere, or a base shard was written (or is open for writing)
    /// meanwhile (`Error::Conflict`); `Error::Busy` when the store's lock
    /// stays held for a minute: the current version is untouched, and the
    /// write's own files and directories are removed (it cannot commit
    /// later either).
    pub fn commit(&self, write: StoreWrite, next: &ShardMap) -> Result<()> {
        if let Err(e) = self.replace_map(&write, next) {
            // Refused (or failed before the map was replaced): the write
            // cannot be committed later either, so its files and
            // directories go now. A map replaced before an error (its
            // directory sync) names them: the abort then keeps them.
            let _ = self.abort(write, Some(next));
            return Err(e);
        }
        // Committed: what follows only frees space, and a failure leaves
        // it for the next collection.
        let fs = &self.options.fs;
        if let Some(base) = &write.base {
            // A read that pinned the base version keeps its directories
            // until a collection after it ends.
            if self.pinned_versions(false).is_ok_and(|p| !p.contains(&base.version())) {
                for s in base.shards() {
                    let _ = fs.remove_dir_all(&self.dir.join(&s.path));
                }
            }
        }
        let staging = write.staging.clone();
        drop(write);
        let _ = fs.remove_dir_all(&staging);
        Ok(())
    }

    /// The commit's checks and the map's replacement, under the store's
    /// write lock.
    fn replace_map(&self, write: &StoreWrite, next: &ShardMap) -> Result<()> {
        let suffix = format!("-{}", write.tag);
        if next.shards().iter().any(|s| !s.path.ends_with(&suffix)) {
            return Err(Error::InvalidArgument(
                "the next map is not this write's (StoreWrite::next_map)".into(),
            ));
        }
        let _lock = self.write_lock()?;
        let current = self.map()?;
        let current_version = current.as_ref().map_or(0, ShardMap::version);
        if current_version != write.base_version() {
            return Err(Error::Conflict(format!(
                "{}: another write committed version {current_version} while this one, begun at version {}, \
                 ran",
                self.dir.display(),
                write.base_version()
            )));
        }
        if current != write.base {
            return Err(Error::Conflict(format!(
                "{}: the shards were placed on other nodes while this write ran",
                self.dir.display()
            )));
        }
        for (s, &began) in current.iter().flat_map(ShardMap::shards).zip(&write.shard_seqnos) {
            let now = self.shard_seqno(&s.path).map_err(|e| match e {
                Error::Locked(_) => Error::Conflict(format!(
                    "{}: shard {} is open for writing: its writes would be lost",
                    self.dir.display(),
                    s.path
                )),
                e => e,
            })?;
            if now != began {
                return Err(Error::Conflict(format!(
                    "{}: shard {} was written while this write ran (its seqno moved from {began} to {now})",
                    self.dir.display(),
                    s.path
                )));
            }
        }
        if next.version() != write.base_version() + 1 {
            return Err(Error::InvalidArgument(format!(
                "the next map is version {}, not {}",
                next.version(),
                write.base_version() + 1
            )));
        }
        for s in next.shards() {
            if !self.options.fs.exists(&self.dir.join(&s.path).join(crate::files::CURRENT))? {
                return Err(Error::InvalidArgument(format!("shard directory {} holds no database", s.path)));
            }
        }
        next.write(self.options.fs.as_ref(), &self.dir)
    }

    /// Ends `write` without a commit: removes its staging directory and
    /// the directories of `next` (if given) that the current map does not
    /// name.
    pub fn abort(&self, write: StoreWrite, next: Option<&ShardMap>) -> Result<()> {
        let fs = &self.options.fs;
        let current = self.map()?;
        let named = |path: &str| current.as_ref().is_some_and(|m| m.shards().iter().any(|s| s.path == path));
        for s in next.map(ShardMap::shards).unwrap_or_default() {
            if !named(&s.path) {
                fs.remove_dir_all(&self.dir.join(&s.path))?;
            }
        }
        let staging = write.staging.clone();
        drop(write);
        fs.remove_dir_all(&staging)
    }

    /// Removes what the current map does not name and no write under way
    /// is making: shard directories of earlier versions and of writes that
    /// crashed, and their staging directories. Returns the directories
    /// removed. Waits for nothing: `Error::Busy` while a commit runs.
    pub fn collect(&self) -> Result<usize> {
        let fs = &self.options.fs;
        let _lock = self.write_lock()?;
        let current = self.map()?;
        let staging_root = self.dir.join(STAGING_DIR);
        // Writes under way hold their staging LOCK; the others crashed.
        let mut live_tags = Vec::new();
        let mut removed = 0;
        if fs.is_dir(&staging_root)? {
            for tag in fs.list(&staging_root)? {
                let dir = staging_root.join(&tag);
                match fs.lock(&dir.join("LOCK"), &dir) {
                    Ok(lock) => {
                        drop(lock);
                        fs.remove_dir_all(&dir)?;
                        removed += 1;
                    }
                    Err(Error::Locked(_)) => live_tags.push(tag),
                    Err(e) => return Err(e),
                }
            }
        }
        let pinned = self.pinned_versions(true)?;
        for name in fs.list(&self.dir)? {
            if !name.starts_with("shard-") || !fs.is_dir(&self.dir.join(&name))? {
                continue;
            }
            let named = current.as_ref().is_some_and(|m| m.shards().iter().any(|s| s.path == name));
            let in_flight = live_tags.iter().any(|t| name.ends_with(&format!("-{t}")));
            if !named && !in_flight && !pinned.contains(&version_of_dir(&name)) {
                fs.remove_dir_all(&self.dir.join(&name))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Places shard `i` of the current version on node `nodes[i]` (`None`:
    /// any), where its reads and its next versions' ingests run: the map
    /// is replaced atomically, at the same version (its directories and
    /// rows are unchanged; on one machine, or a shared disk, nothing
    /// moves). Returns the new map.
    pub fn place(&self, nodes: Vec<Option<String>>) -> Result<ShardMap> {
        let _lock = self.write_lock()?;
        let Some(map) = self.map()? else {
            return Err(Error::InvalidArgument(format!("{} holds no sharded store", self.dir.display())));
        };
        let placed = map.with_nodes(nodes)?;
        placed.write(self.options.fs.as_ref(), &self.dir)?;
        Ok(placed)
    }

    /// Pins the current version for a read (see [`StorePin`]).
    pub fn pin(&self) -> Result<StorePin> {
        let fs = &self.options.fs;
        let pins = self.dir.join(PINS_DIR);
        fs.create_dir_all(&pins)?;
        // Under the store's lock: no commit replaces the map meanwhile, and
        // no collection tests this pin between its creation and its lock.
        let _store = self.write_lock()?;
        let Some(map) = self.map()? else {
            return Err(Error::InvalidArgument(format!("{} holds no sharded store", self.dir.display())));
        };
        let path = pins.join(format!("v{}-{}", map.version(), unique_tag()));
        let lock = fs.lock(&path, &self.dir)?;
        Ok(StorePin { map, path, fs: fs.clone(), _lock: lock })
    }

    /// The versions a live read pins; with `remove_stale` (only under the
    /// store's lock, where no pin is being made), the pins of reads that
    /// ended without removing theirs (a crash) are removed.
    fn pinned_versions(&self, remove_stale: bool) -> Result<Vec<u64>> {
        let fs = &self.options.fs;
        let pins = self.dir.join(PINS_DIR);
        let mut versions = Vec::new();
        if !fs.is_dir(&pins)? {
            return Ok(versions);
        }
        for name in fs.list(&pins)? {
            let path = pins.join(&name);
            match fs.lock(&path, &self.dir) {
                Ok(lock) => {
                    drop(lock);
                    if remove_stale {
                        let _ = fs.remove(&path);
                    }
                }
                Err(Error::Locked(_)) => {
                    let version =
                        name.strip_prefix('v').and_then(|v| v.split('-').next()?.parse::<u64>().ok());
                    versions.extend(version);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(versions)
    }

    /// The store's lock, waited for: its holders (a commit's checks and
    /// map replacement, a collection, a placement, a pin's creation) hold
    /// it briefly. `Error::Busy` after a minute.
    fn write_lock(&self) -> Result<Box<dyn FileLock>> {
        let path = self.dir.join(WRITE_LOCK_FILE);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match self.options.fs.lock(&path, &self.dir) {
                Err(Error::Locked(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(Error::Locked(_)) => {
                    return Err(Error::Busy(format!(
                        "{}: the store's lock was held for a minute (a commit or a collection)",
                        self.dir.display()
                    )));
                }
                other => return other,
            }
        }
    }
}

/// Split points cutting `sample` (keys of the columns `key`, in any order)
/// into `parts` ranges of about equal counts, in the engine's key order:
/// the keys at each `i / parts` quantile, each counted once (fewer points
/// when the sample repeats keys).
pub fn split_points_from_sample(
    key: &[Field],
    sample: &[Vec<OwnedKeyValue>],
    parts: usize,
) -> Result<Vec<Vec<OwnedKeyValue>>> {
    let types = key
        .iter()
        .map(|f| {
            key_type_of(f.data_type()).ok_or_else(|| {
                Error::InvalidArgument(format!("key column {} cannot key a shard map", f.name()))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut encoded = sample
        .iter()
        .map(|k| {
            let fits =
                k.len() == types.len() && k.iter().zip(&types).all(|(v, t)| v.as_value().key_type() == *t);
            if fits {
                Ok((key::encode(&k.iter().map(OwnedKeyValue::as_value).collect::<Vec<_>>()), k))
            } else {
                Err(Error::InvalidArgument(format!("sampled key {k:?} is not a key of the store's types")))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    encoded.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut points: Vec<(&[u8], Vec<OwnedKeyValue>)> = Vec::new();
    for i in 1..parts.max(1) {
        let Some((bytes, k)) = encoded.get(i * encoded.len() / parts) else { continue };
        if points.last().is_none_or(|(last, _)| *last < bytes.as_slice()) {
            points.push((bytes, (*k).clone()));
        }
    }
    Ok(points.into_iter().map(|(_, k)| k).collect())
}

/// The map version a shard directory was made for: `shard-NNNNN.v<version>-
/// <tag>` by a write, `shard-NNNNN` by the store's creation (version 1).
fn version_of_dir(name: &str) -> u64 {
    name.split_once(".v").and_then(|(_, rest)| rest.split('-').next()?.parse().ok()).unwrap_or(1)
}

/// A name no other read or write uses: the process, the time and a counter.
fn unique_tag() -> String {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{:x}{:x}{}", std::process::id(), nanos as u64, WRITES.fetch_add(1, Ordering::Relaxed))
}
