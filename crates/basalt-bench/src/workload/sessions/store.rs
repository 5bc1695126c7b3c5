//! The session stores: a Basalt keyspace `sessions` with or without a TTL
//! (default options but the shared block cache; writes without sync).

use std::path::{Path, PathBuf};
use std::time::Duration;

use basalt::{Db, Keyspace, Options, WriteOptions};

use crate::engine::Result;

/// What a store reports of its background work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// `Stats::files_dropped_expired`.
    pub files_dropped_expired: u64,
    pub compaction_read_bytes: u64,
    pub compaction_written_bytes: u64,
    pub flush_bytes: u64,
    pub compactions: u64,
}

/// A key-value store of sessions.
pub trait SessionStore {
    /// Writes `value` at `key`, acknowledged without sync.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Copies the value of `key` into `out`; whether there is one.
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;
    /// Keys in the store now.
    fn count(&self) -> Result<u64>;
    fn stats(&self) -> StoreStats;
    /// The directory whose bytes are the store's space.
    fn dir(&self) -> &Path;
}

pub struct BasaltSessions {
    db: Db,
    sessions: Keyspace,
    dir: PathBuf,
}

impl BasaltSessions {
    /// Opens a new database in `dir` with keyspace `sessions`, its TTL
    /// `ttl`.
    pub fn open(dir: &Path, cache_bytes: usize, ttl: Option<Duration>) -> Result<BasaltSessions> {
        std::fs::create_dir_all(dir)?;
        let db = Db::open(dir, Options::default().block_cache_bytes(cache_bytes))?;
        let sessions = db.create_keyspace("sessions")?;
        if ttl.is_some() {
            sessions.set_ttl(ttl)?;
        }
        Ok(BasaltSessions { db, sessions, dir: dir.to_path_buf() })
    }
}

impl SessionStore for BasaltSessions {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.sessions.put_opt(key, value, &WriteOptions::default().sync(false))?)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let found = self.sessions.get_with(key, |v| {
            out.clear();
            out.extend_from_slice(v);
        })?;
        Ok(found.is_some())
    }

    fn count(&self) -> Result<u64> {
        let mut n = 0;
        for kv in self.sessions.iter::<&[u8]>(..) {
            kv?;
            n += 1;
        }
        Ok(n)
    }

    fn stats(&self) -> StoreStats {
        let s = self.db.stats();
        StoreStats {
            files_dropped_expired: s.files_dropped_expired,
            compaction_read_bytes: s.compaction_read_bytes,
            compaction_written_bytes: s.compaction_written_bytes,
            flush_bytes: s.flush_bytes,
            compactions: s.compactions,
        }
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}
