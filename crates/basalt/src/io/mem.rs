//! In-memory file system with crash simulation (being written).
/// How a simulated crash treats data that was not synced.
#[derive(Debug, Clone, Copy)]
pub enum CrashMode {}
/// In-memory file system.
#[derive(Debug, Default)]
pub struct MemFs;
