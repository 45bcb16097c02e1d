//! `LogDecoderBuilder`: a decoder's configuration, reusable for any number of
//! decoders that share its reporters.

use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncRead;
use tokio_util::codec::FramedRead;

use super::dialect::{LogState, MetadataReporter};
use super::{Assembly, DecodeStats, Flow, FragmentMark, LogDecoder, LogInput, Recovery, Reporter};
use crate::decoder::error::Corruption;
use crate::format::fragment::{Dialect, FragmentRules, FragmentType, Parsed};
use crate::format::metadata::{MetadataRecord, WalCompressionType};
use crate::format::{block_start, BLOCK_SIZE};

/// Configures a [`LogDecoder`].
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use walcodec::{LogDecoder, Recovery};
///
/// let reports = Arc::new(Mutex::new(Vec::new()));
/// let sink = reports.clone();
/// let decoder = LogDecoder::builder()
///     .recovery(Recovery::SkipCorrupted)
///     .max_record_bytes(1 << 20)
///     .on_corruption(move |c| sink.lock().unwrap().push(c.to_string()))
///     .build();
/// assert_eq!(decoder.offset(), 0);
/// ```
///
/// A builder is a reusable configuration: [`build`](Self::build) takes `&self`, so
/// one builder makes any number of decoders, all with the same settings and the
/// same reporter.
#[must_use]
#[derive(Clone)]
pub struct LogDecoderBuilder {
    recovery: Recovery,
    input: LogInput,
    name: Arc<str>,
    file: Option<Arc<std::path::Path>>,
    checksums: bool,
    max_record_bytes: usize,
    start_offset: u64,
    end_offset: Option<u64>,
    reporter: Option<Reporter>,
    dialect: Dialect,
    log_number: u64,
    compression: Option<WalCompressionType>,
    metadata: Option<MetadataReporter>,
}

impl fmt::Debug for LogDecoderBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogDecoderBuilder")
            .field("recovery", &self.recovery)
            .field("input", &self.input)
            .field("name", &self.name)
            .field("file", &self.file)
            .field("checksums", &self.checksums)
            .field("max_record_bytes", &self.max_record_bytes)
            .field("start_offset", &self.start_offset)
            .field("end_offset", &self.end_offset)
            .field("dialect", &self.dialect)
            .field("log_number", &self.log_number)
            .field("compression", &self.compression)
            .field("reporter", &self.reporter.is_some())
            .field("metadata", &self.metadata.is_some())
            .finish()
    }
}

impl Default for LogDecoderBuilder {
    fn default() -> Self {
        LogDecoderBuilder {
            recovery: Recovery::default(),
            input: LogInput::default(),
            name: Arc::from(""),
            file: None,
            checksums: true,
            max_record_bytes: LogDecoder::DEFAULT_MAX_RECORD_BYTES,
            start_offset: 0,
            end_offset: None,
            reporter: None,
            dialect: Dialect::LevelDb,
            log_number: 0,
            compression: None,
            metadata: None,
        }
    }
}

impl LogDecoderBuilder {
    /// How damage is handled (default [`Recovery::TolerateTail`]).
    pub fn recovery(&mut self, recovery: Recovery) -> &mut Self {
        self.recovery = recovery;
        self
    }

    /// What the decoder reads (default [`LogInput::Stream`]): a stream's end inside a
    /// record is [`CodecError::IncompleteRecord`](crate::CodecError::IncompleteRecord), a
    /// file's is a torn tail that the [`Recovery`] mode handles (see [`LogInput`]).
    pub fn input(&mut self, input: LogInput) -> &mut Self {
        self.input = input;
        self
    }

    /// The decoder's name: the `log` label of its damage reports (the
    /// `damaged log bytes skipped` event, the `walcodec_corruptions_skipped_total`
    /// and `walcodec_damaged_bytes_skipped_total` metrics), as
    /// [`WriterOptions::name`](crate::WriterOptions::name) is a writer's. Default
    /// empty.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = Arc::from(name.into());
        self
    }

    /// The file the decoder reads, named in its damage reports: set by the readers
    /// that open a file by path.
    pub(crate) fn observed_file(&mut self, path: &std::path::Path) -> &mut Self {
        self.file = Some(Arc::from(path));
        self
    }

    /// Whether fragment checksums are verified (default `true`; LevelDB's `checksum`).
    pub fn checksums(&mut self, verify: bool) -> &mut Self {
        self.checksums = verify;
        self
    }

    /// The largest record the decoder will assemble (default 64 MiB). A larger one is
    /// damage: an error, or in `SkipCorrupted` a report, never an unbounded allocation.
    pub fn max_record_bytes(&mut self, max: usize) -> &mut Self {
        self.max_record_bytes = max;
        self
    }

    /// The engine whose log format the log is in (default [`Dialect::LevelDb`]:
    /// LevelDB's five types, anything else unknown). [`Dialect::RocksDb`] reads
    /// RocksDB's WALs: recyclable fragments, compressed records and metadata
    /// records.
    ///
    /// A recycled WAL ends at the first fragment of an older log: the decoder stops
    /// there for good. So a [`LogTailer`](crate::LogTailer) following a recycled WAL
    /// that RocksDB is still writing stops where the live records ended when it got
    /// there; follow a recycled WAL by reopening it at the last checkpoint instead.
    /// Compressed records are inflated whole (the streaming reader inflates them
    /// fragment by fragment), within [`max_record_bytes`](Self::max_record_bytes).
    pub fn dialect(&mut self, dialect: Dialect) -> &mut Self {
        self.dialect = dialect;
        self
    }

    /// The log's number, which RocksDB's recyclable fragments carry (default 0):
    /// RocksDB names a WAL after it (`000012.log` is log 12). A recyclable fragment
    /// with another number is left from the file's earlier use and ends the log.
    /// Only the low 32 bits are stored in a header, so only those are compared.
    pub fn log_number(&mut self, log_number: u64) -> &mut Self {
        self.log_number = log_number;
        self
    }

    /// RocksDB: the compression the log's type-9 record declares, for a decoder that
    /// does not see that record because it starts past it
    /// ([`start_offset`](Self::start_offset) beyond the log's first block). A type-9
    /// record the decoder does read overrides it.
    /// [`LogReader::open_at`](crate::LogReader::open_at) reads it from the file's
    /// start by itself.
    pub fn wal_compression(&mut self, compression: WalCompressionType) -> &mut Self {
        self.compression = Some(compression);
        self
    }

    /// RocksDB: called with the offset and contents of every metadata record the
    /// decoder reads (compression type, timestamp sizes, predecessor WAL info).
    /// Shared by every decoder this builder builds, like
    /// [`on_corruption`](Self::on_corruption). The latest values are also kept by
    /// the decoder ([`LogDecoder::wal_compression`] and the like).
    pub fn on_metadata<F>(&mut self, callback: F) -> &mut Self
    where
        F: FnMut(u64, &MetadataRecord) + Send + 'static,
    {
        self.metadata = Some(Arc::new(Mutex::new(callback)));
        self
    }

    /// Return only records whose first fragment starts at or after `offset`.
    ///
    /// The bytes fed to the decoder must begin at [`block_start(offset)`](crate::block_start):
    /// seek the source there. Fragments of a record that began earlier are skipped
    /// silently.
    pub fn start_offset(&mut self, offset: u64) -> &mut Self {
        self.start_offset = offset;
        self
    }

    /// Stop at the first record whose first fragment starts at or after `offset`; the
    /// record that straddles `offset` is still read to its end. With
    /// [`start_offset`](Self::start_offset) this reads one split `[start, end)` of a log.
    pub fn end_offset(&mut self, offset: u64) -> &mut Self {
        self.end_offset = Some(offset);
        self
    }

    /// Called with every piece of the log the decoder drops. Without a reporter,
    /// damage is still counted in [`LogDecoder::stats`].
    ///
    /// Every decoder this builder builds (and every clone of one) reports to this
    /// one closure; it is called with a lock held, one report at a time.
    pub fn on_corruption<F>(&mut self, reporter: F) -> &mut Self
    where
        F: FnMut(&Corruption) + Send + 'static,
    {
        self.reporter = Some(Arc::new(Mutex::new(reporter)));
        self
    }

    /// Whether a decoder starting at `start_offset` would miss what RocksDB's
    /// compression-type record at the log's start says (it is read only from the
    /// log's first block), so a reader of a file should read it first: see
    /// [`learn_log_start`](Self::learn_log_start).
    pub(crate) fn needs_log_start(&self, start_offset: u64) -> bool {
        self.dialect == Dialect::RocksDb
            && self.compression.is_none()
            && block_start(start_offset) > 0
    }

    /// Takes the compression from an intact type-9 record at the start of `log_start`
    /// (the log's first bytes), if there is one.
    pub(crate) fn learn_log_start(&mut self, log_start: &[u8]) {
        let rules = FragmentRules::new(self.dialect).verify_checksums(self.checksums);
        if let Parsed::Fragment(fragment) = rules.parse(log_start, BLOCK_SIZE) {
            if fragment.fragment_type() == Some(FragmentType::SetCompressionType) {
                if let Ok(compression) =
                    WalCompressionType::parse(&log_start[fragment.payload_range()])
                {
                    self.compression = Some(compression);
                }
            }
        }
    }

    /// A decoder with the configured settings. The builder is unchanged: build
    /// again for another decoder just like it.
    pub fn build(&self) -> LogDecoder {
        let base = block_start(self.start_offset);
        LogDecoder {
            rules: FragmentRules::new(self.dialect)
                .log_number(self.log_number)
                .verify_checksums(self.checksums),
            state: LogState::new(self.log_number, self.compression),
            metadata: self.metadata.clone(),
            recovery: self.recovery,
            checksums: self.checksums,
            max_record_bytes: self.max_record_bytes,
            start_offset: self.start_offset,
            end_offset: self.end_offset.unwrap_or(u64::MAX),
            reporter: self.reporter.clone(),
            offset: base,
            skip: None,
            assembly: Assembly::Idle,
            resyncing: self.start_offset > 0,
            flow: Flow::Reading,
            last_record: None,
            valid_end: self.start_offset,
            incomplete_tail: false,
            tail_start: 0,
            input: self.input,
            name: self.name.clone(),
            file: self.file.clone(),
            zero_suspect: None,
            stats: DecodeStats::default(),
            fragments: false,
            mark: FragmentMark::Whole { start: 0 },
            cut_short: None,
            read_ahead: None,
            settled: 0,
            live: false,
            live_damage: Default::default(),
        }
    }

    /// A [`FramedRead`] of `io` with the configured decoder and a read buffer of
    /// [`FRAMED_READ_CAPACITY`](crate::FRAMED_READ_CAPACITY) bytes (see
    /// [`LogDecoder::framed_read`]).
    pub fn new_read<R: AsyncRead>(&self, io: R) -> FramedRead<R, LogDecoder> {
        self.framed_read(io)
    }
}
