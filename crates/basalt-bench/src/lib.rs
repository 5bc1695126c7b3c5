//! `basalt-bench`: the benchmark suite that decides whether Basalt is
//! winning. Every engine gets the same data, the same durability, the same
//! cache memory and release builds; see docs/BENCHMARKS-history.md for the method.

pub mod analyst;
pub mod cli;
pub mod datagen;
pub mod engine;
pub mod indexed;
pub mod measure;
pub mod memory;
pub mod report;
pub mod result;
pub mod tpch;
pub mod workload;
