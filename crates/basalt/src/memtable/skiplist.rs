//! The memtable's skiplist: nodes laid out whole (header, tower, key,
//! value) in arena chunks owned by the list, one writer at a time, any
//! number of readers without locks.
//!
//! Written here rather than taken from a crate because the memtable is the
//! write path's core and `crossbeam_skiplist::SkipMap` (used before) cost
//! the most of it: a heap allocation and two reference-counted `Bytes` per
//! entry, an epoch pin per operation, and a search from the top for every
//! insert. Here an insert copies the key and value into the arena (a bump
//! allocation), and starts its search from the previous insert's
//! predecessors (its *splice*, as RocksDB's `InlineSkipList` does), so a
//! run of ascending keys costs O(1) comparisons per level instead of a
//! walk. Nodes are never removed: the whole arena is freed when the
//! memtable is dropped, after its last reader is gone.
//!
//! Safety argument, in one place:
//! - A node is fully written (header, tower pointers, key, value) before a
//!   `Release` store of its pointer publishes it at level 0, and readers
//!   load every pointer with `Acquire`: a reader that reaches a node sees
//!   all of its bytes. After publication only the tower's atomic pointers
//!   change.
//! - Chunks are freed only in `Drop`, which needs `&mut self`: no reader
//!   holds a reference then. References handed out borrow `&self`.
//! - The writer's state (arena cursor, splice, random state) sits behind a
//!   mutex, so two inserts can never race, whoever calls.

#![expect(unsafe_code, reason = "an arena skiplist; the invariant is in the module doc")]
#![expect(
    clippy::cast_ptr_alignment,
    reason = "chunks are page-aligned maps and every node's size is a multiple of 8"
)]

use std::alloc::{Layout, alloc, dealloc};
use std::cmp::Ordering;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};

use parking_lot::{Mutex, MutexGuard};

use crate::codec::internal::key_prefix;
use crate::error::{Error, Result};
use crate::ids::TreeId;

/// Tallest tower. With one node in two promoted per level, 24 levels
/// index 2^24 entries before searches degrade: more than a memtable holds.
pub(super) const MAX_HEIGHT: usize = 24;

/// Header bytes of a node before its tower: prefix, trailer, tree, key
/// length, value length, height.
const HEADER_BYTES: usize = 32;

/// The first chunk's size; each next one doubles, up to `CHUNK_BYTES_MAX`,
/// so that a small memtable does not hold a megabyte.
const CHUNK_BYTES_MIN: usize = 4 << 10;
const CHUNK_BYTES_MAX: usize = 1 << 20;

/// A node's fixed part. The tower (`height` atomic pointers), the key and
/// the value follow it in the same allocation.
#[repr(C)]
struct Node {
    /// The key's first 8 bytes as a big-endian number: most comparisons
    /// end on it without reading the key's bytes.
    prefix: u64,
    trailer: u64,
    tree: TreeId,
    key_len: u32,
    value_len: u32,
    height: u32,
}

const _: () = assert!(std::mem::size_of::<Node>() == HEADER_BYTES);
const _: () = assert!(std::mem::align_of::<Node>() == 8);

/// The parts of a key a search compares: tree, prefix, user key, trailer
/// (newest first).
#[derive(Clone, Copy)]
pub(super) struct KeyParts<'a> {
    pub tree: TreeId,
    pub prefix: u64,
    pub user_key: &'a [u8],
    pub trailer: u64,
}

impl<'a> KeyParts<'a> {
    pub(super) fn new(tree: TreeId, user_key: &'a [u8], trailer: u64) -> Self {
        KeyParts { tree, prefix: key_prefix(user_key), user_key, trailer }
    }

    /// The memtable's order: tree, user key ascending, seqno descending.
    pub(super) fn cmp(&self, other: &KeyParts<'_>) -> Ordering {
        self.tree
            .cmp(&other.tree)
            .then(self.prefix.cmp(&other.prefix))
            .then_with(|| self.user_key.cmp(other.user_key))
            .then_with(|| other.trailer.cmp(&self.trailer))
    }
}

/// One entry, borrowed from the list.
#[derive(Clone, Copy)]
pub(super) struct EntryRef<'a> {
    pub tree: TreeId,
    pub user_key: &'a [u8],
    pub trailer: u64,
    pub value: &'a [u8],
}

/// Bytes of a node with `height` levels, `key` and `value`, rounded up so
/// the next node is 8-aligned.
fn node_bytes(height: usize, key: usize, value: usize) -> usize {
    (HEADER_BYTES + height * 8 + key + value).next_multiple_of(8)
}

/// A pointer to a published (or, for the writer, fully written) node.
/// Every accessor is `unsafe`: the caller promises the node is one of this
/// list's, alive for `'a`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct NodePtr(NonNull<Node>);

impl NodePtr {
    /// # Safety
    /// The node is alive and initialized for `'a`; `level < height`.
    unsafe fn next<'a>(self, level: usize) -> &'a AtomicPtr<Node> {
        debug_assert!(level < unsafe { self.0.as_ref() }.height as usize);
        // SAFETY: the tower starts right after the 8-aligned header and
        // holds `height` pointers (caller's promise on `level`).
        unsafe { &*(self.0.as_ptr().cast::<u8>().add(HEADER_BYTES).cast::<AtomicPtr<Node>>().add(level)) }
    }

    /// # Safety
    /// As [`NodePtr::next`].
    unsafe fn entry<'a>(self) -> (KeyParts<'a>, &'a [u8]) {
        // SAFETY: header, key and value were written before the node was
        // published and never change after.
        unsafe {
            let node = self.0.as_ref();
            let key_at = self.0.as_ptr().cast::<u8>().add(HEADER_BYTES + node.height as usize * 8);
            let key = std::slice::from_raw_parts(key_at, node.key_len as usize);
            let value =
                std::slice::from_raw_parts(key_at.add(node.key_len as usize), node.value_len as usize);
            (KeyParts { tree: node.tree, prefix: node.prefix, user_key: key, trailer: node.trailer }, value)
        }
    }
}

/// The writer's side: the arena's chunks and cursor, the splice, the
/// random state for tower heights.
struct Writer {
    /// Every chunk: an anonymous memory map of its own, unmapped when the
    /// list drops. Taken from the heap, a memtable's chunks stayed in the
    /// process after it was flushed (the allocator keeps freed blocks of
    /// this size: 360 MB of anonymous RSS remained after 10M keys were
    /// written and flushed, with 18 MiB held by the engine).
    /// Held as `MmapRaw`, which hands out only raw pointers: a `&[u8]`
    /// over a chunk (what `MmapMut::len` makes, through `Deref`) would
    /// freeze the chunk's nodes for the pointers the list writes through
    /// (undefined behaviour under Miri's tree borrows).
    chunks: Vec<memmap2::MmapRaw>,
    /// Free space of the current chunk.
    cursor: *mut u8,
    left: usize,
    /// The predecessors of the last inserted key at each level (the head
    /// where there is none); each is a node of that level.
    splice: [NonNull<Node>; MAX_HEIGHT],
    /// The last node inserted.
    last: Option<NonNull<Node>>,
    rng: u64,
}

/// A skiplist of (key, value) entries ordered by [`KeyParts::cmp`].
pub(super) struct SkipList {
    /// A node of `MAX_HEIGHT` levels with no key: never compared.
    head: NonNull<Node>,
    /// Levels in use (at least 1).
    height: AtomicUsize,
    len: AtomicUsize,
    /// Bytes of every node, headers and towers included.
    node_bytes: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: the raw pointers are to nodes this list owns (the head and the
// arena's chunks). Readers only read published, immutable node bytes and
// atomics; the writer's state is behind a mutex (see the module's safety
// argument).
unsafe impl Send for SkipList {}
// SAFETY: as above.
unsafe impl Sync for SkipList {}
// SAFETY: the writer's pointers are only used under the list's mutex.
unsafe impl Send for Writer {}

impl SkipList {
    pub(super) fn new() -> Self {
        let layout = Layout::from_size_align(node_bytes(MAX_HEIGHT, 0, 0), 8).expect("head layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(head) = NonNull::new(raw.cast::<Node>()) else { std::alloc::handle_alloc_error(layout) };
        // SAFETY: `head` points to `layout.size()` writable bytes, 8-aligned:
        // the header, then MAX_HEIGHT null pointers.
        unsafe {
            head.as_ptr().write(Node {
                prefix: 0,
                trailer: 0,
                tree: 0,
                key_len: 0,
                value_len: 0,
                height: MAX_HEIGHT as u32,
            });
            let tower = raw.add(HEADER_BYTES).cast::<AtomicPtr<Node>>();
            for level in 0..MAX_HEIGHT {
                tower.add(level).write(AtomicPtr::new(ptr::null_mut()));
            }
        }
        SkipList {
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            node_bytes: AtomicUsize::new(0),
            writer: Mutex::new(Writer {
                chunks: Vec::new(),
                cursor: ptr::null_mut(),
                left: 0,
                splice: [head; MAX_HEIGHT],
                last: None,
                rng: 0x9E37_79B9_7F4A_7C15,
            }),
        }
    }

    fn head(&self) -> NodePtr {
        NodePtr(self.head)
    }

    /// Entries in the list.
    pub(super) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Acquire)
    }

    /// Bytes of the nodes (what the entries cost, towers included).
    pub(super) fn node_bytes(&self) -> usize {
        self.node_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Takes the writer's side: inserts through the guard never race.
    pub(super) fn inserter(&self) -> Inserter<'_> {
        Inserter { list: self, writer: self.writer.lock() }
    }

    /// The first entry at or after `key` (`inclusive`), or after it.
    pub(super) fn seek(&self, key: &KeyParts<'_>, inclusive: bool) -> Option<EntryRef<'_>> {
        self.search(key, !inclusive).1.map(|n| self.entry(n))
    }

    /// The last entry before `key`, or at it too when `inclusive`.
    pub(super) fn seek_back(&self, key: &KeyParts<'_>, inclusive: bool) -> Option<EntryRef<'_>> {
        let pred = self.search(key, inclusive).0;
        (pred != self.head()).then(|| self.entry(pred))
    }

    /// Entries in order from the first at or after `key` (`inclusive`) or
    /// after it; from the first entry when `key` is `None`.
    pub(super) fn iter_from(&self, key: Option<&KeyParts<'_>>, inclusive: bool) -> Iter<'_> {
        let next = match key {
            Some(k) => self.search(k, !inclusive).1,
            // SAFETY: the head has every level.
            None => NonNull::new(unsafe { self.head().next(0) }.load(AtomicOrdering::Acquire)).map(NodePtr),
        };
        Iter { list: self, next }
    }

    /// The last node before `key` (or equal to it, when `or_equal`; the
    /// head when there is none) and the node after it that ended the walk
    /// at level 0. The second is taken from the walk, not loaded again:
    /// a node inserted since in between would be before `key` (a newer
    /// version of a key sorts before the older ones).
    fn search(&self, key: &KeyParts<'_>, or_equal: bool) -> (NodePtr, Option<NodePtr>) {
        let mut x = self.head();
        let mut stop = None;
        let top = self.height.load(AtomicOrdering::Acquire).min(MAX_HEIGHT);
        for level in (0..top).rev() {
            stop = None;
            loop {
                // SAFETY: `x` is the head or a node reached through published
                // pointers at `level`, so its height exceeds `level`.
                let next = unsafe { x.next(level) }.load(AtomicOrdering::Acquire);
                let Some(next) = NonNull::new(next) else { break };
                let next = NodePtr(next);
                // SAFETY: a published node of this list.
                let (parts, _) = unsafe { next.entry() };
                let go_on = match parts.cmp(key) {
                    Ordering::Less => true,
                    Ordering::Equal => or_equal,
                    Ordering::Greater => false,
                };
                if !go_on {
                    stop = Some(next);
                    break;
                }
                x = next;
            }
        }
        (x, stop)
    }

    #[expect(clippy::unused_self, reason = "ties the entry's lifetime to the list's")]
    fn entry(&self, node: NodePtr) -> EntryRef<'_> {
        // SAFETY: only called with published nodes of this list, which
        // live as long as `&self`.
        let (parts, value) = unsafe { node.entry() };
        EntryRef { tree: parts.tree, user_key: parts.user_key, trailer: parts.trailer, value }
    }
}

impl Drop for SkipList {
    fn drop(&mut self) {
        // The chunks unmap themselves; `&mut self` means no reader holds
        // a node.
        self.writer.get_mut().chunks.clear();
        let layout = Layout::from_size_align(node_bytes(MAX_HEIGHT, 0, 0), 8).expect("head layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.head.as_ptr().cast::<u8>(), layout) };
    }
}

/// Forward iteration over level 0.
pub(super) struct Iter<'a> {
    list: &'a SkipList,
    /// The next node to return.
    next: Option<NodePtr>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = EntryRef<'a>;

    fn next(&mut self) -> Option<EntryRef<'a>> {
        let at = self.next?;
        // SAFETY: `at` is a published node of the list.
        self.next = NonNull::new(unsafe { at.next(0) }.load(AtomicOrdering::Acquire)).map(NodePtr);
        Some(self.list.entry(at))
    }
}

/// The writer's handle, holding the list's writer lock.
pub(super) struct Inserter<'a> {
    list: &'a SkipList,
    writer: MutexGuard<'a, Writer>,
}

impl Inserter<'_> {
    /// Inserts one entry (copied into the arena) and returns the bytes its
    /// node takes. An entry equal to one present goes in front of it.
    pub(super) fn insert(
        &mut self,
        tree: TreeId,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) -> Result<usize> {
        // Batches are at most 1 GiB (`Options::batch_bytes_max`): this
        // only guards the node's 32-bit lengths.
        if u32::try_from(user_key.len()).is_err() || u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "a memtable entry of {} + {} bytes",
                user_key.len(),
                value.len()
            )));
        }
        let key = KeyParts::new(tree, user_key, trailer);
        let height = self.random_height();
        let list = self.list;
        let head = list.head();
        let top = list.height.load(AtomicOrdering::Relaxed).max(height);
        let mut prev = [head; MAX_HEIGHT];
        let mut x = head;
        // The splice helps a key after the last one inserted: every
        // splice node is then before the key (each is at or before the last
        // insert). Any other key searches from the head, paying no
        // comparisons with the splice.
        let ascending = self.writer.last.is_some_and(|last| Self::before(NodePtr(last), &key));
        // SAFETY: `last` is a node of this list.
        let tail =
            |last: NonNull<Node>| unsafe { NodePtr(last).next(0) }.load(AtomicOrdering::Relaxed).is_null();
        if ascending && self.writer.last.is_some_and(tail) {
            // An append after the list's last entry: at every level the
            // splice node is the level's last, the key's predecessor.
            for (p, s) in prev.iter_mut().zip(&self.writer.splice).take(top) {
                *p = NodePtr(*s);
            }
        } else {
            for level in (0..top).rev() {
                // Start from the splice where it lies ahead of `x`: for
                // ascending keys it is the last insert's predecessor, and
                // the walk right takes a step or none.
                let spliced = NodePtr(self.writer.splice[level]);
                if ascending
                    && spliced != x
                    && spliced != head
                    && (x == head || Self::before_node(x, spliced))
                {
                    x = spliced;
                }
                loop {
                    // SAFETY: `x` is the head or a node of height > `level`
                    // (reached at this level, or a splice entry of it).
                    let next = unsafe { x.next(level) }.load(AtomicOrdering::Acquire);
                    match NonNull::new(next) {
                        Some(n) if Self::before(NodePtr(n), &key) => x = NodePtr(n),
                        _ => break,
                    }
                }
                prev[level] = x;
            }
        }
        #[cfg(debug_assertions)]
        for (level, p) in prev.iter().enumerate().take(top) {
            // SAFETY: as in the search above.
            let next = NonNull::new(unsafe { p.next(level) }.load(AtomicOrdering::Relaxed));
            debug_assert!(*p == head || Self::before(*p, &key), "predecessor after the key at level {level}");
            debug_assert!(
                next.is_none_or(|n| !Self::before(NodePtr(n), &key)),
                "successor before the key at level {level}"
            );
        }
        let (node, bytes) = self.allocate(&key, height, value)?;
        // SAFETY: `node` was just written whole; `prev[level]` are nodes of
        // height > `level`. The node's own pointers are set before the
        // `Release` stores that publish it, lowest level first, so a
        // reader that finds it at any level finds it at level 0 as well.
        unsafe {
            for (level, p) in prev.iter().enumerate().take(height) {
                let after = p.next(level).load(AtomicOrdering::Relaxed);
                node.next(level).store(after, AtomicOrdering::Relaxed);
            }
            for (level, p) in prev.iter().enumerate().take(height) {
                p.next(level).store(node.0.as_ptr(), AtomicOrdering::Release);
            }
        }
        if height > list.height.load(AtomicOrdering::Relaxed) {
            list.height.store(height, AtomicOrdering::Release);
        }
        for (level, slot) in self.writer.splice.iter_mut().enumerate().take(top) {
            *slot = if level < height { node.0 } else { prev[level].0 };
        }
        self.writer.last = Some(node.0);
        list.len.fetch_add(1, AtomicOrdering::Release);
        list.node_bytes.fetch_add(bytes, AtomicOrdering::Relaxed);
        Ok(bytes)
    }

    /// Whether `node` orders before `key`.
    fn before(node: NodePtr, key: &KeyParts<'_>) -> bool {
        // SAFETY: a node of this list (the writer's own or published).
        let (parts, _) = unsafe { node.entry() };
        parts.cmp(key) == Ordering::Less
    }

    fn before_node(a: NodePtr, b: NodePtr) -> bool {
        // SAFETY: as `before`.
        let (parts, _) = unsafe { b.entry() };
        Self::before(a, &parts)
    }

    /// A height of 1 with probability 1/2, each further level 1/2 of the
    /// one below (2 levels on average). One in four was measured too:
    /// random inserts were 15% slower.
    fn random_height(&mut self) -> usize {
        // xorshift64: the heights only need to look random to the keys.
        let mut x = self.writer.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.writer.rng = x;
        let mut height = 1;
        while height < MAX_HEIGHT && (x >> height) & 1 == 0 {
            height += 1;
        }
        height
    }

    /// Writes a node for `key` and `value` into the arena.
    fn allocate(&mut self, key: &KeyParts<'_>, height: usize, value: &[u8]) -> Result<(NodePtr, usize)> {
        let bytes = node_bytes(height, key.user_key.len(), value.len());
        if self.writer.left < bytes {
            self.new_chunk(bytes)?;
        }
        let w = &mut *self.writer;
        let raw = w.cursor;
        // SAFETY: the chunk has `left >= bytes` free bytes at `cursor`,
        // which is 8-aligned (chunks are, and every node's size is a
        // multiple of 8). Everything the node's accessors read is written
        // here: header, `height` tower pointers (set properly before
        // publication), key and value.
        unsafe {
            w.cursor = raw.add(bytes);
            w.left -= bytes;
            raw.cast::<Node>().write(Node {
                prefix: key.prefix,
                trailer: key.trailer,
                tree: key.tree,
                key_len: key.user_key.len() as u32,
                value_len: value.len() as u32,
                height: height as u32,
            });
            let tower = raw.add(HEADER_BYTES).cast::<AtomicPtr<Node>>();
            for level in 0..height {
                tower.add(level).write(AtomicPtr::new(ptr::null_mut()));
            }
            let key_at = raw.add(HEADER_BYTES + height * 8);
            ptr::copy_nonoverlapping(key.user_key.as_ptr(), key_at, key.user_key.len());
            ptr::copy_nonoverlapping(value.as_ptr(), key_at.add(key.user_key.len()), value.len());
            Ok((NodePtr(NonNull::new_unchecked(raw.cast::<Node>())), bytes))
        }
    }

    /// Starts a chunk with room for at least `bytes`.
    fn new_chunk(&mut self, bytes: usize) -> Result<()> {
        let w = &mut *self.writer;
        let grown = w.chunks.last().map_or(CHUNK_BYTES_MIN, |c| (c.len() * 2).min(CHUNK_BYTES_MAX));
        let size = grown.max(bytes);
        let chunk = memmap2::MmapMut::map_anon(size).map_err(|e| Error::io("memtable arena", e))?;
        let chunk = memmap2::MmapRaw::from(chunk);
        // Maps are page-aligned; the pointer stays valid while the map
        // lives (moving the handle does not move the mapping).
        w.cursor = chunk.as_mut_ptr();
        w.left = size;
        w.chunks.push(chunk);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
