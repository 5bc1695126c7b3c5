//! Proof that scans of a compacted table are zero-copy: the arrays point
//! into the cached block bytes (two independent scans see the very same
//! buffer addresses), every row takes the zero-copy path, and allocations
//! grow with the number of blocks, not rows.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use basalt::{Db, Options, ScanOptions, TableOptions};

/// Counts allocations so the test can bound them per row.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
#[allow(unsafe_code, reason = "a counting global allocator is the only way to observe allocations")]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const ROWS: i64 = 200_000;

fn value_addresses(batches: &[RecordBatch]) -> Vec<usize> {
    batches.iter().map(|b| b.column(2).to_data().buffers()[0].as_ptr() as usize).collect()
}

#[test]
fn compacted_scans_point_into_block_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A block cache big enough to hold every block, so both scans share them.
    let opts = Options::default().block_cache_bytes(256 << 20);
    let db = Db::open(dir.path(), opts).expect("open");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
    ]));
    let t = db.create_table("t", schema.clone(), &["id"], TableOptions::default()).expect("create");
    for chunk in 0..(ROWS / 1000) {
        let ids: Vec<i64> = (chunk * 1000..(chunk + 1) * 1000).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from(ids.iter().map(|i| format!("name-{i}")).collect::<Vec<_>>())),
            Arc::new(Float64Array::from(ids.iter().map(|&i| i as f64 * 0.5).collect::<Vec<_>>())),
        ];
        t.write(&RecordBatch::try_new(schema.clone(), cols).expect("batch")).expect("write");
    }
    db.compact_range::<&[u8]>(..).expect("compact");

    let scan = |counted: bool| {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let mut s = t.scan(ScanOptions::default().batch_size(1 << 20)).expect("scan");
        let batches: Vec<RecordBatch> = s.by_ref().map(|b| b.expect("batch")).collect();
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        let (zero_copy, merged) = s.rows_by_path();
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows as i64, ROWS);
        if counted {
            assert_eq!((zero_copy, merged), (ROWS as u64, 0), "every row of a compacted table is zero-copy");
            // Per block: the arrays, the slices and the batch — never per row.
            let blocks = batches.len() as u64;
            assert!(rows as u64 >= 20 * blocks, "blocks hold many rows each");
            assert!(
                allocations <= 16 * blocks,
                "{allocations} allocations for {rows} rows in {blocks} blocks: more than a few per block"
            );
        }
        batches
    };
    let first = scan(false);
    let second = scan(true);
    assert_eq!(first.len(), second.len());
    let (a, b) = (value_addresses(&first), value_addresses(&second));
    assert_eq!(a, b, "two scans hand out the same cached block bytes, not copies");
    // And the values are right.
    let v = second[0].column(2).as_any().downcast_ref::<Float64Array>().expect("f64");
    assert!((v.value(10) - 5.0).abs() < f64::EPSILON);
}
