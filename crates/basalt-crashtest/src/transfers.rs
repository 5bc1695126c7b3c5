//! The transactions workload: each batch is one transaction that reads two
//! accounts of its thread (rows of the `accounts` table, keyed by thread
//! and account) and a key-value counter for update, moves an amount
//! between the accounts and bumps the counter, and commits. The amounts
//! depend only on the seed, the thread and the batch id, so the model
//! replays them without reading; the values written depend on what the
//! transaction read, so a commit that read anything but the acknowledged
//! state shows as a wrong balance. Every balance starts at 0 and transfers
//! conserve the sum: a half-applied transaction breaks it.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use basalt::{Db, Error, KeyValue, Table, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::workload::{Model, Workload, judge};

/// Accounts per writer thread: few, so transfers reuse them.
const ACCOUNTS: i32 = 16;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("thread", DataType::Int32, false),
        Field::new("account", DataType::Int32, false),
        Field::new("balance", DataType::Int64, false),
        Field::new("batch", DataType::Int64, false),
    ]))
}

/// The transfer of batch `id` of `thread`: from, to, amount.
fn transfer(seed: u64, thread: u32, id: u64) -> (i32, i32, i64) {
    let mut rng = StdRng::seed_from_u64(crate::mix(&[seed, 0x7478, u64::from(thread), id]));
    let from = rng.random_range(0..ACCOUNTS);
    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    (from, to, rng.random_range(1..1_000))
}

fn counter_key(thread: u32) -> String {
    format!("transfers/{thread:02}/count")
}

/// The transactions workload; see the module docs.
pub struct TransfersWorkload {
    seed: u64,
    table: OnceLock<Table>,
}

impl TransfersWorkload {
    pub fn new(seed: u64) -> TransfersWorkload {
        TransfersWorkload { seed, table: OnceLock::new() }
    }
}

fn balance_of(row: Option<RecordBatch>) -> i64 {
    row.map_or(0, |r| r.column(2).as_primitive::<Int64Type>().value(0))
}

impl Workload for TransfersWorkload {
    fn name(&self) -> &'static str {
        "transfers"
    }

    fn prepare(&self, db: &Db) -> basalt::Result<()> {
        let table = crate::tables::open_or_create(db, "accounts", schema(), &["thread", "account"])?;
        let _ = self.table.set(table);
        Ok(())
    }

    fn write(&self, db: &Db, thread: u32, id: u64, sync: bool) -> basalt::Result<()> {
        let table = self.table.get().ok_or_else(|| Error::InvalidArgument("not prepared".into()))?;
        let (from, to, amount) = transfer(self.seed, thread, id);
        let t = thread as i32;
        let mut tx = db.transaction();
        let a = balance_of(tx.get_table_for_update(table, &[KeyValue::I32(t), KeyValue::I32(from)])?);
        let b = balance_of(tx.get_table_for_update(table, &[KeyValue::I32(t), KeyValue::I32(to)])?);
        let count: u64 = tx
            .get_for_update(counter_key(thread))?
            .and_then(|v| std::str::from_utf8(&v).ok()?.split('|').next()?.parse().ok())
            .unwrap_or(0);
        let rows = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int32Array::from(vec![t, t])),
                Arc::new(Int32Array::from(vec![from, to])),
                Arc::new(Int64Array::from(vec![a - amount, b + amount])),
                Arc::new(Int64Array::from(vec![id as i64, id as i64])),
            ],
        )
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        tx.put_table(table, &rows)?;
        tx.put(counter_key(thread), format!("{}|batch {id}", count + 1))?;
        tx.commit_opt(&WriteOptions::default().sync(sync))
    }

    fn model(&self, thread: u32) -> Box<dyn Model> {
        Box::new(TransfersModel { seed: self.seed, thread, state: BTreeMap::new(), count: 0 })
    }
}

/// One thread's accounts (account → balance and the batch that wrote it)
/// and its counter after its confirmed batches.
struct TransfersModel {
    seed: u64,
    thread: u32,
    state: BTreeMap<String, String>,
    count: u64,
}

/// `state` after batch `id`, the `count`-th transaction, given the
/// balances it holds.
fn apply(state: &mut BTreeMap<String, String>, seed: u64, thread: u32, id: u64, count: u64) {
    let (from, to, amount) = transfer(seed, thread, id);
    let balance = |state: &BTreeMap<String, String>, account: i32| -> i64 {
        state
            .get(&format!("account {account:02}"))
            .and_then(|v| v.split(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    let (a, b) = (balance(state, from), balance(state, to));
    state.insert(format!("account {from:02}"), format!("{} batch {id}", a - amount));
    state.insert(format!("account {to:02}"), format!("{} batch {id}", b + amount));
    state.insert("count".into(), format!("{count}|batch {id}"));
}

impl Model for TransfersModel {
    fn apply(&mut self, id: u64) {
        self.count += 1;
        apply(&mut self.state, self.seed, self.thread, id, self.count);
    }

    fn check(&self, db: &Db, pending: Option<u64>) -> Result<bool, String> {
        let who = format!("transfers thread {}", self.thread);
        // A writer killed before it created the table leaves none: right
        // only while nothing was acknowledged.
        let Ok(table) = db.table("accounts") else {
            if self.count == 0 {
                return Ok(false);
            }
            return Err(format!("{who}: table accounts missing after {} acknowledged commits", self.count));
        };
        let t = self.thread as i32;
        let mut got = BTreeMap::new();
        let mut sum = 0i64;
        for account in 0..ACCOUNTS {
            let row = table
                .get(&[KeyValue::I32(t), KeyValue::I32(account)])
                .map_err(|e| format!("{who}: account {account}: {e}"))?;
            if let Some(row) = row {
                let balance = row.column(2).as_primitive::<Int64Type>().value(0);
                let batch = row.column(3).as_primitive::<Int64Type>().value(0);
                sum += balance;
                got.insert(format!("account {account:02}"), format!("{balance} batch {batch}"));
            }
        }
        if sum != 0 {
            return Err(format!("{who}: the balances sum to {sum}, not 0: half a transfer is there"));
        }
        let count = db.get(counter_key(self.thread)).map_err(|e| format!("{who}: counter: {e}"))?;
        if let Some(v) = count {
            got.insert("count".into(), String::from_utf8_lossy(&v).into_owned());
        }
        let apply_pending =
            |state: &mut BTreeMap<String, String>, p| apply(state, self.seed, self.thread, p, self.count + 1);
        judge(&who, &got, &self.state, pending, apply_pending, |v| format!("{v:?}"))
    }
}
