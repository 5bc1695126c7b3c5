//! Builds a block in memory, one column at a time, and lays it out:
//! header, directory, then each buffer at an aligned offset.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef};

use super::dictionary;
use super::packed::{self, IntColumn};
use super::{HEADER_BYTES, align_up, u32_at};
use crate::codec::internal::{Kind, unpack_trailer};
use crate::error::{Error, Result};
use crate::row::decode::{ColumnBuilder, builders_for, decode_row};
use crate::row::layout::{TableLayout, Width};
use crate::sst::format::{BLOCK_BYTES_MAX, BLOCK_HEADER_FIXED_BYTES, BUFFER_ALIGN_BYTES, BUFFER_ENTRY_BYTES};

/// Builds one block in memory, one column at a time.
#[derive(Debug)]
pub struct BlockBuilder {
    /// i32 LE offsets into `key_data`, starting with 0.
    key_offsets: Vec<u8>,
    key_data: Vec<u8>,
    trailers: Vec<u8>,
    value_offsets: Vec<u8>,
    value_data: Vec<u8>,
    rows: usize,
    /// For a table tree: the layout and one builder per column; the row
    /// bytes are split into Arrow columns instead of one value column.
    table: Option<(Arc<TableLayout>, Vec<ColumnBuilder>)>,
    /// Zones of the stored columns of the last finished table block.
    last_zones: Option<Vec<crate::row::zone::Zone>>,
    /// Store integer columns packed where that saves (`packed.rs`).
    pack_integers: bool,
    /// Store string and binary columns as dictionaries where that saves
    /// (`dictionary.rs`).
    string_dictionaries: bool,
}

impl Default for BlockBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        BlockBuilder {
            key_offsets: 0i32.to_le_bytes().to_vec(),
            key_data: Vec::new(),
            trailers: Vec::new(),
            value_offsets: 0i32.to_le_bytes().to_vec(),
            value_data: Vec::new(),
            rows: 0,
            table: None,
            last_zones: None,
            pack_integers: false,
            string_dictionaries: false,
        }
    }

    /// A builder for a table tree's data blocks: each stored column of the
    /// layout gets three buffers (validity, offsets, values); with
    /// `pack_integers`, an integer column whose values span a narrow range
    /// is stored packed (`packed.rs`); with `string_dictionaries`, a
    /// string or binary column of few distinct values as a dictionary
    /// (`dictionary.rs`).
    pub fn for_table(layout: Arc<TableLayout>, pack_integers: bool, string_dictionaries: bool) -> Self {
        let builders = builders_for(&layout);
        BlockBuilder {
            table: Some((layout, builders)),
            pack_integers,
            string_dictionaries,
            ..BlockBuilder::new()
        }
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Rows added since the last [`BlockBuilder::finish`].
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.rows
    }

    /// The size [`BlockBuilder::finish`] would return now: exact for table
    /// blocks and for key-value blocks of variable-width columns, an upper
    /// bound where a column turns out to be fixed-width.
    pub fn encoded_bytes(&self) -> usize {
        match &self.table {
            None => Self::encoded_bytes_of(self.rows, self.key_data.len(), self.value_data.len()),
            // Close enough for cutting blocks: column buffers plus padding.
            Some((_, cols)) => {
                Self::encoded_bytes_of(self.rows, self.key_data.len(), 0)
                    + cols
                        .iter()
                        .map(|c| c.bytes() + 3 * (BUFFER_ENTRY_BYTES + BUFFER_ALIGN_BYTES))
                        .sum::<usize>()
            }
        }
    }

    fn encoded_bytes_of(rows: usize, key_bytes: usize, value_bytes: usize) -> usize {
        let offsets = 4 * (rows + 1);
        HEADER_BYTES + align_up(offsets) + align_up(key_bytes) + 8 * rows + align_up(offsets) + value_bytes
    }

    /// Whether a row with this key and value keeps the block within
    /// [`BLOCK_BYTES_MAX`], so that every offset fits an i32.
    pub fn fits(&self, key_len: usize, value_len: usize) -> bool {
        if key_len > BLOCK_BYTES_MAX || value_len > BLOCK_BYTES_MAX {
            return false;
        }
        let keys = self.key_data.len().saturating_add(key_len);
        let values = self.value_data.len().saturating_add(value_len);
        Self::encoded_bytes_of(self.rows + 1, keys, values) <= BLOCK_BYTES_MAX
    }

    /// Appends a row of a key-value (or index) block. The caller keeps rows
    /// in internal-key order and checks [`BlockBuilder::fits`] first.
    pub fn add(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) {
        debug_assert!(self.fits(user_key.len(), value.len()));
        debug_assert!(self.table.is_none(), "table blocks take rows through add_row");
        self.value_data.extend_from_slice(value);
        self.value_offsets.extend_from_slice(&(self.value_data.len() as i32).to_le_bytes());
        self.push_key(user_key, trailer);
    }

    /// Appends a row: for a table block `value` is the row bytes of a put
    /// (`table::layout`), split into the column builders; malformed row
    /// bytes are an error (the caller abandons the SST).
    pub fn add_row(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) -> Result<()> {
        let Some((layout, cols)) = &mut self.table else {
            self.add(user_key, trailer, value);
            return Ok(());
        };
        let row = (unpack_trailer(trailer).map(|(_, k)| k) == Some(Kind::Put)).then_some(value);
        decode_row(layout, row, cols)?;
        self.push_key(user_key, trailer);
        Ok(())
    }

    /// Appends a row of a table block copied from row `i` of another
    /// block's arrays (compaction).
    pub fn add_from_arrays(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        arrays: &[ArrayRef],
        i: usize,
    ) -> Result<()> {
        let Some((layout, cols)) = &mut self.table else {
            return Err(Error::InvalidArgument("a key-value block takes no table rows".into()));
        };
        let put = unpack_trailer(trailer).map(|(_, k)| k) == Some(Kind::Put);
        for &c in layout.stored() {
            let array = arrays.get(c).ok_or_else(|| Error::InvalidArgument("missing column".into()))?;
            if put && array.is_valid(i) {
                cols[c].push_from_array(array, i)?;
            } else {
                cols[c].push_null();
            }
        }
        self.push_key(user_key, trailer);
        Ok(())
    }

    /// Appends row `i` of a batch being bulk-loaded, read through
    /// `encoder` (prepared once per batch, unlike `add_from_arrays`, which
    /// casts the arrays again for every row).
    pub fn add_encoded_row(
        &mut self,
        user_key: &[u8],
        trailer: u64,
        encoder: &crate::row::encode::RowEncoder<'_>,
        i: usize,
    ) -> Result<()> {
        let Some((_, cols)) = &mut self.table else {
            return Err(Error::InvalidArgument("a key-value block takes no table rows".into()));
        };
        encoder.push_stored(i, cols);
        self.push_key(user_key, trailer);
        Ok(())
    }

    /// The zones of the block last returned by `finish` (table blocks).
    pub fn take_zones(&mut self) -> Option<Vec<crate::row::zone::Zone>> {
        self.last_zones.take()
    }

    fn push_key(&mut self, user_key: &[u8], trailer: u64) {
        self.key_data.extend_from_slice(user_key);
        self.key_offsets.extend_from_slice(&(self.key_data.len() as i32).to_le_bytes());
        self.trailers.extend_from_slice(&trailer.to_le_bytes());
        self.rows += 1;
    }

    /// Encodes the block and resets the builder for the next one.
    pub fn finish(&mut self) -> Vec<u8> {
        let out = match &mut self.table {
            None => {
                // A column whose values all have one width is written
                // without its offsets (an empty offsets buffer): a lookup
                // then finds row i's bytes at i * width, one dependent cache
                // miss fewer than through the offsets.
                let key_offsets = fixed_width(&self.key_offsets).map_or(&self.key_offsets[..], |_| &[]);
                let value_offsets = fixed_width(&self.value_offsets).map_or(&self.value_offsets[..], |_| &[]);
                let out = encode_buffers(
                    self.rows as u32,
                    &[key_offsets, &self.key_data, &self.trailers, value_offsets, &self.value_data],
                );
                debug_assert!(out.len() <= self.encoded_bytes());
                out
            }
            Some((layout, cols)) => {
                let zones = layout.stored().iter().map(|&i| crate::row::zone::zone_of(&cols[i])).collect();
                self.last_zones = Some(zones);
                let mut owned: Vec<Vec<u8>> = Vec::new();
                for &i in layout.stored() {
                    let [validity, offsets, values] = cols[i].take_buffers();
                    let column = &layout.columns()[i];
                    let packing = IntColumn::of(column.field.data_type()).filter(|_| self.pack_integers);
                    let is_null = |r: usize| validity.get(r / 8).is_some_and(|b| b & (1 << (r % 8)) == 0);
                    let encoded = if column.width == Width::Var32 && self.string_dictionaries {
                        dictionary::encode(&offsets, &values, self.rows, is_null)
                    } else {
                        packing.and_then(|column| packed::pack(column, &values, self.rows, is_null))
                    };
                    match encoded {
                        Some((header, bits)) => owned.extend([validity, header, bits]),
                        None => owned.extend([validity, offsets, values]),
                    }
                }
                // Keys of one width (an integer or a fixed-size key) go
                // without offsets, as in key-value blocks: 4 bytes a row.
                let key_offsets = fixed_width(&self.key_offsets).map_or(&self.key_offsets[..], |_| &[]);
                let mut buffers: Vec<&[u8]> = vec![key_offsets, &self.key_data, &self.trailers];
                buffers.extend(owned.iter().map(Vec::as_slice));
                encode_buffers(self.rows as u32, &buffers)
            }
        };
        let table = self.table.take();
        let zones = self.last_zones.take();
        let (pack_integers, string_dictionaries) = (self.pack_integers, self.string_dictionaries);
        *self = BlockBuilder::new();
        if let Some((layout, _)) = table {
            *self = BlockBuilder::for_table(layout, pack_integers, string_dictionaries);
        }
        self.last_zones = zones;
        out
    }
}

/// If every value of an offsets column (i32 LE, starting with 0, at least
/// one row) has the same width, that width.
fn fixed_width(offsets: &[u8]) -> Option<usize> {
    let rows = offsets.len() / 4 - 1;
    let total = u32_at(offsets, 4 * rows) as usize;
    let width = total.checked_div(rows)?;
    (0..=rows).all(|i| u32_at(offsets, 4 * i) as usize == i * width).then_some(width)
}

/// Lays out a block: header, directory, then each buffer at an aligned
/// offset with zero padding between them.
fn encode_buffers(rows: u32, buffers: &[&[u8]]) -> Vec<u8> {
    let header = BLOCK_HEADER_FIXED_BYTES + buffers.len() * BUFFER_ENTRY_BYTES;
    let mut out = Vec::with_capacity(header + buffers.iter().map(|b| align_up(b.len())).sum::<usize>());
    out.extend_from_slice(&rows.to_le_bytes());
    out.extend_from_slice(&(buffers.len() as u32).to_le_bytes());
    let mut at = align_up(header);
    for b in buffers {
        out.extend_from_slice(&(at as u32).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        at = align_up(at + b.len());
    }
    for b in buffers {
        out.resize(align_up(out.len()), 0);
        out.extend_from_slice(b);
    }
    out
}
