//! A sharded store's map: which directory (a Basalt database of its own)
//! holds which primary-key range of one table. Keys are routed by their
//! encoded bytes, the engine's own key order, for every key type; the map
//! is replaced atomically (a temporary file, synced, renamed over the old
//! one, the directory synced), so a reader sees one version or the next.
//! Python's `basalt.sharded` and `basalt.ray_data` read and write stores
//! through it.

mod format;
mod store;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_schema::{Field, Schema, SchemaRef};

use crate::codec::key::{self, KeyType, KeyValue, OwnedKeyValue};
use crate::error::{Error, Result};
use crate::io::Fs;
use crate::row::layout::{key_type_of, key_value_fits};

pub use format::FILE as SHARD_MAP_FILE;
pub use store::{NewStore, ShardedStore, StorePin, StoreWrite, split_points_from_sample};

/// One shard: its directory (relative to the store) and the smallest key
/// tuple it holds (a whole key or a prefix of one); `None` for the first
/// shard, which holds every key below the second's bound. A shard holds
/// the keys from its bound up to the next shard's.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    /// The shard's database directory, relative to the store.
    pub path: String,
    /// The smallest key tuple the shard holds; `None` for the first.
    pub lower: Option<Vec<OwnedKeyValue>>,
    /// The node (a scheduler's id, such as Ray's node id) whose disk holds
    /// the shard and where its reads and writes run; `None`: anywhere.
    pub node: Option<String>,
}

/// The map of a sharded store (see the module documentation).
#[derive(Debug, Clone)]
pub struct ShardMap {
    version: u64,
    table: String,
    /// The primary key's columns, with the table's types (a date stays a
    /// date for the faces that convert keys), in key order.
    key: SchemaRef,
    /// Their key codec types.
    key_types: Vec<KeyType>,
    shards: Vec<Shard>,
}

/// Maps are equal when they route alike: bounds compare by their encoding
/// (a NaN bound equals itself).
impl PartialEq for ShardMap {
    fn eq(&self, other: &ShardMap) -> bool {
        self.version == other.version
            && self.table == other.table
            && self.key == other.key
            && self.shards.len() == other.shards.len()
            && self
                .shards
                .iter()
                .zip(&other.shards)
                .all(|(a, b)| a.path == b.path && a.node == b.node && bound_bytes(a) == bound_bytes(b))
    }
}

impl ShardMap {
    /// The first version of the map of a store of `table`, whose primary
    /// key is `key` (its columns, in key order), cut at `split_points`
    /// (key tuples or prefixes, strictly ascending in the engine's order)
    /// into shards in the directories `shard-00000`, `shard-00001`, ….
    pub fn new(table: &str, key: &[Field], split_points: Vec<Vec<OwnedKeyValue>>) -> Result<ShardMap> {
        let key_types = key
            .iter()
            .map(|f| {
                key_type_of(f.data_type()).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "key column {} of type {} cannot key a shard map",
                        f.name(),
                        f.data_type()
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for point in &split_points {
            let fits = !point.is_empty()
                && point.len() <= key.len()
                && point.iter().zip(key).all(|(v, f)| key_value_fits(&v.as_value(), f.data_type()));
            if !fits {
                return Err(Error::InvalidArgument(format!(
                    "split point {point:?} is not a key (or key prefix) of ({})",
                    key.iter()
                        .map(|f| format!("{} {}", f.name(), f.data_type()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let bounds = std::iter::once(None).chain(split_points.into_iter().map(Some));
        let shards = bounds
            .enumerate()
            .map(|(i, lower)| Shard { path: format!("shard-{i:05}"), lower, node: None })
            .collect();
        let map = ShardMap {
            version: 1,
            table: table.to_string(),
            key: Arc::new(Schema::new(key.to_vec())),
            key_types,
            shards,
        };
        map.check().map_err(|what| Error::InvalidArgument(format!("shard map: {what}")))?;
        Ok(map)
    }

    /// This map at `version` (1 or more) with each shard in the directory
    /// `paths` names: the same table, key and split points (a store's next
    /// version writes its shards anew, then replaces the map).
    pub fn with_paths(&self, version: u64, paths: Vec<String>) -> Result<ShardMap> {
        if paths.len() != self.shards.len() || version == 0 {
            return Err(Error::InvalidArgument(format!(
                "version {version} with {} directories for {} shards",
                paths.len(),
                self.shards.len()
            )));
        }
        let shards = self.shards.iter().zip(paths).map(|(s, path)| Shard { path, ..s.clone() }).collect();
        let map = ShardMap { version, shards, ..self.clone() };
        map.check().map_err(|what| Error::InvalidArgument(format!("shard map: {what}")))?;
        Ok(map)
    }

    /// This map with shard `i` placed on node `nodes[i]` (`None`: on any
    /// node); the same version, table, key, bounds and directories.
    pub fn with_nodes(&self, nodes: Vec<Option<String>>) -> Result<ShardMap> {
        if nodes.len() != self.shards.len() {
            return Err(Error::InvalidArgument(format!(
                "{} nodes for {} shards",
                nodes.len(),
                self.shards.len()
            )));
        }
        if nodes.iter().flatten().any(|n| n.is_empty() || n.len() > 4096) {
            return Err(Error::InvalidArgument("a node name is empty or over 4096 bytes".into()));
        }
        let shards = self.shards.iter().zip(nodes).map(|(s, node)| Shard { node, ..s.clone() }).collect();
        Ok(ShardMap { shards, ..self.clone() })
    }

    /// The map's version: 1 when made, one more at each replacement.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The table every shard holds.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The primary key's columns, in key order.
    pub fn key_columns(&self) -> Vec<String> {
        self.key.fields().iter().map(|f| f.name().clone()).collect()
    }

    /// The primary key's columns with the table's types, in key order.
    pub fn key_schema(&self) -> &SchemaRef {
        &self.key
    }

    /// The shards, in key order.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The index of the shard holding `key`, a whole primary key: the
    /// last shard whose lower bound is at or below the key's encoding.
    pub fn shard_of(&self, key: &[KeyValue<'_>]) -> Result<usize> {
        let fits = key.len() == self.key_types.len()
            && key.iter().zip(&self.key_types).all(|(v, t)| v.key_type() == *t);
        if !fits {
            return Err(Error::InvalidArgument(format!(
                "{key:?} is not a key of ({}) ({:?})",
                self.key_columns().join(", "),
                self.key_types
            )));
        }
        let encoded = key::encode(key);
        // Shard 0 has no bound; bounds ascend: the first bound above the
        // key ends the search.
        Ok(self.shards[1..].partition_point(|s| bound_bytes(s).as_slice() <= encoded.as_slice()))
    }

    /// Reads the map of the store in `dir`.
    pub fn read(fs: &dyn Fs, dir: &Path) -> Result<ShardMap> {
        let path = dir.join(format::FILE);
        if !fs.exists(&path)? {
            let legacy = if fs.exists(&dir.join("shards.json"))? {
                ": its shards.json is the map of an unreleased earlier layout; make the store again"
            } else {
                ""
            };
            return Err(Error::InvalidArgument(format!(
                "{} holds no sharded store (no {}){legacy}",
                dir.display(),
                format::FILE
            )));
        }
        format::decode(&fs.read_all(&path)?, &path)
    }

    /// Replaces the map of the store in `dir` by this one, atomically and
    /// durably.
    pub fn write(&self, fs: &dyn Fs, dir: &Path) -> Result<()> {
        self.check().map_err(|what| Error::InvalidArgument(format!("shard map: {what}")))?;
        let n = MAP_WRITES.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!("{}.{}-{n}.tmp", format::FILE, std::process::id()));
        let bytes = format::encode(self)?;
        let written = fs.create(&temp).and_then(|mut file| {
            file.append(&bytes)?;
            file.sync()
        });
        if let Err(e) = written.and_then(|()| fs.rename(&temp, &dir.join(format::FILE))) {
            let _ = fs.remove(&temp);
            return Err(e);
        }
        fs.sync_dir(dir)
    }

    /// What every map satisfies: shards, the first without a bound, the
    /// others' bounds key tuples of the key's types, strictly ascending in
    /// the engine's order, directories distinct and inside the store.
    fn check(&self) -> std::result::Result<(), String> {
        let Some(first) = self.shards.first() else { return Err("no shards".into()) };
        if first.lower.is_some() || self.shards[1..].iter().any(|s| s.lower.is_none()) {
            return Err("only the first shard has no lower bound".into());
        }
        if self.key.fields().is_empty() || self.key.fields().len() != self.key_types.len() {
            return Err("no key columns".into());
        }
        for s in &self.shards[1..] {
            let lower = s.lower.as_deref().unwrap_or_default();
            if lower.is_empty()
                || lower.len() > self.key_types.len()
                || lower.iter().zip(&self.key_types).any(|(v, t)| v.key_type() != *t)
            {
                return Err(format!("shard {}: a bound that is not a key of the map's types", s.path));
            }
        }
        let bounds: Vec<Vec<u8>> = self.shards[1..].iter().map(bound_bytes).collect();
        if bounds.windows(2).any(|w| w[0] >= w[1]) {
            return Err("split points not strictly ascending".into());
        }
        let mut paths: Vec<&str> = self.shards.iter().map(|s| s.path.as_str()).collect();
        if paths.iter().any(|p| p.is_empty() || p.contains(['/', '\\']) || *p == "." || *p == "..") {
            return Err("a shard directory that is not one name inside the store".into());
        }
        paths.sort_unstable();
        if paths.windows(2).any(|w| w[0] == w[1]) {
            return Err("two shards in one directory".into());
        }
        Ok(())
    }
}

/// Map writes of this process so far: with the process id, a temporary
/// file name no other writer uses (the store's write lock keeps two from
/// committing at once; this keeps a loser's bytes out of the winner's
/// file).
static MAP_WRITES: AtomicU64 = AtomicU64::new(0);

/// A shard's lower bound as the key codec encodes it (empty: none).
fn bound_bytes(shard: &Shard) -> Vec<u8> {
    let values: Vec<KeyValue<'_>> = shard.lower.iter().flatten().map(OwnedKeyValue::as_value).collect();
    key::encode(&values)
}

#[cfg(test)]
mod tests;
