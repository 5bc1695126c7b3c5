//! Output: a table per workload on the terminal, the same tables in a
//! Markdown report, and SVG bar charts of throughput and latency per
//! engine (SVG text needs no system fonts).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::engine::{Kind, Result};
use crate::result::{Record, higher_is_better};

/// Metrics drawn as charts, when present.
pub const CHART_METRICS: [&str; 11] = [
    "insert_rows_per_s",
    "get_ops_per_s",
    "get_missing_ops_per_s",
    "get_p99_us",
    "get_breakdown_index_ns",
    "scan_rows_per_s",
    "range_scan_ops_per_s",
    "index_query_us",
    "peak_memory_bytes",
    "ops_per_s",
    "op_p99_us",
];

type GroupKey = (String, u64, String, usize);
/// One group: its key, its metrics in order, and its cells by (metric, engine).
type Group<'a> = (GroupKey, Vec<String>, BTreeMap<(String, String), &'a Record>);

/// Records grouped by (workload, scale, distribution, threads), in order of
/// first appearance, each with its metrics (in order) × engines.
struct Grouped<'a> {
    groups: Vec<Group<'a>>,
    engines: Vec<String>,
}

fn group(records: &[Record]) -> Grouped<'_> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for r in records {
        let key = (r.workload.clone(), r.scale, r.distribution.clone(), r.threads);
        let idx = if let Some(i) = groups.iter().position(|g| g.0 == key) {
            i
        } else {
            groups.push((key, Vec::new(), BTreeMap::new()));
            groups.len() - 1
        };
        let g = &mut groups[idx];
        if !g.1.contains(&r.metric) {
            g.1.push(r.metric.clone());
        }
        g.2.insert((r.metric.clone(), r.engine.clone()), r);
    }
    let engines = engine_order(records.iter()).into_iter().map(str::to_string).collect();
    Grouped { groups, engines }
}

/// The engines of `records` in report order: the built-in engines in
/// `Kind::ALL`'s order, then variants a workload measures in the same job
/// under a name of their own (`basalt-scan`, `basalt-rows`), as they first
/// appear.
fn engine_order<'r>(records: impl Iterator<Item = &'r Record> + Clone) -> Vec<&'r str> {
    let mut engines: Vec<&str> = Vec::new();
    for k in Kind::ALL {
        if let Some(r) = records.clone().find(|r| r.engine == k.name()) {
            engines.push(&r.engine);
        }
    }
    for r in records {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    engines
}

/// A value in a short human form with its unit.
pub fn human(value: f64, unit: &str) -> String {
    match unit {
        "bytes" => format!("{:.1} MiB", value / f64::from(1u32 << 20)),
        "x" => format!("{value:.2}x"),
        "ns" | "us" | "ms" => format!("{} {unit}", sig(value)),
        _ => {
            let (v, suffix) = if value >= 1e6 {
                (value / 1e6, "M")
            } else if value >= 1e3 {
                (value / 1e3, "K")
            } else {
                (value, "")
            };
            format!("{}{suffix}", sig(v))
        }
    }
}

/// Three significant digits.
fn sig(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The lowest and highest value of every measurement over its runs.
pub type Ranges = BTreeMap<(String, String, u64, String, usize, String, Option<String>), (f64, f64)>;

/// Collects [`Ranges`] from the records of every run.
pub fn ranges(runs: &[Record]) -> Ranges {
    let mut out = Ranges::new();
    for r in runs {
        let e = out.entry(r.key()).or_insert((r.value, r.value));
        e.0 = e.0.min(r.value);
        e.1 = e.1.max(r.value);
    }
    out
}

fn cell(r: &Record, ranges: Option<&Ranges>) -> String {
    let median = human(r.value, &r.unit);
    match ranges.and_then(|g| g.get(&r.key())) {
        Some(&(lo, hi)) if r.env.runs > 1 => {
            format!("**{median}** ({}–{})", human(lo, &r.unit), human(hi, &r.unit))
        }
        _ => median,
    }
}

fn table(records: &[Record], markdown: bool, ranges: Option<&Ranges>) -> String {
    let g = group(records);
    let mut out = String::new();
    for ((workload, scale, dist, threads), metrics, cells) in &g.groups {
        let title = format!("{workload} — {scale} rows, {dist}, {threads} thread(s)");
        let mut rows: Vec<Vec<String>> =
            vec![std::iter::once("metric".to_string()).chain(g.engines.clone()).collect()];
        for m in metrics {
            let mut row = vec![m.clone()];
            for e in &g.engines {
                row.push(cells.get(&(m.clone(), e.clone())).map_or_else(String::new, |r| cell(r, ranges)));
            }
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        if markdown {
            let _ = writeln!(out, "### {title}\n");
        } else {
            let _ = writeln!(out, "\n{title}");
        }
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, s)| {
                    if c == 0 { format!("{s:<w$}", w = widths[c]) } else { format!("{s:>w$}", w = widths[c]) }
                })
                .collect();
            if markdown {
                let _ = writeln!(out, "| {} |", cells.join(" | "));
                if i == 0 {
                    let seps: Vec<String> = widths
                        .iter()
                        .enumerate()
                        .map(|(c, w)| if c == 0 { "-".repeat(*w) } else { format!("{}:", "-".repeat(w - 1)) })
                        .collect();
                    let _ = writeln!(out, "| {} |", seps.join(" | "));
                }
            } else {
                let _ = writeln!(out, "  {}", cells.join("  "));
            }
        }
        if markdown {
            out.push('\n');
        }
    }
    out
}

/// The tables for the terminal.
pub fn terminal_table(records: &[Record]) -> String {
    table(records, false, None)
}

/// The Markdown report: command, environment, tables (with the range of
/// the runs next to each median) and charts.
pub fn markdown(
    records: &[Record],
    ranges: &Ranges,
    command: &str,
    charts: &[PathBuf],
    failures: &[String],
) -> String {
    let mut out = String::from("# Basalt benchmark report\n\n");
    let _ = writeln!(out, "Command: `{command}`\n");
    if let Some(r) = records.first() {
        let m = &r.env.machine;
        let _ = writeln!(
            out,
            "Date {} · {} · {} cores · {:.1} GiB · commit {} · {} build · {}\n",
            m.date,
            m.cpu,
            m.cores,
            m.memory_bytes as f64 / f64::from(1u32 << 30),
            m.git_commit,
            m.build,
            r.env.harness
        );
        let mut seen = Vec::new();
        out.push_str("| engine | version | options |\n| --- | --- | --- |\n");
        for r in records {
            if !seen.contains(&r.engine) {
                seen.push(r.engine.clone());
                let _ =
                    writeln!(out, "| {} | {} | {} |", r.engine, r.env.engine_version, r.env.engine_options);
            }
        }
        out.push('\n');
    }
    if !failures.is_empty() {
        out.push_str("## Failures\n\n");
        for f in failures {
            let _ = writeln!(out, "- {f}");
        }
        out.push('\n');
    }
    out.push_str("## Results\n\n");
    out.push_str(
        "`basalt_speedup_<metric>` is Basalt's advantage over that engine (above 1: Basalt wins).\n\n",
    );
    if records.iter().any(|r| r.env.runs > 1) {
        out.push_str("Each cell: **median** (lowest–highest) of the runs.\n\n");
    }
    out.push_str(&table(records, true, Some(ranges)));
    if !charts.is_empty() {
        out.push_str("## Charts\n\n");
        for c in charts {
            let name = c.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let _ = writeln!(out, "![{name}]({name})\n");
        }
    }
    out
}

fn color(engine: &str) -> RGBColor {
    match engine {
        "basalt" => RGBColor(204, 85, 0),
        "basalt-fences" => RGBColor(240, 160, 90),
        "sqlite" => RGBColor(70, 110, 170),
        "lmdb" => RGBColor(90, 160, 90),
        "redb" => RGBColor(180, 60, 60),
        "fjall" => RGBColor(140, 100, 180),
        "rocksdb" => RGBColor(110, 110, 110),
        _ => RGBColor(200, 170, 60),
    }
}

/// Draws one bar chart per (workload, metric) of [`CHART_METRICS`] into
/// `dir`; returns the files written.
pub fn charts(records: &[Record], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for r in records {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    for workload in workloads {
        for metric in CHART_METRICS {
            let rs: Vec<&Record> =
                records.iter().filter(|r| r.workload == workload && r.metric == metric).collect();
            if rs.is_empty() {
                continue;
            }
            let path = dir.join(format!("{workload}-{metric}.svg"));
            draw_bars(&path, workload, metric, &rs)?;
            written.push(path);
        }
    }
    Ok(written)
}

fn draw_bars(path: &Path, workload: &str, metric: &str, rs: &[&Record]) -> Result<()> {
    let mut groups: Vec<(u64, String, usize)> = Vec::new();
    let engines = engine_order(rs.iter().copied());
    for r in rs {
        let g = (r.scale, r.distribution.clone(), r.threads);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let unit = rs[0].unit.clone();
    let scale = if unit == "bytes" { f64::from(1u32 << 20) } else { 1.0 };
    let shown_unit = if unit == "bytes" { "MiB" } else { unit.as_str() };
    let ymax = rs.iter().map(|r| r.value / scale).fold(0.0, f64::max).max(1e-9) * 1.45;
    let slot = engines.len() + 1;
    let xmax = (groups.len() * slot) as f64;
    let width = (160 + groups.len() * slot * 34).clamp(640, 1600) as u32;

    let root = SVGBackend::new(path, (width, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let better = match higher_is_better(metric) {
        Some(true) => " (higher is better)",
        Some(false) => " (lower is better)",
        None => "",
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{workload}: {metric}{better}"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(shown_unit)
        .y_label_formatter(&|v| human(*v, if unit == "bytes" { "" } else { unit.as_str() }))
        .draw()
        .map_err(|e| e.to_string())?;
    for (gi, (scale_rows, dist, threads)) in groups.iter().enumerate() {
        let x = (gi * slot) as f64 + slot as f64 / 2.0 - 0.5;
        let (px, py) = chart.backend_coord(&(x, 0.0));
        let label = format!("{scale_rows} rows, {dist}, {threads} thread(s)");
        let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(label, (px, py + 8), style)).map_err(|e| e.to_string())?;
    }
    for (ei, engine) in engines.iter().enumerate() {
        let c = color(engine);
        let bars: Vec<(f64, f64)> = groups
            .iter()
            .enumerate()
            .filter_map(|(gi, g)| {
                rs.iter()
                    .find(|r| r.engine == *engine && (r.scale, r.distribution.clone(), r.threads) == *g)
                    .map(|r| ((gi * slot + ei) as f64 + 0.5, r.value / scale))
            })
            .collect();
        chart
            .draw_series(bars.iter().map(|&(x, y)| Rectangle::new([(x, 0.0), (x + 0.9, y)], c.filled())))
            .map_err(|e| e.to_string())?
            .label(*engine)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart
            .draw_series(bars.iter().map(|&(x, y)| {
                Text::new(
                    human(y, if unit == "bytes" { "" } else { unit.as_str() }),
                    (x, y + ymax * 0.04),
                    ("sans-serif", 10).into_font(),
                )
            }))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes a run's results and its Markdown report (`title`, the command
/// that ran, `table`) into `dir`, and prints the table and where both went.
pub fn write_run(dir: &Path, records: &[Record], title: &str, table: &str) -> Result<()> {
    crate::result::write_jsonl(&dir.join("results.jsonl"), records)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    std::fs::write(dir.join("report.md"), format!("# {title}\n\nCommand: `{command}`\n\n{table}"))?;
    println!("{table}");
    println!("\nresults: {}/results.jsonl, report: {}/report.md", dir.display(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Env;

    fn rec(engine: &str, metric: &str, value: f64, unit: &str) -> Record {
        Record {
            workload: "omendb".into(),
            engine: engine.into(),
            scale: 1000,
            distribution: "random".into(),
            threads: 1,
            metric: metric.into(),
            value,
            unit: unit.into(),
            env: Env::default(),
            query: None,
            result_rows: None,
            rows_read: None,
        }
    }

    #[test]
    fn tables_and_charts_render() {
        let records = vec![
            rec("basalt", "get_ops_per_s", 250_000.0, "ops/s"),
            rec("sqlite", "get_ops_per_s", 120_000.0, "ops/s"),
            rec("basalt", "get_p99_us", 7.5, "us"),
            rec("basalt", "peak_memory_bytes", 64.0 * 1_048_576.0, "bytes"),
        ];
        let t = terminal_table(&records);
        assert!(
            t.contains("250K") && t.contains("120K") && t.contains("7.50 us") && t.contains("64.0 MiB"),
            "{t}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let files = charts(&records, dir.path()).expect("charts");
        assert_eq!(files.len(), 3);
        let svg = std::fs::read_to_string(&files[0]).expect("svg");
        assert!(svg.contains("<svg") && svg.contains("basalt"), "{svg}");
        let md = markdown(&records, &ranges(&records), "basalt-bench quick", &files, &[]);
        assert!(md.contains("| get_ops_per_s") && md.contains("![omendb-get_ops_per_s.svg]"), "{md}");
    }

    #[test]
    fn variants_outside_the_engine_list_get_a_column_after_the_engines() {
        let records = vec![
            rec("basalt-rows", "delete_ms", 900.0, "ms"),
            rec("sqlite", "delete_ms", 2000.0, "ms"),
            rec("basalt", "delete_ms", 0.05, "ms"),
        ];
        assert_eq!(engine_order(records.iter()), ["basalt", "sqlite", "basalt-rows"]);
        let t = terminal_table(&records);
        assert!(t.contains("basalt-rows") && t.contains("900 ms"), "{t}");
    }
}
