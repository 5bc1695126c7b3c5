//! File I/O. Every byte the engine reads or writes goes through the [`Fs`]
//! trait, so tests can swap the disk for [`MemFs`], which simulates crashes.

mod faults;
mod fs;
mod mem;
mod mmap;
mod real;

pub use faults::{Fault, FaultError, OpKind};
pub use fs::{FileLock, Fs, RandomAccessFile, WritableFile};
pub use mem::{CrashMode, MemFs};
pub use real::RealFs;
