//! Reading a file in batches: CSV, JSON lines, Parquet and Arrow IPC,
//! each through its Arrow reader, with how far through the file it is.
//! CSV and JSON are read as text and typed afterwards (`conform.rs`), so
//! that a value that does not parse is found with its row, not as an
//! error for a whole batch.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use clap::ValueEnum;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{CliError, CliResult, Exit};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    Csv,
    /// Tab-separated values.
    Tsv,
    /// JSON lines: one object per line.
    Jsonl,
    Parquet,
    /// Arrow IPC, file or stream.
    Arrow,
}

impl InputFormat {
    /// The format a file's extension names.
    pub fn of(path: &Path) -> CliResult<InputFormat> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        Ok(match ext.as_str() {
            "csv" => InputFormat::Csv,
            "tsv" | "tab" => InputFormat::Tsv,
            "jsonl" | "ndjson" | "json" => InputFormat::Jsonl,
            "parquet" | "pq" => InputFormat::Parquet,
            "arrow" | "arrows" | "ipc" | "feather" => InputFormat::Arrow,
            _ => {
                return Err(CliError::usage(format!(
                    "cannot tell the format of {} from its name: give --input-format",
                    path.display()
                )));
            }
        })
    }
}

/// How text formats are read.
#[derive(Debug, Clone)]
pub struct TextOptions {
    pub delimiter: Option<u8>,
    pub header: bool,
    /// Text read as null besides the empty field.
    pub null: Option<String>,
    pub batch_rows: usize,
    pub infer_rows: usize,
}

/// A `Read` that counts the bytes it hands out, for the progress bar.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, arrow_schema::ArrowError>> + Send>;

/// One file being read.
pub struct Source {
    pub path: PathBuf,
    /// The file's columns as they should be typed (inferred, or as the
    /// file's own schema says).
    pub schema: SchemaRef,
    /// Bytes in the file.
    pub size: u64,
    batches: Batches,
    progress: Progress,
    /// Data rows read so far.
    pub rows: u64,
}

enum Progress {
    Bytes(Arc<AtomicU64>),
    /// Rows read of a known total (Parquet).
    Rows(u64),
    /// Batches read of a known total (an Arrow IPC file).
    Batches(u64, u64),
}

fn open_file(path: &Path) -> CliResult<File> {
    File::open(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
}

/// The schema with every column as nullable text.
fn as_text(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema.fields().iter().map(|f| Field::new(f.name(), DataType::Utf8, true)).collect::<Vec<_>>(),
    ))
}

/// A type the engine stores, for one a reader produced: views and
/// dictionaries are stored as their plain types, columns inferred from
/// nulls alone as text.
fn storable(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Utf8View | DataType::Null => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::Dictionary(_, value) => storable(value),
        other => other.clone(),
    }
}

fn storable_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), storable(f.data_type()), true))
            .collect::<Vec<_>>(),
    ))
}

fn csv_format(format: InputFormat, text: &TextOptions) -> CliResult<arrow_csv::reader::Format> {
    let delimiter = text.delimiter.unwrap_or(if format == InputFormat::Tsv { b'\t' } else { b',' });
    let mut csv = arrow_csv::reader::Format::default().with_header(text.header).with_delimiter(delimiter);
    if let Some(null) = &text.null {
        let pattern = format!("^$|^{}$", regex::escape(null));
        csv = csv.with_null_regex(regex::Regex::new(&pattern).map_err(|e| CliError::usage(e.to_string()))?);
    }
    Ok(csv)
}

impl Source {
    /// Opens `path` as `format`. A text format's column names come from
    /// the file, their types from inference over its first rows (the
    /// table's types win when it exists: `conform.rs` casts).
    pub fn open(path: &Path, format: InputFormat, text: &TextOptions) -> CliResult<Source> {
        let mut file = open_file(path)?;
        let size = file.metadata()?.len();
        let context = |e: arrow_schema::ArrowError| CliError::from(e).context(path.display());
        // Inference reads the first rows: a line it cannot take there is
        // bad data, as it would be further on (see `next_batch`).
        let bad_text = |e: arrow_schema::ArrowError| bad_data(CliError::from(e)).context(path.display());
        let count = Arc::new(AtomicU64::new(0));
        let counting = |file: File| Counting { inner: file, count: count.clone() };
        let (schema, batches, progress): (SchemaRef, Batches, Progress) = match format {
            InputFormat::Csv | InputFormat::Tsv => {
                let csv = csv_format(format, text)?;
                let (inferred, _) = csv.infer_schema(&mut file, Some(text.infer_rows)).map_err(bad_text)?;
                let typed = storable_schema(&inferred);
                file.seek(SeekFrom::Start(0))?;
                let reader = arrow_csv::ReaderBuilder::new(as_text(&typed))
                    .with_format(csv)
                    .with_batch_size(text.batch_rows)
                    .build(counting(file))
                    .map_err(context)?;
                (typed, Box::new(reader), Progress::Bytes(count.clone()))
            }
            InputFormat::Jsonl => {
                refuse_json_array(&mut file, path)?;
                let (inferred, _) =
                    arrow_json::reader::infer_json_schema(BufReader::new(&mut file), Some(text.infer_rows))
                        .map_err(bad_text)?;
                file.seek(SeekFrom::Start(0))?;
                let typed = storable_schema(&in_written_order(&inferred, &first_object_keys(&mut file)));
                file.seek(SeekFrom::Start(0))?;
                let reader = arrow_json::ReaderBuilder::new(as_text(&typed))
                    .with_batch_size(text.batch_rows)
                    .with_coerce_primitive(true)
                    // A key the inference did not see is an error, not
                    // a column silently dropped.
                    .with_strict_mode(true)
                    .build(BufReader::new(counting(file)))
                    .map_err(context)?;
                (typed, Box::new(reader), Progress::Bytes(count.clone()))
            }
            InputFormat::Parquet => {
                let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                    .map_err(|e| CliError::from(e).context(path.display()))?;
                let own = builder.schema().clone();
                let total = builder.metadata().file_metadata().num_rows().max(0) as u64;
                let reader = builder
                    .with_batch_size(text.batch_rows)
                    .build()
                    .map_err(|e| CliError::from(e).context(path.display()))?;
                (storable_schema(&own), Box::new(reader), Progress::Rows(total))
            }
            InputFormat::Arrow => {
                let mut magic = [0u8; 6];
                let is_file = file.read_exact(&mut magic).is_ok() && &magic == b"ARROW1";
                file.seek(SeekFrom::Start(0))?;
                if is_file {
                    let reader = arrow_ipc::reader::FileReader::try_new(file, None).map_err(context)?;
                    let total = reader.num_batches() as u64;
                    let own = reader.schema();
                    (storable_schema(&own), Box::new(reader), Progress::Batches(0, total))
                } else {
                    let reader =
                        arrow_ipc::reader::StreamReader::try_new(BufReader::new(counting(file)), None)
                            .map_err(context)?;
                    let own = reader.schema();
                    (storable_schema(&own), Box::new(reader), Progress::Bytes(count.clone()))
                }
            }
        };
        Ok(Source { path: path.to_owned(), schema, size, batches, progress, rows: 0 })
    }

    /// The next batch as read (text columns for CSV and JSON).
    pub fn next_batch(&mut self) -> CliResult<Option<RecordBatch>> {
        match self.batches.next() {
            None => Ok(None),
            Some(Err(e)) => Err(bad_data(CliError::from(e)).context(format!(
                "{} after row {}",
                self.path.display(),
                self.rows
            ))),
            Some(Ok(batch)) => {
                self.rows += batch.num_rows() as u64;
                if let Progress::Batches(done, _) = &mut self.progress {
                    *done += 1;
                }
                Ok(Some(batch))
            }
        }
    }

    /// Reads the inference window's rows (text, as batches come) to settle
    /// what inference alone gets wrong, and returns notes for the user:
    ///
    /// - a timestamp column whose values carry `Z` or an offset holds
    ///   instants: it becomes a UTC timestamp column (inference types it
    ///   naive, and the cast would shift every value to UTC wall-clock
    ///   time while dropping the zone);
    /// - one stray value ("n/a", "lots") among numbers makes the whole
    ///   column text, and the load would succeed without a word: a note
    ///   says so.
    ///
    /// A line the reader cannot take ends the look (the load itself
    /// reports it).
    pub fn look_at_window(&mut self, window_rows: usize, format: InputFormat) -> Vec<String> {
        #[derive(Default)]
        struct Seen {
            typed: u64,
            other: u64,
            first_other: Option<(u64, String)>,
        }
        let text_columns: Vec<usize> = (0..self.schema.fields().len())
            .filter(|&i| self.schema.field(i).data_type() == &DataType::Utf8)
            .collect();
        let naive_timestamps: Vec<usize> = (0..self.schema.fields().len())
            .filter(|&i| matches!(self.schema.field(i).data_type(), DataType::Timestamp(_, None)))
            .collect();
        let mut seen: Vec<Seen> = text_columns.iter().map(|_| Seen::default()).collect();
        // Per naive timestamp column: values with an offset, values without.
        let mut zoned: Vec<(u64, u64)> = vec![(0, 0); naive_timestamps.len()];
        while !(text_columns.is_empty() && naive_timestamps.is_empty()) && self.rows < window_rows as u64 {
            let first_row = self.rows;
            let Ok(Some(batch)) = self.next_batch() else { break };
            // The window's rows only: the last batch may reach past it.
            let in_window = (window_rows as u64).saturating_sub(first_row).min(batch.num_rows() as u64);
            let batch = batch.slice(0, in_window as usize);
            for (&i, seen) in text_columns.iter().zip(&mut seen) {
                let Some(values) = batch.column(i).as_string_opt::<i32>() else { continue };
                for (row, value) in values.iter().enumerate() {
                    let Some(value) = value else { continue };
                    if looks_typed(value) {
                        seen.typed += 1;
                    } else {
                        seen.other += 1;
                        seen.first_other
                            .get_or_insert_with(|| (first_row + row as u64 + 1, value.to_owned()));
                    }
                }
            }
            for (&i, (with, without)) in naive_timestamps.iter().zip(&mut zoned) {
                let Some(values) = batch.column(i).as_string_opt::<i32>() else { continue };
                for value in values.iter().flatten() {
                    if has_utc_offset(value) {
                        *with += 1;
                    } else {
                        *without += 1;
                    }
                }
            }
        }
        let mut notes = Vec::new();
        let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        for (&i, &(with, without)) in naive_timestamps.iter().zip(&zoned) {
            if with == 0 {
                continue;
            }
            let DataType::Timestamp(unit, None) = fields[i].data_type() else { continue };
            let zoned_type = DataType::Timestamp(*unit, Some("UTC".into()));
            fields[i] = fields[i].clone().with_data_type(zoned_type);
            if without > 0 {
                notes.push(format!(
                    "column {} holds instants (UTC): {without} of its first {} values have no \
                     offset and are read as UTC",
                    fields[i].name(),
                    with + without,
                ));
            }
        }
        self.schema = Arc::new(Schema::new(fields));
        // `--null` names a CSV field's null token; JSON has its own null.
        let remedy = if format == InputFormat::Jsonl {
            "give its type with --schema"
        } else {
            "give its type with --schema, or the stray values with --null"
        };
        for (&i, seen) in text_columns.iter().zip(&seen) {
            if let Some((row, value)) = &seen.first_other
                && seen.typed >= 2 * seen.other
            {
                notes.push(format!(
                    "column {} is loaded as text: {} of its first {} values are numbers, booleans or \
                     dates, but row {row} holds {value:?} ({remedy})",
                    self.schema.field(i).name(),
                    seen.typed,
                    seen.typed + seen.other,
                ));
            }
        }
        notes
    }

    /// Bytes of the file read so far (estimated from rows or batches for
    /// the binary formats).
    pub fn bytes_done(&self) -> u64 {
        let fraction = |done: u64, total: u64| {
            if total == 0 { self.size } else { (self.size as f64 * done as f64 / total as f64) as u64 }
        };
        match &self.progress {
            Progress::Bytes(count) => count.load(Ordering::Relaxed).min(self.size),
            Progress::Rows(total) => fraction(self.rows, *total),
            Progress::Batches(done, total) => fraction(*done, *total),
        }
    }
}

/// A line the reader cannot take (a ragged CSV row, broken JSON) is bad
/// data in the file, as a value that does not parse is: exit code 7, and
/// the load undone. I/O errors stay what they are.
fn bad_data(e: CliError) -> CliError {
    if e.exit == Exit::Usage { CliError::new(Exit::BadData, e.message) } else { e }
}

/// Whether an ISO timestamp's text names its offset from UTC: `Z`, or
/// `+hh:mm` / `-hhmm` / `+hh` after the time of day (the date's own
/// dashes come before it).
fn has_utc_offset(value: &str) -> bool {
    let Some(time) = value.trim().get(11..) else { return false };
    time.ends_with(['Z', 'z']) || time.contains(['+', '-'])
}

/// Whether inference would have typed this text alone: an integer or
/// decimal number, `true`/`false`, or an ISO date (with or without time).
fn looks_typed(value: &str) -> bool {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
        return true;
    }
    let number = v.strip_prefix(['-', '+']).unwrap_or(v);
    if number.starts_with(|c: char| c.is_ascii_digit() || c == '.') && v.parse::<f64>().is_ok() {
        return true;
    }
    let b = v.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

/// JSON lines hold one object per line; a file that is one JSON array
/// (what many tools export as `.json`) would be read as a single odd row
/// and fail with its contents in the message, so it is refused first,
/// saying what to do.
fn refuse_json_array(file: &mut File, path: &Path) -> CliResult<()> {
    let mut head = [0u8; 4096];
    let n = file.read(&mut head)?;
    file.seek(SeekFrom::Start(0))?;
    let text = head[..n].strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head[..n]);
    if text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(CliError::usage(format!(
            "{} holds a JSON array; basalt loads JSON lines, one object per line \
             (convert it with: jq -c '.[]' '{}' > '{}')",
            path.display(),
            path.display(),
            path.with_extension("lines.jsonl").display()
        )));
    }
    Ok(())
}

/// The keys of the file's first JSON object, in the order written.
fn first_object_keys(file: &mut File) -> Vec<String> {
    struct Keys(Vec<String>);
    struct KeysVisitor;
    impl<'de> serde::de::Visitor<'de> for KeysVisitor {
        type Value = Keys;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<serde::de::IgnoredAny>()?;
                keys.push(key);
            }
            Ok(Keys(keys))
        }
    }
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            d.deserialize_map(KeysVisitor)
        }
    }
    let mut objects = serde_json::Deserializer::from_reader(BufReader::new(file)).into_iter::<Keys>();
    objects.next().and_then(Result::ok).map(|k| k.0).unwrap_or_default()
}

/// `schema`'s fields with those named in `order` first, in that order
/// (arrow-json's inference sorts them by name).
fn in_written_order(schema: &Schema, order: &[String]) -> Schema {
    let mut fields: Vec<_> =
        order.iter().filter_map(|name| schema.field_with_name(name).ok().cloned()).collect();
    for f in schema.fields() {
        if !order.contains(f.name()) {
            fields.push(f.as_ref().clone());
        }
    }
    Schema::new(fields)
}

/// Reads `--schema FILE`: one `name: Type` per line (Arrow's type names:
/// `Int64`, `Utf8`, `Float64`, `Date32`, `Timestamp(Microsecond, None)`,
/// `Decimal128(12, 2)`…); blank lines and `#` comments are skipped.
pub fn read_schema_file(path: &Path) -> CliResult<SchemaRef> {
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    let mut fields = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| CliError::usage(format!("{} line {}: {why}", path.display(), n + 1));
        let (name, type_text) =
            line.split_once(':').ok_or_else(|| bad(format!("{line:?} is not `name: Type`")))?;
        let data_type: DataType = type_text
            .trim()
            .parse()
            .map_err(|e| bad(format!("{:?} is not an Arrow type: {e}", type_text.trim())))?;
        fields.push(Field::new(name.trim(), data_type, true));
    }
    if fields.is_empty() {
        return Err(CliError::usage(format!("{} names no columns", path.display())));
    }
    Ok(Arc::new(Schema::new(fields)))
}
