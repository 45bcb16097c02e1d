//! What a pass counts as it walks a log's layout: [`Layout`] (every log) and
//! [`WalFacts`] (what a RocksDB WAL has beyond LevelDB's format), each able to add
//! up the counts of the ranges of a split read.

use crate::decoder::DecodeStats;
use crate::format::metadata::{PredecessorWalInfo, WalCompressionType};
use crate::format::physical::{Chunk, Metadata, Piece};
use crate::format::HEADER_SIZE;

/// The layout of the blocks a pass walked, counted: what `walcodec stat` prints.
///
/// Counts are of bytes or pieces of the file; they add up with saturation, so no
/// input makes them overflow.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// Fragments with a good checksum by type byte 0..=4 (ZERO, FULL, FIRST, MIDDLE,
    /// LAST); a RocksDB recyclable fragment counts as the FULL, FIRST, MIDDLE or LAST
    /// it is.
    pub by_type: [u64; 5],
    /// Fragments with a good checksum of any other type.
    pub other_types: u64,
    /// Header bytes of the fragments with a good checksum.
    pub header_bytes: u64,
    /// Trailer bytes at block ends.
    pub trailer_bytes: u64,
    /// Zero fill (preallocated space) skipped to a block's end.
    pub zero_fill_bytes: u64,
    /// Bytes of fragments whose checksum is bad.
    pub bad_checksum_bytes: u64,
    /// Bytes of headers whose length runs past their block.
    pub bad_length_bytes: u64,
    /// Bytes a reader drops after damage, to its block's end.
    pub skipped_bytes: u64,
    /// Bytes of a fragment cut short by the end of the input.
    pub torn_bytes: u64,
    /// Pieces of zero fill that are not all zeros (data a reader skips silently).
    pub hidden_zero_fills: u64,
    /// Their bytes.
    pub hidden_bytes: u64,
}

impl Layout {
    /// Counts `piece`: what has a LevelDB view (a [`Chunk`]) as that chunk, what only
    /// RocksDB's dialect has here (old fragments only in [`WalFacts`]).
    pub(crate) fn count_piece(&mut self, piece: &Piece<'_>) {
        if !piece.is_rocksdb_only() {
            return self.count(&piece.to_chunk());
        }
        match *piece {
            Piece::Fragment {
                fragment,
                checksum_ok: true,
                ..
            }
            | Piece::Metadata { fragment, .. } => {
                let part = fragment.part().map(|part| part.type_byte(false));
                match part.and_then(|t| self.by_type.get_mut(usize::from(t))) {
                    Some(count) => *count = count.saturating_add(1),
                    None => self.other_types = self.other_types.saturating_add(1),
                }
                add(&mut self.header_bytes, fragment.header_len() as u64);
            }
            Piece::Fragment { .. } => add(&mut self.bad_checksum_bytes, piece.len()),
            _ => {}
        }
    }

    fn count(&mut self, chunk: &Chunk<'_>) {
        let len = chunk.len();
        match *chunk {
            Chunk::Fragment {
                header,
                checksum_ok,
                ..
            } => {
                if checksum_ok {
                    match self.by_type.get_mut(usize::from(header.type_byte)) {
                        Some(count) => *count = count.saturating_add(1),
                        None => self.other_types = self.other_types.saturating_add(1),
                    }
                    add(&mut self.header_bytes, HEADER_SIZE as u64);
                } else {
                    add(&mut self.bad_checksum_bytes, len);
                }
            }
            Chunk::Trailer { .. } => add(&mut self.trailer_bytes, len),
            Chunk::ZeroFill { bytes, .. } => {
                add(&mut self.zero_fill_bytes, len);
                if bytes.iter().any(|&b| b != 0) {
                    add(&mut self.hidden_zero_fills, 1);
                    add(&mut self.hidden_bytes, len);
                }
            }
            Chunk::BadLength { .. } => add(&mut self.bad_length_bytes, len),
            Chunk::Skipped { .. } => add(&mut self.skipped_bytes, len),
            Chunk::Torn { .. } => add(&mut self.torn_bytes, len),
        }
    }

    /// Adds the counts of `other` (another range of the same log).
    pub(crate) fn add(&mut self, other: &Layout) {
        for (mine, theirs) in self.by_type.iter_mut().zip(other.by_type) {
            add(mine, theirs);
        }
        add(&mut self.other_types, other.other_types);
        add(&mut self.header_bytes, other.header_bytes);
        add(&mut self.trailer_bytes, other.trailer_bytes);
        add(&mut self.zero_fill_bytes, other.zero_fill_bytes);
        add(&mut self.bad_checksum_bytes, other.bad_checksum_bytes);
        add(&mut self.bad_length_bytes, other.bad_length_bytes);
        add(&mut self.skipped_bytes, other.skipped_bytes);
        add(&mut self.torn_bytes, other.torn_bytes);
        add(&mut self.hidden_zero_fills, other.hidden_zero_fills);
        add(&mut self.hidden_bytes, other.hidden_bytes);
    }
}

fn add(count: &mut u64, more: u64) {
    *count = count.saturating_add(more);
}

/// What the walk of a RocksDB WAL saw of its own pieces: what `walcodec verify` and
/// `stat` print after a log read in RocksDB's dialect.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalFacts {
    /// Complete fragments with LevelDB's 7-byte header (old ones excepted).
    pub legacy_headers: u64,
    /// Complete fragments with a recyclable (11-byte) header (old ones excepted).
    pub recyclable_headers: u64,
    /// Compression-type (type-9) records.
    pub compression_records: u64,
    /// The first compression-type record: its offset and value.
    pub compression: Option<(u64, WalCompressionType)>,
    /// Timestamp-size records.
    pub timestamp_size_records: u64,
    /// Predecessor-WAL records.
    pub predecessor_records: u64,
    /// The first predecessor-WAL record's value.
    pub predecessor: Option<PredecessorWalInfo>,
    /// Metadata records whose payload does not parse.
    pub malformed_metadata: u64,
    /// Fragments of unknown types with bit 7 set, which readers skip.
    pub ignorable: u64,
    /// Fragments of an older log (the file's earlier use).
    pub old_fragments: u64,
    /// Their bytes.
    pub old_bytes: u64,
    /// The first old fragment: its offset (where the log ends) and log number.
    pub first_old: Option<(u64, u32)>,
}

impl WalFacts {
    /// Counts `piece`.
    pub(crate) fn add(&mut self, piece: &Piece<'_>) {
        match *piece {
            Piece::Fragment {
                fragment,
                checksum_ok: true,
                ..
            } => {
                self.count_header(fragment.header_len());
                add(&mut self.ignorable, u64::from(fragment.is_ignorable()));
            }
            Piece::Metadata {
                fragment, record, ..
            } => {
                self.count_header(fragment.header_len());
                match record {
                    Ok(Metadata::Compression(compression)) => {
                        add(&mut self.compression_records, 1);
                        self.compression
                            .get_or_insert((piece.offset(), compression));
                    }
                    Ok(Metadata::TimestampSizes(_)) => add(&mut self.timestamp_size_records, 1),
                    Ok(Metadata::PredecessorWal(info)) => {
                        add(&mut self.predecessor_records, 1);
                        self.predecessor.get_or_insert(info);
                    }
                    Err(_) => add(&mut self.malformed_metadata, 1),
                }
            }
            Piece::Old { fragment, .. } => {
                add(&mut self.old_fragments, 1);
                add(&mut self.old_bytes, piece.len());
                self.first_old
                    .get_or_insert((piece.offset(), fragment.log_number().unwrap_or_default()));
            }
            _ => {}
        }
    }

    /// Adds the facts of the pieces that follow this one's (a later range of a split
    /// read): counts add up, firsts stay this one's when it has them.
    pub(crate) fn merge(&mut self, later: &WalFacts) {
        add(&mut self.legacy_headers, later.legacy_headers);
        add(&mut self.recyclable_headers, later.recyclable_headers);
        add(&mut self.compression_records, later.compression_records);
        self.compression = self.compression.or(later.compression);
        add(
            &mut self.timestamp_size_records,
            later.timestamp_size_records,
        );
        add(&mut self.predecessor_records, later.predecessor_records);
        self.predecessor = self.predecessor.or(later.predecessor);
        add(&mut self.malformed_metadata, later.malformed_metadata);
        add(&mut self.ignorable, later.ignorable);
        add(&mut self.old_fragments, later.old_fragments);
        add(&mut self.old_bytes, later.old_bytes);
        self.first_old = self.first_old.or(later.first_old);
    }

    fn count_header(&mut self, len: usize) {
        if len > HEADER_SIZE {
            add(&mut self.recyclable_headers, 1);
        } else {
            add(&mut self.legacy_headers, 1);
        }
    }
}

/// `a + b`, counter by counter.
pub(crate) fn stats_sum(a: DecodeStats, b: DecodeStats) -> DecodeStats {
    let mut sum = a;
    add(&mut sum.records, b.records);
    add(&mut sum.record_bytes, b.record_bytes);
    add(&mut sum.fragments, b.fragments);
    add(&mut sum.trailer_bytes, b.trailer_bytes);
    add(&mut sum.zero_fill_bytes, b.zero_fill_bytes);
    add(&mut sum.dropped_bytes, b.dropped_bytes);
    add(&mut sum.corruptions, b.corruptions);
    add(&mut sum.zeroed_blocks, b.zeroed_blocks);
    add(&mut sum.metadata_records, b.metadata_records);
    add(&mut sum.old_fragment_bytes, b.old_fragment_bytes);
    add(&mut sum.ignored_fragments, b.ignored_fragments);
    sum
}

/// `a - b` for counters `a` that went on from `b`.
pub(crate) fn stats_since(a: DecodeStats, b: DecodeStats) -> DecodeStats {
    let mut since = a;
    since.records = a.records.saturating_sub(b.records);
    since.record_bytes = a.record_bytes.saturating_sub(b.record_bytes);
    since.fragments = a.fragments.saturating_sub(b.fragments);
    since.trailer_bytes = a.trailer_bytes.saturating_sub(b.trailer_bytes);
    since.zero_fill_bytes = a.zero_fill_bytes.saturating_sub(b.zero_fill_bytes);
    since.dropped_bytes = a.dropped_bytes.saturating_sub(b.dropped_bytes);
    since.corruptions = a.corruptions.saturating_sub(b.corruptions);
    since.zeroed_blocks = a.zeroed_blocks.saturating_sub(b.zeroed_blocks);
    since.metadata_records = a.metadata_records.saturating_sub(b.metadata_records);
    since.old_fragment_bytes = a.old_fragment_bytes.saturating_sub(b.old_fragment_bytes);
    since.ignored_fragments = a.ignored_fragments.saturating_sub(b.ignored_fragments);
    since
}
