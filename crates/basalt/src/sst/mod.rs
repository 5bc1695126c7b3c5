//! Sorted String Tables: Basalt's one columnar on-disk format. This folder
//! owns the bytes of an SST (`format`, `docs/format.md`), writing one
//! (`writer`), opening and reading one (`reader`, `iter`) and the structures
//! inside it (`block`, `filter`, `index`, `meta`, `seal`).

pub mod block;
pub mod block_cache;
pub mod filter;
pub mod format;
pub mod index;
pub mod iter;
pub mod meta;
pub mod model;
pub mod reader;
mod seal;
pub mod writer;

#[cfg(test)]
mod test_fs;
#[cfg(test)]
mod tests;

pub use iter::{Blocks, SstIter};
pub use writer::SstWriter;
