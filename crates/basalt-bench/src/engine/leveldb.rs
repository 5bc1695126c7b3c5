//! LevelDB 1.22 through its C API (`leveldb-sys`, built from source with
//! `CXX=clang++`: its `CMake` check for `-Wthread-safety` fails with GCC),
//! set up as LevelDB's own documentation advises for point reads
//! (doc/index.md, "Performance"): a bloom filter of 10 bits per key
//! (`NewBloomFilterPolicy(10)`), an LRU block cache of the shared budget,
//! default 4 KiB blocks and write buffer. No compression: the values are
//! random bytes (LevelDB would try Snappy on each block and store it raw).
//! `sync = false`; settle writes a synced empty batch and compacts the
//! whole range (LevelDB has no flush call).
//!
//! The `leveldb` crate (0.8.6, the newest) exposes no filter policy, so
//! this adapter calls the C API directly: each `unsafe` block below is one
//! call, with the pointer rules it relies on.
#![expect(unsafe_code, reason = "LevelDB's C API; each call states its safety")]

use std::ffi::{CStr, CString, c_char};
use std::path::Path;
use std::ptr;

use leveldb_sys as ffi;

use super::{Config, Engine, Reader, Result, Row};

/// The bloom filter's bits per key: LevelDB's documented choice.
pub const BLOOM_BITS_PER_KEY: i32 = 10;

/// Turns an error string LevelDB allocated into an error, and frees it.
fn check(err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB sets `err` to a NUL-terminated string it allocated
    // with malloc; it is read once and freed with `leveldb_free`.
    let message = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    // SAFETY: as above; not used after.
    unsafe { ffi::leveldb_free(err.cast()) };
    Err(format!("leveldb: {message}").into())
}

/// An open LevelDB database, with the option objects it was opened with
/// (LevelDB keeps pointers to the cache and the filter policy).
pub struct LevelEngine {
    db: *mut ffi::leveldb_t,
    options: *mut ffi::leveldb_options_t,
    cache: *mut ffi::leveldb_cache_t,
    filter: *mut ffi::leveldb_filterpolicy_t,
    read: *mut ffi::leveldb_readoptions_t,
    write: *mut ffi::leveldb_writeoptions_t,
}

// SAFETY: a `leveldb_t` is thread-safe (LevelDB's docs: "A database may be
// safely accessed from multiple threads"); the option objects are only
// read after open.
unsafe impl Send for LevelEngine {}
// SAFETY: as above.
unsafe impl Sync for LevelEngine {}

impl LevelEngine {
    /// Opens (or creates) the database in `dir`.
    pub fn open(dir: &Path, cfg: &Config) -> Result<LevelEngine> {
        let name = CString::new(dir.to_str().ok_or("leveldb: the path is not UTF-8")?)?;
        // SAFETY: each constructor returns a new object that this engine
        // owns and destroys in `Drop`, after the database is closed.
        let mut engine = unsafe {
            LevelEngine {
                db: ptr::null_mut(),
                options: ffi::leveldb_options_create(),
                cache: ffi::leveldb_cache_create_lru(cfg.cache_bytes),
                filter: ffi::leveldb_filterpolicy_create_bloom(BLOOM_BITS_PER_KEY),
                read: ffi::leveldb_readoptions_create(),
                write: ffi::leveldb_writeoptions_create(),
            }
        };
        let mut err = ptr::null_mut();
        // SAFETY: the option objects are live; `name` is NUL-terminated
        // and outlives the call; `err` is a valid out-pointer.
        unsafe {
            ffi::leveldb_options_set_create_if_missing(engine.options, 1);
            ffi::leveldb_options_set_cache(engine.options, engine.cache);
            ffi::leveldb_options_set_filter_policy(engine.options, engine.filter);
            ffi::leveldb_options_set_compression(engine.options, ffi::Compression::No);
            ffi::leveldb_writeoptions_set_sync(engine.write, 0);
            engine.db = ffi::leveldb_open(engine.options, name.as_ptr(), &raw mut err);
        }
        check(err)?;
        if engine.db.is_null() {
            return Err("leveldb: open returned no database".into());
        }
        Ok(engine)
    }

    fn write_batch(&self, rows: &[Row], sync: bool) -> Result<()> {
        // SAFETY: the batch is created, filled from slices that outlive
        // each call (LevelDB copies them), written and destroyed here.
        unsafe {
            let batch = ffi::leveldb_writebatch_create();
            for (k, v) in rows {
                ffi::leveldb_writebatch_put(batch, k.as_ptr().cast(), k.len(), v.as_ptr().cast(), v.len());
            }
            let options = if sync { ffi::leveldb_writeoptions_create() } else { self.write };
            if sync {
                ffi::leveldb_writeoptions_set_sync(options, 1);
            }
            let mut err = ptr::null_mut();
            ffi::leveldb_write(self.db, options, batch, &raw mut err);
            ffi::leveldb_writebatch_destroy(batch);
            if sync {
                ffi::leveldb_writeoptions_destroy(options);
            }
            check(err)
        }
    }
}

impl Drop for LevelEngine {
    fn drop(&mut self) {
        // SAFETY: the database is closed before the objects it points to
        // are destroyed; every pointer came from its constructor and is
        // destroyed once.
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_options_destroy(self.options);
            ffi::leveldb_filterpolicy_destroy(self.filter);
            ffi::leveldb_cache_destroy(self.cache);
            ffi::leveldb_readoptions_destroy(self.read);
            ffi::leveldb_writeoptions_destroy(self.write);
        }
    }
}

impl Engine for LevelEngine {
    fn write(&self, rows: &[Row]) -> Result<()> {
        self.write_batch(rows, false)
    }

    fn reader(&self) -> Result<Box<dyn Reader + '_>> {
        Ok(Box::new(LevelReader { engine: self }))
    }

    fn settle(&self) -> Result<()> {
        // An empty synced batch makes every write before it durable.
        self.write_batch(&[], true)?;
        // SAFETY: null bounds mean the whole key range.
        unsafe { ffi::leveldb_compact_range(self.db, ptr::null(), 0, ptr::null(), 0) };
        Ok(())
    }
}

struct LevelReader<'a> {
    engine: &'a LevelEngine,
}

impl Reader for LevelReader<'_> {
    fn get(&mut self, key: &[u8], check_value: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let (mut len, mut err) = (0usize, ptr::null_mut());
        // SAFETY: `key` outlives the call; `len` and `err` are valid
        // out-pointers; LevelDB returns a malloc'ed copy of the value (or
        // null when the key is absent).
        let value = unsafe {
            ffi::leveldb_get(
                self.engine.db,
                self.engine.read,
                key.as_ptr().cast(),
                key.len(),
                &raw mut len,
                &raw mut err,
            )
        };
        check(err)?;
        if value.is_null() {
            return Ok(false);
        }
        // SAFETY: `value` points to `len` bytes that stay allocated until
        // freed just below.
        check_value(unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len) });
        // SAFETY: allocated by LevelDB, freed once.
        unsafe { ffi::leveldb_free(value.cast()) };
        Ok(true)
    }

    fn scan(
        &mut self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut n = 0;
        // SAFETY: the iterator is created and destroyed here; the key and
        // value slices it returns are valid until the next move, and are
        // only used before it.
        unsafe {
            let it = ffi::leveldb_create_iterator(self.engine.db, self.engine.read);
            ffi::leveldb_iter_seek(it, start.as_ptr().cast(), start.len());
            while n < limit && ffi::leveldb_iter_valid(it) != 0 {
                let (mut klen, mut vlen) = (0usize, 0usize);
                let k = ffi::leveldb_iter_key(it, &raw mut klen);
                let k = std::slice::from_raw_parts(k.cast::<u8>(), klen);
                if end.is_some_and(|e| k >= e) {
                    break;
                }
                let v = ffi::leveldb_iter_value(it, &raw mut vlen);
                visit(k, std::slice::from_raw_parts(v.cast::<u8>(), vlen));
                n += 1;
                ffi::leveldb_iter_next(it);
            }
            let mut err: *mut c_char = ptr::null_mut();
            // The binding declares the out-pointer `const`; LevelDB writes it.
            ffi::leveldb_iter_get_error(it, (&raw mut err).cast::<*const c_char>());
            ffi::leveldb_iter_destroy(it);
            check(err)?;
        }
        Ok(n)
    }
}
