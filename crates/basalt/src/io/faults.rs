//! Fault injection for [`super::MemFs`]: fail the n-th call of one kind of
//! file-system operation, once or from then on, as `SQLite`'s I/O-error loops
//! and `RocksDB`'s `FaultInjectionTestFS` do.
//!
//! This module only counts calls and decides which ones fail; `MemFs` asks it
//! before each operation and carries the failure out.

use std::io::ErrorKind;

/// A kind of file-system call, as counted for fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `Fs::create`.
    Create,
    /// `Fs::open` (a file opened for reading).
    Open,
    /// `RandomAccessFile::read_at`.
    Read,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::flush`.
    Flush,
    /// `WritableFile::sync` (fdatasync).
    Sync,
    /// `Fs::rename`.
    Rename,
    /// `Fs::remove`.
    Remove,
    /// `Fs::list`.
    List,
    /// `Fs::exists` and `Fs::is_dir`.
    Stat,
    /// `Fs::create_dir_all`.
    CreateDir,
    /// `Fs::sync_dir`.
    SyncDir,
    /// `Fs::lock`.
    Lock,
}

impl OpKind {
    /// Every kind, in declaration order.
    pub const ALL: [OpKind; 13] = [
        OpKind::Create,
        OpKind::Open,
        OpKind::Read,
        OpKind::Append,
        OpKind::Flush,
        OpKind::Sync,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::List,
        OpKind::Stat,
        OpKind::CreateDir,
        OpKind::SyncDir,
        OpKind::Lock,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// Whether a failure of this call leaves a file's durable state unknown
    /// (an fsync of a file or a directory).
    pub fn is_sync(self) -> bool {
        matches!(self, OpKind::Sync | OpKind::SyncDir)
    }
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultError {
    /// `EIO`: the call does nothing.
    Io,
    /// `ENOSPC` (`ErrorKind::StorageFull`). A failed append keeps the first
    /// half of its bytes, as a `write` cut short by a full disk; any other
    /// call does nothing.
    NoSpace,
}

impl FaultError {
    /// The `std::io` error kind and message of this fault.
    pub(crate) fn kind_and_message(self) -> (ErrorKind, &'static str) {
        match self {
            FaultError::Io => (ErrorKind::Other, "injected fault: I/O error"),
            FaultError::NoSpace => (ErrorKind::StorageFull, "injected fault: no space left on device"),
        }
    }
}

/// One fault: fail the `nth` call (counted from 0 when the fault is
/// injected) of kind `op`, and with `forever` every later one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fault {
    /// The kind of call that fails.
    pub op: OpKind,
    /// Which call fails: 0 is the next one.
    pub nth: u64,
    /// Fail every call from the `nth` on, not just that one.
    pub forever: bool,
    /// The error returned.
    pub error: FaultError,
}

impl Fault {
    /// Fails the `nth` call of `op` once with `EIO`.
    pub fn once(op: OpKind, nth: u64) -> Fault {
        Fault { op, nth, forever: false, error: FaultError::Io }
    }

    /// Fails the `nth` call of `op` and every later one with `EIO`.
    pub fn forever(op: OpKind, nth: u64) -> Fault {
        Fault { op, nth, forever: true, error: FaultError::Io }
    }

    /// The same fault returning `error`.
    #[must_use]
    pub fn with_error(self, error: FaultError) -> Fault {
        Fault { error, ..self }
    }
}

/// A fault with its target as an absolute call number.
#[derive(Debug, Clone, Copy)]
struct Armed {
    fault: Fault,
    at: u64,
}

/// Call counters and armed faults.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// Calls of each kind so far (failed ones included), by `OpKind` index.
    calls: [u64; OpKind::ALL.len()],
    armed: Vec<Armed>,
    /// Calls failed by a fault so far.
    fired: u64,
    /// Of those, calls of a sync kind.
    fired_syncs: u64,
}

impl Faults {
    pub(crate) fn inject(&mut self, fault: Fault) {
        let at = self.calls[fault.op.index()].saturating_add(fault.nth);
        self.armed.push(Armed { fault, at });
    }

    pub(crate) fn clear(&mut self) {
        self.armed.clear();
    }

    pub(crate) fn calls(&self, op: OpKind) -> u64 {
        self.calls[op.index()]
    }

    pub(crate) fn fired(&self) -> u64 {
        self.fired
    }

    pub(crate) fn fired_syncs(&self) -> u64 {
        self.fired_syncs
    }

    /// Counts one call of `op`; returns the error to fail it with, if a
    /// fault targets it.
    pub(crate) fn on_call(&mut self, op: OpKind) -> Option<FaultError> {
        let n = self.calls[op.index()];
        self.calls[op.index()] = n + 1;
        let hit = self
            .armed
            .iter()
            .find(|a| a.fault.op == op && (a.at == n || (a.fault.forever && n > a.at)))
            .map(|a| a.fault.error)?;
        self.fired += 1;
        if op.is_sync() {
            self.fired_syncs += 1;
        }
        Some(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_fails_only_the_nth_call() {
        let mut f = Faults::default();
        f.on_call(OpKind::Append);
        f.inject(Fault::once(OpKind::Append, 2));
        let got: Vec<bool> = (0..6).map(|_| f.on_call(OpKind::Append).is_some()).collect();
        assert_eq!(got, [false, false, true, false, false, false]);
        assert_eq!(f.calls(OpKind::Append), 7);
        assert_eq!(f.fired(), 1);
        assert_eq!(f.fired_syncs(), 0);
    }

    #[test]
    fn forever_fails_from_the_nth_call_on_and_only_its_kind() {
        let mut f = Faults::default();
        f.inject(Fault::forever(OpKind::Sync, 1).with_error(FaultError::NoSpace));
        assert!(f.on_call(OpKind::Sync).is_none());
        assert_eq!(f.on_call(OpKind::Sync), Some(FaultError::NoSpace));
        assert!(f.on_call(OpKind::SyncDir).is_none());
        assert_eq!(f.on_call(OpKind::Sync), Some(FaultError::NoSpace));
        assert_eq!((f.fired(), f.fired_syncs()), (2, 2));
        f.clear();
        assert!(f.on_call(OpKind::Sync).is_none());
    }

    #[test]
    fn kinds_are_indexed_in_order() {
        for (i, op) in OpKind::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
    }
}
