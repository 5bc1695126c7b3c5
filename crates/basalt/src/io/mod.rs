//! File I/O. Every byte the engine reads or writes goes through the [`Fs`]
//! trait, so tests can swap the disk for [`MemFs`], which simulates crashes.
//! The time of day comes through [`WallClock`] the same way.

mod clock;
#[cfg(any(test, feature = "testing"))]
mod faults;
mod fs;
mod guarded;
#[cfg(any(test, feature = "testing"))]
mod mem;
mod mmap;
mod real;
mod writeback;

pub use clock::{ManualClock, SystemClock, WallClock};
#[cfg(any(test, feature = "testing"))]
pub use faults::{Fault, FaultError, OpKind};
pub use fs::{FileLock, Fs, RandomAccessFile, WritableFile};
pub(crate) use guarded::{DirectoryRelease, GuardedFs};
#[cfg(any(test, feature = "testing"))]
pub use mem::{CrashMode, MemFs};
pub use real::RealFs;
pub(crate) use writeback::WritebackEvery;
