//! The README's main command at a tiny scale: `quick` runs every workload
//! for Basalt and one peer in child processes, and its result files parse
//! and hold the metrics the schema promises.

use std::process::Command;

use basalt_bench::result::read_jsonl;

#[test]
fn quick_at_tiny_scale_writes_parseable_results() {
    let out = tempfile::tempdir().expect("tempdir");
    let run = Command::new(env!("CARGO_BIN_EXE_basalt-bench"))
        .args(["quick", "--scale", "2000", "--engines", "basalt,sqlite", "--out"])
        .arg(out.path())
        .output()
        .expect("run basalt-bench");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "quick failed: {}\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("omendb") && stdout.contains("get_ops_per_s"), "the terminal table: {stdout}");

    let dirs: Vec<_> = std::fs::read_dir(out.path())
        .expect("out dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("quick-")))
        .collect();
    assert_eq!(dirs.len(), 1, "one result directory");
    let dir = &dirs[0];
    let records = read_jsonl(&dir.join("results.jsonl")).expect("results parse");
    let has = |workload: &str, engine: &str, metric: &str| {
        records.iter().any(|r| {
            r.workload == workload && r.engine == engine && r.metric == metric && r.value.is_finite()
        })
    };
    for engine in ["basalt", "sqlite"] {
        for metric in [
            "insert_rows_per_s",
            "get_ops_per_s",
            "get_missing_ops_per_s",
            "get_p50_us",
            "get_p99_us",
            "peak_memory_bytes",
        ] {
            assert!(has("omendb", engine, metric), "omendb {engine} {metric}");
        }
        for metric in [
            "insert_rows_per_s",
            "scan_rows_per_s",
            "range_scan_ops_per_s",
            "index_query_us",
            "peak_memory_bytes",
        ] {
            assert!(has("marbledb", engine, metric), "marbledb {engine} {metric}");
        }
        for workload in ["ycsb-a", "ycsb-c", "ycsb-e"] {
            assert!(has(workload, engine, "ops_per_s"), "{workload} {engine}");
        }
        assert!(has("marbledb-backpressure", engine, "peak_memory_bytes"));
    }
    for engine in ["basalt", "sqlite"] {
        for metric in ["insert_rows_per_s", "scan_rows_per_s"] {
            assert!(has("arrow", engine, metric), "arrow {engine} {metric}");
        }
    }
    assert!(
        records
            .iter()
            .any(|r| r.workload == "arrow" && r.distribution == "columnar" && r.metric == "scan_rows_per_s"),
        "Basalt's columnar path"
    );
    assert!(has("arrow", "sqlite", "columnar_speedup_scan_rows_per_s"));
    assert!(has("marbledb-backpressure", "basalt", "throughput_kept_ratio"));
    assert!(has("marbledb-backpressure", "basalt", "stall_max_ms"));
    assert!(has("omendb", "sqlite", "basalt_speedup_get_ops_per_s"));
    for prefix in ["get_breakdown", "get_missing_breakdown"] {
        for phase in ["memtable", "filter", "index", "block", "search", "total"] {
            let metric = format!("{prefix}_{phase}_ns");
            assert!(has("omendb", "basalt", &metric), "{metric}");
            assert!(!has("omendb", "sqlite", &metric), "{metric} is Basalt's alone");
        }
    }
    let r = &records[0];
    assert!(!r.env.machine.cpu.is_empty() && r.env.machine.cores > 0 && r.env.machine.memory_bytes > 0);
    assert!(!r.env.engine_version.is_empty() && !r.env.engine_options.is_empty());
    assert!(read_jsonl(&dir.join("runs.jsonl")).is_ok());
    let report = std::fs::read_to_string(dir.join("report.md")).expect("report");
    assert!(report.contains("| get_ops_per_s"));
    assert!(dir.join("omendb-get_ops_per_s.svg").exists());
}

/// The equal-memory mode where this machine lets the harness make memory
/// cgroups (root with cgroup v1 or v2): every workload's read phases run a
/// second time under the limit, recorded as `<workload>@<N>MiB` with the
/// cgroup's peak. Elsewhere the harness must refuse the flag up front.
#[test]
fn equal_memory_mode_reruns_the_reads_under_a_cgroup_limit() {
    let out = tempfile::tempdir().expect("tempdir");
    let run = Command::new(env!("CARGO_BIN_EXE_basalt-bench"))
        .args(["quick", "--scale", "2000", "--engines", "basalt,lmdb", "--memory-mib", "64", "--out"])
        .arg(out.path())
        .output()
        .expect("run basalt-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    match basalt_bench::memory::create(&format!("basalt-bench-test-{}", std::process::id()), 64 << 20) {
        Ok(probe) => basalt_bench::memory::remove(&probe),
        Err(e) => {
            assert!(!run.status.success() && stderr.contains("memory cgroup"), "{stderr}");
            eprintln!("equal-memory mode is not available here, and the harness says so: {e}");
            return;
        }
    }
    assert!(run.status.success(), "quick --memory-mib failed: {stderr}");
    let dir = std::fs::read_dir(out.path())
        .expect("out")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("quick-"))
        .expect("a result directory");
    let records = read_jsonl(&dir.path().join("results.jsonl")).expect("results parse");
    for engine in ["basalt", "lmdb"] {
        for (workload, metric) in [
            ("omendb@64MiB", "get_ops_per_s"),
            ("omendb@64MiB", "cgroup_peak_bytes"),
            ("marbledb@64MiB", "scan_rows_per_s"),
            ("ycsb-c@64MiB", "ops_per_s"),
            ("arrow@64MiB", "scan_rows_per_s"),
        ] {
            let found =
                records.iter().find(|r| r.workload == workload && r.engine == engine && r.metric == metric);
            let value = found.unwrap_or_else(|| panic!("{workload} {engine} {metric}")).value;
            assert!(value > 0.0, "{workload} {engine} {metric}");
            if metric == "cgroup_peak_bytes" {
                assert!(value <= f64::from(64u32 << 20), "{engine} stayed under its limit: {value}");
            }
        }
    }
}
