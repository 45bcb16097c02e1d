//! What RocksDB's dialect adds above the fragment layer for one log: whether the
//! file is recycled, how its records are compressed, and what its metadata
//! records said. The fragment rules themselves live in [`crate::format::fragment`]; the
//! recovery policy stays in the decoder.

use std::sync::{Arc, Mutex};

use super::plain::FullShape;
use crate::decoder::error::CorruptionKind;
#[cfg(feature = "zstd")]
use crate::format::compression::RecordInflater;
use crate::format::metadata::{
    MetadataRecord, PredecessorWalInfo, TimestampSize, WalCompressionType,
};

/// The metadata callback, shared like the corruption reporter.
pub(super) type MetadataReporter = Arc<Mutex<dyn FnMut(u64, &MetadataRecord) + Send>>;

/// The state of one log read in RocksDB's dialect (in LevelDB's, the log is never
/// recycled nor compressed).
#[derive(Clone)]
pub(super) struct LogState {
    /// A recyclable fragment came first: the file is a recycled WAL, which ends at
    /// the first fragment left from its earlier use (and, in `TolerateTail`, at the
    /// first bad checksum or length). Set through [`LogState::set_recycled`].
    recycled: bool,
    /// Pebble: the recyclable fragments are WAL-sync ones (19-byte headers).
    wal_sync: bool,
    /// The low 32 bits of the log number, as a recyclable header stores them.
    log_number: u32,
    /// What the decoder's plain path takes: [`LogState::full_shape`], or nothing
    /// in a compressed log (whose records have their own path). Kept here, digested,
    /// so that the plain path asks one question whatever the dialect.
    plain_shape: FullShape,
    /// A legacy data fragment came before any recyclable one: a recyclable fragment
    /// after it is damage.
    pub(super) legacy_data: bool,
    /// A data fragment was seen: a compression-type record after it is late.
    pub(super) data_seen: bool,
    /// What the type-9 record said (or the builder, for a read from an offset).
    pub(super) compression: Option<WalCompressionType>,
    /// Whether data records are compressed (any type but `None`): `compression`
    /// digested for the decoder's hot path.
    pub(super) compressed: bool,
    /// The timestamp sizes recorded so far, latest per column family.
    pub(super) timestamp_sizes: Vec<TimestampSize>,
    /// The predecessor WAL record, if the log had one.
    pub(super) predecessor: Option<PredecessorWalInfo>,
    /// Where the live records of a recycled log ended.
    pub(super) recycled_end: Option<u64>,
    /// Pebble: the log ended at its EOF trailer.
    pub(super) eof_trailer: bool,
    /// Inflates compressed records.
    pub(super) inflater: Inflater,
}

impl LogState {
    /// A log of number `log_number` (0 if unknown) whose records are compressed as
    /// `compression` says until a type-9 record says otherwise.
    pub(super) fn new(log_number: u64, compression: Option<WalCompressionType>) -> LogState {
        let mut state = LogState {
            recycled: false,
            wal_sync: false,
            log_number: log_number as u32,
            plain_shape: FullShape::LEGACY,
            legacy_data: false,
            data_seen: false,
            compression: None,
            compressed: false,
            timestamp_sizes: Vec::new(),
            predecessor: None,
            recycled_end: None,
            eof_trailer: false,
            inflater: Inflater::default(),
        };
        state.set_compression(compression);
        state
    }

    /// Whether the file is a recycled WAL (a recyclable fragment came first).
    pub(super) fn is_recycled(&self) -> bool {
        self.recycled
    }

    /// The file is a recycled WAL: its data fragments are recyclable ones (Pebble's
    /// WAL-sync ones when `wal_sync`).
    pub(super) fn set_recycled(&mut self, wal_sync: bool) {
        self.recycled = true;
        self.wal_sync = wal_sync;
        self.refresh_shapes();
    }

    /// The FULL fragments of the log's data: legacy ones, or recyclable ones of
    /// its number once it is found recycled.
    #[inline(always)]
    pub(super) fn full_shape(&self) -> FullShape {
        if self.recycled && self.wal_sync {
            FullShape::wal_sync(self.log_number)
        } else if self.recycled {
            FullShape::recyclable(self.log_number)
        } else {
            FullShape::LEGACY
        }
    }

    /// What the decoder's plain path takes.
    #[inline(always)]
    pub(super) fn plain_shape(&self) -> FullShape {
        self.plain_shape
    }

    /// Whether data records are compressed (with any type but `None`).
    pub(super) fn is_compressed(&self) -> bool {
        self.compressed
    }

    /// Sets the compression of the log's data records.
    pub(super) fn set_compression(&mut self, compression: Option<WalCompressionType>) {
        self.compression = compression;
        self.compressed = matches!(
            compression,
            Some(WalCompressionType::Zstd) | Some(WalCompressionType::Other(_))
        );
        self.refresh_shapes();
    }

    /// The plain path's shape after a change of what the log is known to be.
    fn refresh_shapes(&mut self) {
        self.plain_shape = if self.compressed {
            FullShape::NONE
        } else {
            self.full_shape()
        };
    }

    /// Records a metadata record's contents.
    pub(super) fn apply(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::Compression(compression) => self.set_compression(Some(*compression)),
            MetadataRecord::TimestampSizes(sizes) => {
                for size in sizes {
                    match self
                        .timestamp_sizes
                        .iter_mut()
                        .find(|known| known.column_family == size.column_family)
                    {
                        Some(known) => *known = *size,
                        None => self.timestamp_sizes.push(*size),
                    }
                }
            }
            MetadataRecord::PredecessorWal(info) => self.predecessor = Some(*info),
        }
    }
}

/// Why a compressed record did not inflate.
pub(super) struct InflateFailure {
    pub(super) kind: CorruptionKind,
    /// Bytes the report covers: the declared size of a record too large, else the
    /// compressed bytes.
    pub(super) bytes: Option<u64>,
    pub(super) reason: String,
}

/// The zstd inflater, created on first use. A clone starts without one: a decoder
/// is cloned between records, and inflation state is per record.
#[derive(Default)]
pub(super) struct Inflater {
    #[cfg(feature = "zstd")]
    inflater: Option<(usize, Box<RecordInflater>)>,
}

impl Clone for Inflater {
    fn clone(&self) -> Self {
        Inflater::default()
    }
}

impl Inflater {
    /// The inflater for records of at most `max_record_bytes`, created on first use
    /// (or anew for another limit).
    #[cfg(feature = "zstd")]
    fn inflater_for(&mut self, max_record_bytes: usize) -> &mut RecordInflater {
        if !matches!(&self.inflater, Some((limit, _)) if *limit == max_record_bytes) {
            let inflater = Box::new(RecordInflater::new(max_record_bytes));
            self.inflater = Some((max_record_bytes, inflater));
        }
        &mut self.inflater.as_mut().expect("set above").1
    }

    /// Inflates one whole compressed record (its frame) within `max_record_bytes`.
    #[cfg(feature = "zstd")]
    pub(super) fn inflate(
        &mut self,
        compression: WalCompressionType,
        frame: &[u8],
        max_record_bytes: usize,
    ) -> Result<Vec<u8>, InflateFailure> {
        if compression != WalCompressionType::Zstd {
            return Err(unsupported(compression));
        }
        let inflater = self.inflater_for(max_record_bytes);
        let mut record = Vec::new();
        let inflated = inflater.inflate_whole(frame, &mut record);
        inflated.map(|()| record).map_err(failure)
    }

    /// Inflates one fragment of a record handed out fragment by fragment (the
    /// streaming reader): `begins` at its first fragment, `ends` at its last, where
    /// the frame must be complete. Output is bounded by `max_record_bytes` for the
    /// whole record.
    #[cfg(feature = "zstd")]
    pub(super) fn inflate_piece(
        &mut self,
        compression: WalCompressionType,
        piece: &[u8],
        (begins, ends): (bool, bool),
        max_record_bytes: usize,
    ) -> Result<Vec<u8>, InflateFailure> {
        use crate::format::compression::InflateError;

        if compression != WalCompressionType::Zstd {
            return Err(unsupported(compression));
        }
        let holds_record = matches!(&self.inflater, Some((limit, _)) if *limit == max_record_bytes);
        if !begins && !holds_record {
            // A clone taken mid-record has no inflater: the record fails as cut.
            return Err(failure(InflateError::Truncated));
        }
        let inflater = self.inflater_for(max_record_bytes);
        if begins {
            inflater.reset();
        }
        let mut out = Vec::new();
        let inflated =
            inflater.push(piece, &mut out).and_then(
                |()| {
                    if ends {
                        inflater.finish()
                    } else {
                        Ok(())
                    }
                },
            );
        inflated.map(|()| out).map_err(|error| {
            inflater.reset();
            failure(error)
        })
    }

    /// Without the `zstd` feature nothing inflates.
    #[cfg(not(feature = "zstd"))]
    pub(super) fn inflate_piece(
        &mut self,
        compression: WalCompressionType,
        _piece: &[u8],
        _ends: (bool, bool),
        _max_record_bytes: usize,
    ) -> Result<Vec<u8>, InflateFailure> {
        Err(unsupported(compression))
    }

    /// Without the `zstd` feature nothing inflates.
    #[cfg(not(feature = "zstd"))]
    pub(super) fn inflate(
        &mut self,
        compression: WalCompressionType,
        _frame: &[u8],
        _max_record_bytes: usize,
    ) -> Result<Vec<u8>, InflateFailure> {
        Err(unsupported(compression))
    }
}

#[cfg(feature = "zstd")]
fn failure(error: crate::format::compression::InflateError) -> InflateFailure {
    use crate::format::compression::InflateError;

    let (kind, bytes) = match error {
        InflateError::TooLarge { declared, .. } => (CorruptionKind::RecordTooLarge, declared),
        _ => (CorruptionKind::BadCompressedRecord, None),
    };
    InflateFailure {
        kind,
        bytes,
        reason: error.to_string(),
    }
}

fn unsupported(compression: WalCompressionType) -> InflateFailure {
    let kind = CorruptionKind::UnsupportedCompression(compression.as_u32());
    InflateFailure {
        kind,
        bytes: None,
        reason: kind.reason().into_owned(),
    }
}
