//! Issue 65's generated flights log: an int64 key `id`, a `date` that
//! follows the key (sorted over six months), normally distributed `delay`
//! and `distance`, and Zipf-distributed three-letter `origin` and `dest`
//! (300 airports, exponent 1.3) — the shape of python/bench/analyst.py's
//! table, generated here with a fixed seed.

use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::engine::Result;
use crate::tpch::data::Table;

/// Rows per generated batch.
const BATCH_ROWS: usize = 65_536;

/// 2024-01-01T00:00:00 in µs since the epoch.
const START_US: i64 = 1_704_067_200_000_000;
/// Six months (182 days) in µs.
const SPAN_US: i64 = 182 * 24 * 3600 * 1_000_000;

const AIRPORTS: usize = 300;
const ZIPF_EXPONENT: f64 = 1.3;

/// The secondary indexes every engine with indexes gets: (name, column).
pub const INDEXES: &[(&str, &str)] =
    &[("by_date", "date"), ("by_delay", "delay"), ("by_distance", "distance"), ("by_origin", "origin")];

/// `rows` flights.
pub fn flights(rows: usize) -> Result<Table> {
    let mut rng = StdRng::seed_from_u64(65);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("date", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("delay", DataType::Int64, true),
        Field::new("distance", DataType::Int64, true),
        Field::new("origin", DataType::Utf8, true),
        Field::new("dest", DataType::Utf8, true),
    ]));
    let mut dates: Vec<i64> = (0..rows).map(|_| START_US + rng.random_range(0..SPAN_US)).collect();
    dates.sort_unstable();
    let airports: Vec<String> = (0..AIRPORTS)
        .map(|_| (0..3).map(|_| char::from(b'A' + rng.random_range(0..26u8))).collect())
        .collect();
    let zipf = ZipfTable::new();
    let mut batches = Vec::new();
    for start in (0..rows).step_by(BATCH_ROWS) {
        let n = BATCH_ROWS.min(rows - start);
        let ids = Int64Array::from_iter_values((start..start + n).map(|i| i as i64));
        let date = TimestampMicrosecondArray::from(dates[start..start + n].to_vec());
        let delay = Int64Array::from_iter_values((0..n).map(|_| normal(&mut rng, 5.0, 40.0).round() as i64));
        let distance =
            Int64Array::from_iter_values((0..n).map(|_| normal(&mut rng, 800.0, 500.0).round().abs() as i64));
        let mut pick =
            || StringArray::from_iter_values((0..n).map(|_| airports[zipf.sample(&mut rng)].as_str()));
        let origin = pick();
        let dest = pick();
        batches.push(RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(ids),
                Arc::new(date),
                Arc::new(delay),
                Arc::new(distance),
                Arc::new(origin),
                Arc::new(dest),
            ],
        )?);
    }
    Ok(Table { name: "flights", key: &["id"], indexes: INDEXES, schema, batches })
}

/// A normal deviate (Box–Muller).
fn normal(rng: &mut StdRng, mean: f64, sd: f64) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random();
    mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Zipf's law over the airports as numpy's `zipf(1.3)` clipped to the
/// last one: rank k has weight k^-1.3, the last rank also the whole tail.
struct ZipfTable {
    cumulative: Vec<f64>,
}

impl ZipfTable {
    fn new() -> ZipfTable {
        let mut cumulative = Vec::with_capacity(AIRPORTS);
        let mut total = 0.0;
        for k in 1..AIRPORTS {
            total += (k as f64).powf(-ZIPF_EXPONENT);
            cumulative.push(total);
        }
        // The tail from rank 300 on, by the integral from 299.5.
        let last = AIRPORTS as f64 - 0.5;
        total += last.powf(1.0 - ZIPF_EXPONENT) / (ZIPF_EXPONENT - 1.0);
        cumulative.push(total);
        ZipfTable { cumulative }
    }

    fn sample(&self, rng: &mut StdRng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = rng.random_range(0.0..total);
        self.cumulative.partition_point(|&c| c <= x).min(AIRPORTS - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn flights_have_their_shape() {
        let t = flights(100_000).expect("generated");
        assert_eq!(t.rows(), 100_000);
        let b = &t.batches[0];
        let dates = b.column(1).as_any().downcast_ref::<TimestampMicrosecondArray>().expect("dates");
        assert!(dates.values().windows(2).all(|w| w[0] <= w[1]), "dates follow the key");
        let delay = b.column(2).as_any().downcast_ref::<Int64Array>().expect("delays");
        let mean = delay.values().iter().sum::<i64>() as f64 / delay.len() as f64;
        assert!((mean - 5.0).abs() < 1.5, "mean delay {mean}");
        // Zipf: the most common airport takes far more than 1/300 of the rows.
        let origin = b.column(4).as_any().downcast_ref::<StringArray>().expect("airports");
        let first = origin.value(0);
        let mut counts = std::collections::HashMap::new();
        for v in origin.iter().flatten() {
            *counts.entry(v).or_insert(0usize) += 1;
        }
        let top = counts.values().max().copied().unwrap_or(0);
        assert!(top > origin.len() / 10, "top airport {top} of {}, e.g. {first}", origin.len());
    }
}
