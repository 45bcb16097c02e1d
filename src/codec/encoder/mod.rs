//! `LogEncoder`: frames records into 32 KiB blocks exactly as LevelDB's `log::Writer`,
//! or as RocksDB's (recyclable headers, WAL compression) when built so.

// Why one file: the encoder's framing, its RocksDB variants and its slice and buffer
// paths share one block-offset state; about 850 lines of code, the rest unit tests.

use std::fmt;
use std::marker::PhantomData;

use bytes::{BufMut, Bytes, BytesMut};
use tokio_util::codec::Encoder;

use crate::decoder::error::CodecError;
use crate::format::fragment::{
    legacy_header, recyclable_header, wal_sync_header, Dialect, Part, LEGACY_HEADER_SIZE,
    RECYCLABLE_HEADER_SIZE, WAL_SYNC_HEADER_SIZE,
};
use crate::format::metadata::{MetadataError, PredecessorWalInfo, TimestampSize};
use crate::format::{Position, BLOCK_SIZE, HEADER_SIZE};

/// How a writer frames records: LevelDB's format (the default), or one of RocksDB's
/// WAL formats.
///
/// | format                         | headers | first record        | data fragments |
/// |--------------------------------|---------|---------------------|----------------|
/// | `LogFormat::leveldb()`         | 7       | —                   | types 1–4      |
/// | `.recyclable(n)`               | 11      | —                   | types 5–8, log `n` |
/// | `.zstd()` (feature `zstd`)     | 7 or 11 | type 9 (7-byte header) | one zstd frame per record |
/// | `LogFormat::pebble(n)`         | 19      | —                   | types 9–12 (Pebble's WAL-sync), log `n`, synced offset |
///
/// Pebble's WAL-sync format ends a cleanly closed log with an 11-byte EOF trailer
/// ([`LogEncoder::encode_eof_trailer`]); each fragment carries the synced offset the
/// writer last set ([`LogEncoder::set_synced_offset`]: the log's durable end, as
/// Pebble's `LogWriter` writes it). It has no compression: `pebble` turns `zstd`
/// off, and `zstd` turns the WAL-sync headers back into RocksDB's recyclable ones.
///
/// RocksDB writes a recyclable WAL when `recycle_log_file_num > 0`, and a compressed
/// one with `wal_compression = kZSTD`. A RocksDB WAL without either is LevelDB's
/// format.
///
/// ```
/// use walcodec::{Dialect, LogFormat};
///
/// let format = LogFormat::leveldb().recyclable(12);
/// assert_eq!(format.log_number(), Some(12));
/// assert_eq!(format.dialect(), Dialect::RocksDb);
/// assert_eq!(LogFormat::default().dialect(), Dialect::LevelDb);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LogFormat {
    recycle_log_number: Option<u64>,
    zstd: bool,
    wal_sync: bool,
}

impl LogFormat {
    /// LevelDB's format (also RocksDB's default WAL format).
    pub const fn leveldb() -> LogFormat {
        LogFormat {
            recycle_log_number: None,
            zstd: false,
            wal_sync: false,
        }
    }

    /// Pebble's WAL-sync format (CockroachDB 25.3+ stores, format version 20 on):
    /// 19-byte headers carrying the low 32 bits of `log_number` and the synced
    /// offset, types 9–12.
    pub const fn pebble(log_number: u64) -> LogFormat {
        LogFormat {
            recycle_log_number: Some(log_number),
            zstd: false,
            wal_sync: true,
        }
    }

    /// RocksDB's recyclable format: 11-byte headers carrying the low 32 bits of
    /// `log_number`, the number of the WAL (`NNNNNN.log`), which readers check.
    #[must_use]
    pub const fn recyclable(mut self, log_number: u64) -> LogFormat {
        self.recycle_log_number = Some(log_number);
        self
    }

    /// RocksDB's WAL compression (`kZSTD`): a type-9 record first, then each record
    /// as one zstd frame (content size and checksum in it) over its fragments.
    #[cfg(feature = "zstd")]
    #[must_use]
    pub const fn zstd(mut self) -> LogFormat {
        self.zstd = true;
        self.wal_sync = false;
        self
    }

    /// The log number recyclable headers carry; `None` for legacy headers.
    pub const fn log_number(&self) -> Option<u64> {
        self.recycle_log_number
    }

    /// Whether records are compressed with zstd.
    pub const fn is_compressed(&self) -> bool {
        self.zstd
    }

    /// Whether this is Pebble's WAL-sync format.
    pub const fn is_wal_sync(&self) -> bool {
        self.wal_sync
    }

    /// The dialect a reader needs for this format.
    pub const fn dialect(&self) -> Dialect {
        if self.wal_sync {
            Dialect::Pebble
        } else if self.recycle_log_number.is_some() || self.zstd {
            Dialect::RocksDb
        } else {
            Dialect::LevelDb
        }
    }

    /// The header size of data fragments: 7, 11 when recyclable, 19 for Pebble's
    /// WAL-sync format.
    pub const fn header_size(&self) -> usize {
        if self.wal_sync {
            WAL_SYNC_HEADER_SIZE
        } else if self.recycle_log_number.is_some() {
            RECYCLABLE_HEADER_SIZE
        } else {
            LEGACY_HEADER_SIZE
        }
    }
}

/// Configures a [`LogEncoder`]: its [`LogFormat`] and where in the log it starts.
///
/// ```
/// use bytes::BytesMut;
/// use walcodec::LogEncoder;
///
/// let mut encoder = LogEncoder::builder().recyclable(12).build();
/// let mut log = BytesMut::new();
/// let position = encoder.encode_record(b"foo", &mut log);
/// assert_eq!((position.start, position.end), (0, 14));
/// assert_eq!(&log[4..11], b"\x03\x00\x05\x0c\x00\x00\x00");
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct LogEncoderBuilder {
    format: LogFormat,
    offset: u64,
}

impl LogEncoderBuilder {
    /// The format to write (default: LevelDB's).
    pub fn format(&mut self, format: LogFormat) -> &mut Self {
        self.format = format;
        self
    }

    /// Write RocksDB's recyclable format for log `log_number`; see
    /// [`LogFormat::recyclable`].
    pub fn recyclable(&mut self, log_number: u64) -> &mut Self {
        self.format = self.format.recyclable(log_number);
        self
    }

    /// Write Pebble's WAL-sync format for log `log_number`; see
    /// [`LogFormat::pebble`].
    pub fn pebble(&mut self, log_number: u64) -> &mut Self {
        self.format = LogFormat::pebble(log_number);
        self
    }

    /// Compress records as RocksDB's `wal_compression = kZSTD`; see
    /// [`LogFormat::zstd`].
    #[cfg(feature = "zstd")]
    pub fn zstd(&mut self) -> &mut Self {
        self.format = self.format.zstd();
        self
    }

    /// Continue a log already `len` bytes long (default 0: a new log). A compressed
    /// log writes its type-9 record only when it starts at 0.
    pub fn offset(&mut self, len: u64) -> &mut Self {
        self.offset = len;
        self
    }

    /// The encoder. Its item type (see [`LogEncoder`]) is inferred from how it is
    /// used: slices unless a sink of owned records says otherwise.
    pub fn build<T: ?Sized>(&self) -> LogEncoder<T> {
        LogEncoder {
            offset: self.offset,
            format: self.format,
            synced_offset: 0,
            #[cfg(feature = "zstd")]
            compressor: self.format.is_compressed().then(|| {
                crate::format::compression::RecordCompressor::new(self.format.header_size())
            }),
            items: PhantomData,
        }
    }
}

/// Encodes records in the LevelDB log format, byte for byte as LevelDB's writer does,
/// or in RocksDB's WAL formats, byte for byte as RocksDB's writer does (see
/// [`LogEncoder::builder`] and [`LogFormat`]).
///
/// The encoder remembers where in the current block it is, so the bytes it produces
/// over many calls form one valid log however they are later split into writes.
///
/// ```
/// use bytes::BytesMut;
/// use walcodec::LogEncoder;
///
/// let mut encoder = LogEncoder::new();
/// let mut log = BytesMut::new();
/// let position = encoder.encode_record(b"foo", &mut log);
/// assert_eq!((position.start, position.end), (0, 10));
/// assert_eq!(&log[..], b"\xdd\x5f\xb3\x7a\x03\x00\x01foo");
/// ```
///
/// # Items: slices or owned records
///
/// As a tokio-util [`Encoder`], a `LogEncoder<T>` takes one item type, named by
/// its parameter `T`:
///
/// | encoder | items a sink takes |
/// |---|---|
/// | `LogEncoder` (= `LogEncoder<[u8]>`, the default) | `&[u8]` |
/// | `LogEncoder<Bytes>` | [`Bytes`], what a `FramedRead` of a log yields |
/// | `LogEncoder<BytesMut>` | [`BytesMut`] |
/// | `LogEncoder<Vec<u8>>` | `Vec<u8>` |
///
/// One item type per encoder keeps `sink.close()` and `sink.flush()` free of
/// annotations (a sink of two item types could not tell which `Sink` they mean),
/// and [`LogEncoder::new`] infers `T` from how the sink is used, so a copy from a
/// decoder's stream into an encoder's sink needs no names at all:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// # let mut src_log = Vec::new();
/// # let mut sink = tokio_util::codec::FramedWrite::new(&mut src_log, walcodec::LogEncoder::new());
/// # futures::SinkExt::send(&mut sink, b"one".as_slice()).await?;
/// # futures::SinkExt::close(&mut sink).await?;
/// # let src = &src_log[..];
/// # let mut dst = Vec::new();
/// use futures::StreamExt;
/// use tokio_util::codec::{FramedRead, FramedWrite};
/// use walcodec::{LogDecoder, LogEncoder};
///
/// FramedRead::new(src, LogDecoder::new())
///     .forward(FramedWrite::new(&mut dst, LogEncoder::new()))
///     .await?;
/// assert_eq!(dst, src_log);
/// # Ok(())
/// # }
/// ```
///
/// Owned items, then `flush` and `close` with no type named:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::Bytes;
/// use futures::SinkExt;
/// use tokio_util::codec::FramedWrite;
/// use walcodec::LogEncoder;
///
/// let mut log = Vec::new();
/// let mut sink = FramedWrite::new(&mut log, LogEncoder::new());
/// sink.feed(Bytes::from_static(b"owned")).await?;
/// sink.flush().await?;
/// sink.send(Bytes::from(vec![1, 2, 3])).await?;
/// sink.close().await?;
/// # Ok(())
/// # }
/// ```
///
/// The methods that need no sink ([`encode_record`](LogEncoder::encode_record) and
/// the metadata records) take `&[u8]` and are on `LogEncoder` itself, so
/// `LogEncoder::new()` used alone, as above, needs no annotation either.
pub struct LogEncoder<T: ?Sized = [u8]> {
    offset: u64,
    format: LogFormat,
    /// Pebble's WAL-sync format: the durable end each fragment promises.
    synced_offset: u64,
    #[cfg(feature = "zstd")]
    compressor: Option<crate::format::compression::RecordCompressor>,
    /// The item type of the `Encoder` impl; `fn(&T)` keeps the encoder `Send`,
    /// `Sync` and `Unpin` whatever `T` is.
    items: PhantomData<fn(&T)>,
}

impl<T: ?Sized> fmt::Debug for LogEncoder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogEncoder")
            .field("offset", &self.offset)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized> Clone for LogEncoder<T> {
    fn clone(&self) -> Self {
        LogEncoder {
            offset: self.offset,
            format: self.format,
            synced_offset: self.synced_offset,
            #[cfg(feature = "zstd")]
            compressor: self.compressor.clone(),
            items: PhantomData,
        }
    }
}

impl<T: ?Sized> Default for LogEncoder<T> {
    fn default() -> Self {
        LogEncoderBuilder::default().build()
    }
}

impl LogEncoder {
    /// A builder, to write one of RocksDB's formats or to start at an offset.
    pub fn builder() -> LogEncoderBuilder {
        LogEncoderBuilder::default()
    }

    /// Appends one record to `dst` and returns where it sits in the log.
    #[inline]
    pub fn encode_record(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        self.encode_item(record, dst)
    }
}

impl<T: ?Sized> LogEncoder<T> {
    /// An encoder for a new, empty log.
    pub fn new() -> Self {
        LogEncoder::default()
    }

    /// An encoder that continues a log already `len` bytes long (LevelDB's
    /// `Writer(dest, dest_length)`): the next record is aligned as if this encoder had
    /// written those bytes.
    pub fn with_offset(len: u64) -> Self {
        LogEncoder {
            offset: len,
            ..LogEncoder::default()
        }
    }

    /// The same encoder, at the same place in the same log, for items of type `U`.
    pub fn with_items<U: ?Sized>(self) -> LogEncoder<U> {
        LogEncoder {
            offset: self.offset,
            format: self.format,
            synced_offset: self.synced_offset,
            #[cfg(feature = "zstd")]
            compressor: self.compressor,
            items: PhantomData,
        }
    }

    /// The format this encoder writes.
    pub fn format(&self) -> LogFormat {
        self.format
    }

    /// The logical length of the log so far: where the next byte will go.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Pebble's WAL-sync format: the offset up to which the log is durable, which
    /// every fragment encoded from now on promises (Pebble's reader takes damage
    /// before a promised offset as corruption, not a torn tail). A writer sets it
    /// after each sync; it must never exceed what is on disk. Default 0.
    pub fn set_synced_offset(&mut self, offset: u64) {
        self.synced_offset = offset;
    }

    /// The synced offset fragments carry (see [`set_synced_offset`](Self::set_synced_offset)).
    pub fn synced_offset(&self) -> u64 {
        self.synced_offset
    }

    /// Pebble's EOF trailer, what its `LogWriter` writes on a clean close: an
    /// 11-byte recyclable header with crc 0, length 0, type 5 and the log number
    /// plus one. Readers in Pebble's dialect stop there cleanly. Written where the
    /// next header would go (after zero-filling a block end too short for one).
    /// Does nothing in any format but Pebble's.
    pub fn encode_eof_trailer(&mut self, dst: &mut BytesMut) -> Position {
        let Some(log_number) = self.format.log_number().filter(|_| self.format.wal_sync) else {
            return Position {
                start: self.offset,
                end: self.offset,
            };
        };
        self.pad_block(WAL_SYNC_HEADER_SIZE, dst);
        let start = self.offset;
        dst.put_bytes(0, 6);
        dst.put_u8(Part::Full.type_byte(true));
        dst.put_u32_le((log_number as u32).wrapping_add(1));
        self.offset += RECYCLABLE_HEADER_SIZE as u64;
        Position {
            start,
            end: self.offset,
        }
    }

    /// Offset inside the current block.
    pub fn block_offset(&self) -> usize {
        (self.offset % BLOCK_SIZE as u64) as usize
    }

    /// How many bytes encoding a record of `len` bytes would add right now
    /// ([`LogEncoder::encoded_len`], for an encoder of any item type).
    pub(crate) fn len_to_encode(&self, len: usize) -> usize {
        let header_size = self.format.header_size();
        let mut block_offset = self.block_offset();
        let mut total = 0;
        let mut left = len;
        if self.format.is_compressed() {
            if self.offset == 0 {
                total += COMPRESSION_RECORD_LEN;
                block_offset += COMPRESSION_RECORD_LEN;
            }
            // Each chunk of compressor output may start a fragment mid-block: at
            // most one more header, and a trailer, per chunk.
            let bound = compressed_len_bound(len);
            let chunks = bound / (BLOCK_SIZE - header_size) + 1;
            left = bound + chunks * (2 * header_size);
        }
        loop {
            let leftover = BLOCK_SIZE - block_offset;
            if leftover < header_size {
                total += leftover;
                block_offset = 0;
            }
            let fragment = left.min(BLOCK_SIZE - block_offset - header_size);
            total += header_size + fragment;
            block_offset += header_size + fragment;
            left -= fragment;
            if left == 0 {
                return total;
            }
        }
    }

    /// [`encode_record`](LogEncoder::encode_record) for any item type.
    #[inline]
    pub(crate) fn encode_item(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        if self.format != LogFormat::leveldb() {
            return self.encode_rocksdb(record, dst);
        }
        let fragment_len = HEADER_SIZE + record.len();
        if fragment_len <= BLOCK_SIZE - self.block_offset() {
            // The common case: the record fits in the current block as one FULL
            // fragment, with no trailer before it.
            let start = self.offset;
            dst.reserve(fragment_len);
            dst.put_slice(&legacy_header(Part::Full.type_byte(false), record));
            dst.put_slice(record);
            self.offset += fragment_len as u64;
            return Position {
                start,
                end: self.offset,
            };
        }
        self.encode_fragments(record, dst)
    }

    fn encode_fragments(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        dst.reserve(self.len_to_encode(record.len()));
        let mut left = record;
        let mut begins = true;
        let mut start = self.offset;
        // Like LevelDB, run the loop at least once so an empty record is a
        // zero-length FULL fragment.
        loop {
            let leftover = BLOCK_SIZE - self.block_offset();
            if leftover < HEADER_SIZE {
                dst.put_bytes(0, leftover);
                self.offset += leftover as u64;
            }
            let available = BLOCK_SIZE - self.block_offset() - HEADER_SIZE;
            let fragment_len = left.len().min(available);
            let (fragment, rest) = left.split_at(fragment_len);
            let ends = rest.is_empty();
            if begins {
                start = self.offset;
            }
            let header = legacy_header(Part::for_fragment(begins, ends).type_byte(false), fragment);
            dst.put_slice(&header);
            dst.put_slice(fragment);
            self.offset += (HEADER_SIZE + fragment_len) as u64;
            left = rest;
            begins = false;
            if ends {
                return Position {
                    start,
                    end: self.offset,
                };
            }
        }
    }

    /// One record in a RocksDB format, as `log::Writer::AddRecord` writes it
    /// (`db/log_writer.cc`).
    fn encode_rocksdb(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        #[cfg(feature = "zstd")]
        if self.compressor.is_some() {
            return self.encode_compressed(record, dst);
        }
        let header_size = self.format.header_size();
        dst.reserve(self.len_to_encode(record.len()));
        let mut left = record;
        let mut begins = true;
        let mut start = self.offset;
        loop {
            self.pad_block(header_size, dst);
            let available = BLOCK_SIZE - self.block_offset() - header_size;
            let (fragment, rest) = left.split_at(left.len().min(available));
            let ends = rest.is_empty();
            if begins {
                start = self.offset;
            }
            self.put_fragment(Part::for_fragment(begins, ends), fragment, dst);
            left = rest;
            begins = false;
            if ends {
                return Position {
                    start,
                    end: self.offset,
                };
            }
        }
    }

    /// One record compressed as RocksDB's writer does: the record is one zstd frame,
    /// taken from the compressor a chunk (at most a block's payload) at a time; every
    /// chunk starts a new fragment where the previous one ended, even mid-block.
    ///
    /// Like RocksDB's writer, a chunk that ends with 7 to 10 bytes left in a block of
    /// a recyclable WAL leaves a zero trailer inside the record; RocksDB 7.8.3's
    /// reader takes those zeros for a type-0 header and reports "error in middle of
    /// record" (checked with its ldb). Rare: the record must start 18 to 21 bytes
    /// before a block end and its frame span more than one chunk.
    #[cfg(feature = "zstd")]
    fn encode_compressed(&mut self, record: &[u8], dst: &mut BytesMut) -> Position {
        let header_size = self.format.header_size();
        if self.offset == 0 {
            self.put_compression_record(dst);
        }
        let Some(mut compressor) = self.compressor.take() else {
            unreachable!("encode_compressed runs only with a compressor");
        };
        compressor.start();
        let mut begins = true;
        let mut start = self.offset;
        // The chunk in hand: `chunk[taken..]` is still to be written.
        let (mut chunk_len, mut taken) = (0, 0);
        let mut pending = 0;
        let mut first_chunk = true;
        loop {
            self.pad_block(header_size, dst);
            let available = BLOCK_SIZE - self.block_offset() - header_size;
            if first_chunk || taken == chunk_len {
                (chunk_len, pending) = compressor.next_chunk(record);
                taken = 0;
                if chunk_len == 0 && !first_chunk {
                    // zstd said more was pending and then gave nothing: RocksDB
                    // stops here too (without a LAST fragment).
                    break;
                }
                first_chunk = false;
            }
            let fragment_len = (chunk_len - taken).min(available);
            let ends = taken + fragment_len == chunk_len && pending == 0;
            if begins {
                start = self.offset;
            }
            let fragment = &compressor.chunk()[taken..taken + fragment_len];
            self.put_fragment(Part::for_fragment(begins, ends), fragment, dst);
            taken += fragment_len;
            begins = false;
            if taken == chunk_len && pending == 0 {
                break;
            }
        }
        self.compressor = Some(compressor);
        Position {
            start,
            end: self.offset,
        }
    }
}

// The metadata records, like `encode_record`, are written without a sink: on
// `LogEncoder` (slices) alone, so that `LogEncoder::new()` needs no annotation.
impl LogEncoder {
    /// How many bytes encoding a record of `len` bytes would add right now.
    ///
    /// Exact for an uncompressed format. For a compressed one the size depends on
    /// the bytes: this is an upper bound, from zstd's bound on its output.
    ///
    /// On `LogEncoder` (slices) alone, so that `LogEncoder::new().encoded_len(n)`
    /// needs no annotation; an encoder of owned items asks through
    /// [`with_items`](LogEncoder::with_items): `encoder.clone().with_items::<[u8]>()`.
    ///
    /// ```
    /// use walcodec::LogEncoder;
    ///
    /// assert_eq!(LogEncoder::new().encoded_len(100), 107);
    /// ```
    pub fn encoded_len(&self, len: usize) -> usize {
        self.len_to_encode(len)
    }

    /// Appends RocksDB's user-defined timestamp-size record (type 10, or 11 with a
    /// recyclable header): the timestamp sizes of column families that records after
    /// it use. Returns where it sits; it is not a logical record.
    ///
    /// As RocksDB's writer, the record is never fragmented: when it does not fit in
    /// the rest of the block, the rest of the block is zero-filled first (readers
    /// skip it as zero fill). A compressed WAL gets its type-9 record first if the
    /// log is empty.
    ///
    /// # Errors
    /// [`MetadataError::ZeroTimestampSize`] for an entry of size 0 (RocksDB records
    /// only timestamped column families, and its reader rejects size 0), and
    /// [`MetadataError::TooManyEntries`] when the record would not fit in one block.
    pub fn encode_timestamp_sizes(
        &mut self,
        sizes: &[TimestampSize],
        dst: &mut BytesMut,
    ) -> Result<Position, MetadataError> {
        let max = (BLOCK_SIZE - self.format.header_size()) / TimestampSize::ENCODED_LEN;
        if sizes.len() > max {
            return Err(MetadataError::TooManyEntries {
                len: sizes.len(),
                max,
            });
        }
        if let Some(zero) = sizes.iter().find(|entry| entry.timestamp_size == 0) {
            return Err(MetadataError::ZeroTimestampSize {
                column_family: zero.column_family,
            });
        }
        let payload: Vec<u8> = sizes.iter().flat_map(|entry| entry.to_bytes()).collect();
        Ok(self.encode_metadata(
            crate::format::fragment::FragmentType::UserDefinedTimestampSize.as_u8(),
            &payload,
            dst,
        ))
    }

    /// Appends RocksDB's predecessor-WAL record (type 130, or 131 with a recyclable
    /// header), which RocksDB writes after the type-9 record when
    /// `track_and_verify_wals` is on. Placed as
    /// [`encode_timestamp_sizes`](Self::encode_timestamp_sizes) places its record.
    pub fn encode_predecessor_wal_info(
        &mut self,
        info: &PredecessorWalInfo,
        dst: &mut BytesMut,
    ) -> Position {
        self.encode_metadata(
            crate::format::fragment::FragmentType::PredecessorWalInfo.as_u8(),
            &info.to_payload(),
            dst,
        )
    }
}

impl<T: ?Sized> LogEncoder<T> {
    /// A metadata record of `legacy_type` (its recyclable type is the next byte),
    /// whole in one block (`db/log_writer.cc`, `MaybeSwitchToNewBlock`).
    fn encode_metadata(&mut self, legacy_type: u8, payload: &[u8], dst: &mut BytesMut) -> Position {
        if self.format.wal_sync {
            // Pebble has no metadata records: its types 9–12 are data.
            return Position {
                start: self.offset,
                end: self.offset,
            };
        }
        #[cfg(feature = "zstd")]
        if self.compressor.is_some() && self.offset == 0 {
            self.put_compression_record(dst);
        }
        let header_size = self.format.header_size();
        let leftover = BLOCK_SIZE - self.block_offset();
        if leftover < header_size + payload.len() {
            dst.put_bytes(0, leftover);
            self.offset += leftover as u64;
        }
        let start = self.offset;
        match self.format.log_number() {
            Some(log_number) => {
                dst.put_slice(&recyclable_header(legacy_type + 1, log_number, payload))
            }
            None => dst.put_slice(&legacy_header(legacy_type, payload)),
        }
        dst.put_slice(payload);
        self.offset += (header_size + payload.len()) as u64;
        Position {
            start,
            end: self.offset,
        }
    }

    /// RocksDB's type-9 record, at offset 0 of a compressed WAL: always a legacy
    /// header, even in a recyclable WAL.
    #[cfg(feature = "zstd")]
    fn put_compression_record(&mut self, dst: &mut BytesMut) {
        let payload = crate::format::metadata::WalCompressionType::Zstd.to_payload();
        dst.put_slice(&legacy_header(
            crate::format::fragment::FragmentType::SetCompressionType.as_u8(),
            &payload,
        ));
        dst.put_slice(&payload);
        self.offset += COMPRESSION_RECORD_LEN as u64;
    }

    /// Zero-fills the rest of the block when a header of `header_size` bytes does not
    /// fit: 1 to 6 bytes, or 1 to 10 before a recyclable header.
    fn pad_block(&mut self, header_size: usize, dst: &mut BytesMut) {
        let leftover = BLOCK_SIZE - self.block_offset();
        if leftover < header_size {
            dst.put_bytes(0, leftover);
            self.offset += leftover as u64;
        }
    }

    /// A data fragment with this format's header.
    fn put_fragment(&mut self, part: Part, payload: &[u8], dst: &mut BytesMut) {
        let header_size = match self.format.log_number() {
            Some(log_number) if self.format.wal_sync => {
                dst.put_slice(&wal_sync_header(
                    part.wal_sync_type_byte(),
                    log_number,
                    self.synced_offset,
                    payload,
                ));
                WAL_SYNC_HEADER_SIZE
            }
            Some(log_number) => {
                dst.put_slice(&recyclable_header(
                    part.type_byte(true),
                    log_number,
                    payload,
                ));
                RECYCLABLE_HEADER_SIZE
            }
            None => {
                dst.put_slice(&legacy_header(part.type_byte(false), payload));
                LEGACY_HEADER_SIZE
            }
        };
        dst.put_slice(payload);
        self.offset += (header_size + payload.len()) as u64;
    }
}

impl LogFormat {
    /// The most bytes a record of `len` bytes can encode to in this format, wherever
    /// in a block it starts: a header per fragment (one more than a fresh block
    /// needs), a trailer, and for a compressed format zstd's bound on its output,
    /// a fragment more per chunk and the type-9 record.
    pub(crate) fn max_encoded_len(&self, len: usize) -> usize {
        let header_size = self.header_size();
        let (stored, extra_fragments) = if self.is_compressed() {
            let bound = compressed_len_bound(len).saturating_add(COMPRESSION_RECORD_LEN);
            (bound, bound / (BLOCK_SIZE - header_size) + 1)
        } else {
            (len, 0)
        };
        let fragments = stored / (BLOCK_SIZE - header_size) + 2 + extra_fragments;
        stored
            .saturating_add(fragments.saturating_mul(2 * header_size))
            .saturating_add(header_size - 1)
    }
}

/// Bytes of RocksDB's type-9 record: a legacy header and a fixed32.
const COMPRESSION_RECORD_LEN: usize = LEGACY_HEADER_SIZE + 4;

/// zstd's bound on the compressed size of `len` bytes (`ZSTD_COMPRESSBOUND`), plus
/// the frame checksum; saturating, as `encoded_len` is only an estimate then.
fn compressed_len_bound(len: usize) -> usize {
    let small_input_margin = if len < 128 << 10 {
        ((128 << 10) - len) >> 11
    } else {
        0
    };
    len.saturating_add(len >> 8)
        .saturating_add(small_input_margin)
        .saturating_add(4)
}

/// Records go in as byte slices: the default `LogEncoder` (= `LogEncoder<[u8]>`)
/// is a sink of `&[u8]`, one item type, so `sink.flush()` and `sink.close()` need no
/// type annotation.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use futures::SinkExt;
/// use tokio_util::codec::FramedWrite;
/// use walcodec::LogEncoder;
///
/// let mut log = Vec::new();
/// let mut sink = FramedWrite::new(&mut log, LogEncoder::new());
/// let owned: Vec<u8> = b"an owned record".to_vec();
/// sink.send(&owned[..]).await?;
/// sink.send(b"a literal".as_slice()).await?;
/// sink.flush().await?;
/// sink.close().await?;
/// # Ok(())
/// # }
/// ```
impl Encoder<&[u8]> for LogEncoder {
    // Encoding cannot fail: the only error is the sink's (`CodecError::Io`).
    type Error = CodecError;

    fn encode(&mut self, record: &[u8], dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encode_item(record, dst);
        Ok(())
    }
}

/// Owned records: `LogEncoder<Bytes>` (what a decoder's stream yields),
/// `LogEncoder<BytesMut>` and `LogEncoder<Vec<u8>>` each take their own type, one
/// item type per encoder (see [`LogEncoder`]). The record is copied into the write
/// buffer all the same.
macro_rules! owned_items {
    ($($item:ty),*) => {$(
        impl Encoder<$item> for LogEncoder<$item> {
            type Error = CodecError;

            fn encode(&mut self, record: $item, dst: &mut BytesMut) -> Result<(), CodecError> {
                self.encode_item(&record, dst);
                Ok(())
            }
        }
    )*};
}

owned_items!(Bytes, BytesMut, Vec<u8>);

#[cfg(test)]
mod tests;
