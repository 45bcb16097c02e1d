//! Reading a segment's bytes as they stream past (to the store, from it): their
//! CRC-32C, and their records through walcodec's decoder in the log's dialect, so
//! every fragment's CRC is checked and every record boundary seen.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use walcodec::{Dialect, LogDecoder};

/// Bytes checked at once: four blocks, small enough to stay in a core's cache
/// from one pass over them to the next.
pub(crate) const PIECE: usize = 128 << 10;

/// Where the records of a segment are, and whether its bytes hold together.
pub(crate) struct SegmentScan {
    pebble: bool,
    crc: u32,
    len: u64,
    decoder: LogDecoder,
    buf: BytesMut,
    records: u64,
    /// Record boundaries are reported up to here: the last record end at or
    /// before it is [`Scanned::cut`].
    cut_limit: u64,
    cut: u64,
    cut_records: u64,
    failure: Option<String>,
}

/// What a whole segment (or prefix) held.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scanned {
    pub(crate) len: u64,
    pub(crate) crc32c: u32,
    /// Where its records end (before a sealed Pebble segment's EOF trailer).
    pub(crate) records_end: u64,
    pub(crate) records: u64,
    /// The last record end at or before the scan's limit (0 when none).
    pub(crate) cut: u64,
    /// The records up to `cut`.
    pub(crate) cut_records: u64,
}

/// The decoder of segment `number` in `dialect` (LevelDB's and RocksDB's read
/// alike in RocksDB's dialect, recyclable headers included).
/// `start`: the first record returned is the first that starts at or after it
/// (the bytes fed begin at its block's start).
pub(crate) fn segment_decoder(number: u64, dialect: Dialect, start: u64) -> LogDecoder {
    let dialect = if dialect == Dialect::Pebble {
        Dialect::Pebble
    } else {
        Dialect::RocksDb
    };
    LogDecoder::builder()
        .dialect(dialect)
        .log_number(number)
        .start_offset(start)
        .build()
}

impl SegmentScan {
    pub(crate) fn new(number: u64, dialect: Dialect) -> SegmentScan {
        SegmentScan {
            pebble: dialect == Dialect::Pebble,
            crc: 0,
            len: 0,
            decoder: segment_decoder(number, dialect, 0),
            buf: BytesMut::new(),
            records: 0,
            cut_limit: u64::MAX,
            cut: 0,
            cut_records: 0,
            failure: None,
        }
    }

    /// Also find the last record boundary at or before `limit`.
    pub(crate) fn cut_at(mut self, limit: u64) -> SegmentScan {
        self.cut_limit = limit;
        self
    }

    /// The bytes taken so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The CRC-32C of the bytes taken so far.
    pub(crate) fn crc(&self) -> u32 {
        self.crc
    }

    /// Takes the next bytes of the segment. Damage is remembered and reported by
    /// [`finish`](Self::finish); the CRC goes on.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        // Piece by piece: each pass (the CRC, the copy into the decoder's buffer,
        // the fragments' CRCs) finds the piece still in cache.
        for piece in chunk.chunks(PIECE) {
            self.crc = crc32c::crc32c_append(self.crc, piece);
            self.len += piece.len() as u64;
            if self.failure.is_some() {
                continue;
            }
            self.buf.extend_from_slice(piece);
            self.drain(false);
        }
    }

    fn drain(&mut self, eof: bool) {
        loop {
            let next = if eof {
                self.decoder.decode_eof(&mut self.buf)
            } else {
                self.decoder.decode(&mut self.buf)
            };
            match next {
                Ok(Some(record)) => self.saw(&record),
                Ok(None) => return,
                Err(e) => {
                    self.failure = Some(e.to_string());
                    self.buf.clear();
                    return;
                }
            }
        }
    }

    fn saw(&mut self, _record: &Bytes) {
        self.records += 1;
        if let Some(position) = self.decoder.last_record() {
            if position.end <= self.cut_limit {
                self.cut = position.end;
                self.cut_records = self.records;
            }
        }
    }

    /// The whole segment went past: as a sealed segment (`sealed`: a Pebble one
    /// ends with its EOF trailer) or as the durable prefix of the active one (which
    /// ends with the trailer only when its log was closed).
    pub(crate) fn finish(mut self, sealed: bool) -> Result<Scanned, String> {
        if self.failure.is_none() {
            self.drain(true);
        }
        if let Some(failure) = self.failure {
            return Err(failure);
        }
        let decoder = &self.decoder;
        if decoder.has_incomplete_tail() {
            return Err(format!(
                "a torn record at offset {} of {} bytes",
                decoder.valid_prefix_len(),
                self.len
            ));
        }
        // A closed (not sealed) Pebble segment ends with the trailer too: the
        // last segment of a log closed cleanly, archived as its active prefix.
        let records_end = if self.pebble && (sealed || decoder.has_eof_trailer()) {
            let trailer_at = self.len.checked_sub(EOF_TRAILER_BYTES);
            if !(decoder.has_eof_trailer() && decoder.recycled_end() == trailer_at) {
                return Err(format!(
                    "a sealed Pebble segment must end with its EOF trailer; its records \
                     end at {} of {} bytes",
                    decoder.valid_prefix_len(),
                    self.len
                ));
            }
            decoder.valid_prefix_len()
        } else {
            if let Some(end) = decoder.recycled_end() {
                return Err(format!(
                    "its records end at {end} of {} bytes (a recycled file's old bytes \
                     or damage after them)",
                    self.len
                ));
            }
            self.len
        };
        Ok(Scanned {
            len: self.len,
            crc32c: self.crc,
            records_end,
            records: self.records,
            cut: self.cut,
            cut_records: self.cut_records,
        })
    }
}

/// Pebble's EOF trailer: a recyclable header of the next log number.
const EOF_TRAILER_BYTES: u64 = 11;

/// Chunks queued for a [`ScanWorker`] before the one feeding it waits: with the
/// chunk being scanned, at most `SCAN_QUEUE + 1` chunks held by the check.
pub(crate) const SCAN_QUEUE: usize = 2;

/// Where a checked object's bytes go on their way down (a restore's file, or
/// nowhere for a verify): written by the [`ScanWorker`], at their offsets, up to
/// `keep` bytes.
pub(crate) struct Output {
    pub(crate) file: Option<std::fs::File>,
    /// Bytes past this are checked, not written (a point-in-time cut).
    pub(crate) keep: u64,
}

impl Output {
    /// Bytes checked and dropped.
    pub(crate) fn none() -> Output {
        Output {
            file: None,
            keep: 0,
        }
    }

    fn write(&mut self, at: u64, chunk: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let Some(file) = &self.file else {
            return Ok(());
        };
        let room = self.keep.saturating_sub(at);
        let take = usize::try_from(room).map_or(chunk.len(), |room| room.min(chunk.len()));
        if take > 0 {
            file.write_all_at(&chunk[..take], at)?;
        }
        Ok(())
    }
}

/// A [`SegmentScan`] (and the [`Output`] of the bytes it checks) on a blocking
/// thread, fed in order through a bounded queue: checking a segment's bytes
/// (two CRC passes and the decoder) and writing them overlap with moving them,
/// instead of taking turns with it on the task that moves them.
pub(crate) struct ScanWorker {
    queue: Option<tokio::sync::mpsc::Sender<Bytes>>,
    task: tokio::task::JoinHandle<(SegmentScan, std::io::Result<Output>)>,
}

impl ScanWorker {
    pub(crate) fn spawn(mut scan: SegmentScan, mut output: Output) -> ScanWorker {
        let (queue, mut chunks) = tokio::sync::mpsc::channel::<Bytes>(SCAN_QUEUE);
        let task = tokio::task::spawn_blocking(move || {
            let mut failed = None;
            while let Some(chunk) = chunks.blocking_recv() {
                // Written piece by piece too, while each is in cache.
                for piece in chunk.chunks(PIECE) {
                    let at = scan.len();
                    scan.feed(piece);
                    if failed.is_none() {
                        failed = output.write(at, piece).err();
                    }
                }
            }
            match failed {
                Some(e) => (scan, Err(e)),
                None => (scan, Ok(output)),
            }
        });
        ScanWorker {
            queue: Some(queue),
            task,
        }
    }

    /// Queues the next chunk, waiting while the queue is full.
    pub(crate) async fn feed(&mut self, chunk: Bytes) {
        if let Some(queue) = &self.queue {
            // An error means the worker is gone (it panicked): `finish` says so.
            let _ = queue.send(chunk).await;
        }
    }

    /// Waits until every chunk fed is checked (and written).
    pub(crate) async fn finish(mut self) -> std::io::Result<(SegmentScan, Output)> {
        self.queue = None;
        let (scan, output) = (&mut self.task).await.map_err(std::io::Error::other)?;
        Ok((scan, output?))
    }
}
