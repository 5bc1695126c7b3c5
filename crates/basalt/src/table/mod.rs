//! Tables: an Arrow schema and a primary key over one LSM tree. Rows go in
//! and come out as `RecordBatch`es.

pub mod layout;
