//! Versions: which SSTs make up each tree, level by level. A [`Version`] is
//! immutable and shared by `Arc`; the [`VersionSet`] logs every change as a
//! [`VersionEdit`] to the MANIFEST before installing the next version.

pub mod edit;
pub mod set;
#[expect(clippy::module_inception, reason = "the Version type lives in version.rs, as LevelDB's")]
pub mod version;

pub use edit::{BlobFileMeta, FileMeta, VersionEdit};
pub use set::{EditFailure, VersionSet};
pub use version::{LEVELS, TreeVersion, Version};
