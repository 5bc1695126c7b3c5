//! The write-buffer manager's policy: given the memory held by memtables,
//! the size of the next write group and the number of L0 files, should the
//! writer go ahead, be delayed, or wait for background work? A pure
//! function, so tests call it directly.

use std::time::Duration;

use crate::options::Options;

/// What a write group must do before it is inserted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StallAction {
    /// Go ahead.
    Proceed,
    /// Sleep this long once, then go ahead: the soft zone.
    Delay(Duration),
    /// The active memtable is over its switch size: make it immutable.
    SwitchMemtable,
    /// Wait for a flush to free memtable memory (hard limit or too many
    /// immutable memtables).
    WaitForFlush,
    /// Wait for compaction to reduce L0.
    WaitForCompaction,
}

/// Inputs of the decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteBufferState {
    /// Bytes in the active memtable.
    pub active_bytes: usize,
    /// Bytes in all memtables, active and immutable.
    pub total_bytes: usize,
    /// Immutable memtables waiting for flush.
    pub immutables: usize,
    /// Most L0 files of any tree.
    pub l0_files: usize,
    /// Bytes the next group will add to the memtable.
    pub incoming_bytes: usize,
    /// Memtable bytes the flush thread recently wrote out per second of
    /// flushing (0 until a flush was measured).
    pub drain_bytes_per_sec: u64,
}

/// Decides what a writer must do before inserting `incoming_bytes`.
pub(crate) fn decide(s: &WriteBufferState, opts: &Options) -> StallAction {
    let hard = opts.write_buffer_bytes_max;
    let over_hard = s.total_bytes > 0 && s.total_bytes + s.incoming_bytes > hard;
    if over_hard || s.active_bytes >= opts.memtable_switch_bytes() {
        // Memory is only freed by flushing immutable memtables; with none
        // queued, the active one must be switched first.
        if s.active_bytes > 0 && s.immutables < opts.immutable_memtables_max {
            return StallAction::SwitchMemtable;
        }
        if over_hard || s.immutables >= opts.immutable_memtables_max {
            return StallAction::WaitForFlush;
        }
    }
    if opts.auto_compaction && s.l0_files >= opts.l0_files_stop {
        return StallAction::WaitForCompaction;
    }
    let soft = (hard as u128 * u128::from(opts.write_buffer_soft_percent.min(100)) / 100) as usize;
    let configured = opts.delayed_write_bytes_per_sec.max(1) as f64;
    let incoming = s.incoming_bytes as f64;
    let mut us = 0.0f64;
    if s.total_bytes > soft && hard > soft {
        let pressure = ((s.total_bytes - soft) as f64 / (hard - soft) as f64).min(1.0);
        us = if s.drain_bytes_per_sec > 0 {
            // Pace writers to what flushing drains: at the drain rate just
            // over the soft limit, half of it at the hard limit, so memtable
            // memory settles in the soft zone and writers neither stop nor
            // wait for more than the flush needs. A fixed rate (RocksDB's
            // 16 MiB/s) held writers at 0.34-0.56 of their unlimited rate
            // when flushing ran 20 times faster.
            let rate = (s.drain_bytes_per_sec as f64 * (1.0 - 0.5 * pressure)).max(configured);
            incoming / rate * 1e6
        } else {
            // Nothing measured yet: the configured rate, scaled by pressure.
            incoming / configured * 1e6 * pressure
        };
    }
    if opts.auto_compaction && s.l0_files >= opts.l0_files_slowdown {
        // Compaction debt: the configured rate at `l0_files_stop - 1`,
        // less below it.
        let span = opts.l0_files_stop.saturating_sub(opts.l0_files_slowdown).max(1);
        let pressure = ((s.l0_files - opts.l0_files_slowdown + 1) as f64 / span as f64).min(1.0);
        us = us.max(incoming / configured * 1e6 * pressure);
    }
    if us > 0.0 {
        return StallAction::Delay(Duration::from_micros((us.ceil() as u64).max(1)));
    }
    StallAction::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            memtable_bytes_max: 64 << 20,
            write_buffer_bytes_max: 32 << 20,
            write_buffer_soft_percent: 75,
            delayed_write_bytes_per_sec: 1_000_000,
            immutable_memtables_max: 3,
            l0_files_slowdown: 8,
            l0_files_stop: 12,
            ..Options::default()
        }
    }

    fn state(active: usize, total: usize, imms: usize, l0: usize) -> WriteBufferState {
        WriteBufferState {
            active_bytes: active,
            total_bytes: total,
            immutables: imms,
            l0_files: l0,
            incoming_bytes: 4000,
            drain_bytes_per_sec: 0,
        }
    }

    #[test]
    fn memtables_switch_at_a_quarter_of_a_small_budget() {
        assert_eq!(opts().memtable_switch_bytes(), 8 << 20);
        assert_eq!(decide(&state(8 << 20, 8 << 20, 0, 0), &opts()), StallAction::SwitchMemtable);
        assert_eq!(decide(&state(1 << 20, 1 << 20, 0, 0), &opts()), StallAction::Proceed);
    }

    #[test]
    fn soft_zone_delays_in_proportion() {
        let mid = 28 << 20; // halfway between 24 MiB (soft) and 32 MiB (hard)
        match decide(&state(1 << 20, mid, 2, 0), &opts()) {
            // 4000 bytes at 1 MB/s is 4 ms; half pressure halves it.
            StallAction::Delay(d) => assert_eq!(d, Duration::from_millis(2)),
            other => panic!("expected a delay, got {other:?}"),
        }
    }

    #[test]
    fn a_measured_flush_rate_paces_the_soft_zone() {
        let mid = 28 << 20;
        let at = |drain: u64| {
            decide(&WriteBufferState { drain_bytes_per_sec: drain, ..state(1 << 20, mid, 2, 0) }, &opts())
        };
        // Half pressure: three quarters of an 8 MB/s drain; 4000 bytes at 6 MB/s.
        assert_eq!(at(8_000_000), StallAction::Delay(Duration::from_micros(667)));
        // Never slower than the configured rate.
        assert_eq!(at(1_000), StallAction::Delay(Duration::from_millis(4)));
        // Under the soft limit nothing waits, whatever the drain.
        let calm = WriteBufferState { drain_bytes_per_sec: 1_000, ..state(1 << 20, 1 << 20, 0, 0) };
        assert_eq!(decide(&calm, &opts()), StallAction::Proceed);
    }

    #[test]
    fn hard_limit_switches_then_waits() {
        let full = 32 << 20;
        assert_eq!(decide(&state(1 << 20, full, 1, 0), &opts()), StallAction::SwitchMemtable);
        assert_eq!(decide(&state(0, full, 3, 0), &opts()), StallAction::WaitForFlush);
        assert_eq!(decide(&state(1 << 20, full, 3, 0), &opts()), StallAction::WaitForFlush);
    }

    #[test]
    fn l0_files_delay_then_stop_unless_compaction_is_off() {
        assert!(matches!(decide(&state(0, 0, 0, 8), &opts()), StallAction::Delay(_)));
        assert_eq!(decide(&state(0, 0, 0, 12), &opts()), StallAction::WaitForCompaction);
        let manual = Options { auto_compaction: false, ..opts() };
        assert_eq!(decide(&state(0, 0, 0, 50), &manual), StallAction::Proceed);
    }

    #[test]
    fn an_oversized_batch_into_empty_memtables_proceeds() {
        let s = WriteBufferState { incoming_bytes: 100 << 20, ..state(0, 0, 0, 0) };
        assert_eq!(decide(&s, &opts()), StallAction::Proceed);
    }
}
