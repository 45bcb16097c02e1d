//! One pass over a log (an `Input`) that shows each block to the physical walker
//! (`walcodec::physical::Pieces`, in the log's dialect), to a `LogDecoder` in
//! `SkipCorrupted` mode and to one in `TolerateTail` mode, so a command sees the
//! layout, the records and every report of the same bytes, and the verdict of a
//! strict reader.
//!
//! Two decoders because the modes differ on purpose at the tail: zeros after a FIRST
//! (what a power cut leaves in a preallocated file) is "error in middle of record" to
//! LevelDB's reader, but a torn tail to a strict one. Reports come from the first,
//! whether the log is damaged or only torn from the second.

use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use walcodec::physical::{Chunk, Header, Piece, Pieces};
use walcodec::{block_start, Corruption, DecodeStats, LogDecoder, Position, Recovery};

use crate::common::{decoder_builder, Failure, Limits, READ_SIZE};
use crate::dialect::LogChoice;
use crate::input::{Input, InputEnd};
use crate::wal::WalFacts;

/// What a command does with each thing the pass finds. Chunks of a block come before
/// the records and reports the decoder makes from it.
pub(crate) trait Visitor {
    /// Each piece of the layout, in the log's dialect. By default, a piece that has a
    /// LevelDB view (see `leveldb_chunk`) goes to `chunk`.
    fn piece(&mut self, piece: &Piece<'_>) -> Result<(), Failure> {
        match leveldb_chunk(piece) {
            Some(chunk) => self.chunk(&chunk),
            None => Ok(()),
        }
    }
    fn chunk(&mut self, _chunk: &Chunk<'_>) -> Result<(), Failure> {
        Ok(())
    }
    fn record(&mut self, _position: Position, _data: &Bytes) -> Result<(), Failure> {
        Ok(())
    }
    fn corruption(&mut self, _corruption: &Corruption) -> Result<(), Failure> {
        Ok(())
    }
    /// The strict reader found damage: from here on, every report is about damage
    /// (until now, reports might have been about a torn tail). Called once at most.
    fn strict_damage(&mut self) -> Result<(), Failure> {
        Ok(())
    }
}

/// What the pass saw, at its end.
#[derive(Debug)]
pub(crate) struct ScanEnd {
    /// The offset just past the last byte read: the length of the log as read.
    pub(crate) file_len: u64,
    /// How the read of the input ended.
    pub(crate) input: InputEnd,
    /// The decoder's counters (all zero when nothing was decoded).
    pub(crate) stats: DecodeStats,
    /// What a `TolerateTail` reader makes of the same bytes.
    pub(crate) strict: StrictEnd,
    /// What the walk saw of a RocksDB WAL's own pieces.
    pub(crate) wal: WalFacts,
}

/// The LevelDB view of a piece: the chunk `physical::Chunks` yields for it. `None`
/// for what only RocksDB's dialect has: a fragment with an 11-byte header, an old
/// fragment. (A metadata record with a 7-byte header is a fragment of a type LevelDB
/// does not know; a 7-to-10-byte trailer a trailer.)
pub(crate) fn leveldb_chunk<'a>(piece: &Piece<'a>) -> Option<Chunk<'a>> {
    let legacy = |header: walcodec::fragment::FragmentHeader| {
        (header.log_number.is_none()).then(|| Header::from(header))
    };
    Some(match *piece {
        Piece::Fragment {
            offset,
            fragment,
            payload,
            checksum_ok,
        } => Chunk::Fragment {
            offset,
            header: legacy(fragment.header())?,
            payload,
            checksum_ok,
        },
        Piece::Metadata {
            offset,
            fragment,
            payload,
            ..
        } => Chunk::Fragment {
            offset,
            header: legacy(fragment.header())?,
            payload,
            checksum_ok: true,
        },
        Piece::Trailer { offset, bytes } => Chunk::Trailer { offset, bytes },
        Piece::ZeroFill { offset, bytes } => Chunk::ZeroFill { offset, bytes },
        Piece::BadLength {
            offset,
            header,
            bytes,
        } => Chunk::BadLength {
            offset,
            header: Header::from(header),
            bytes,
        },
        Piece::Skipped { offset, bytes } => Chunk::Skipped { offset, bytes },
        Piece::Torn {
            offset,
            header,
            bytes,
        } => Chunk::Torn {
            offset,
            header: header.map(Header::from),
            bytes,
        },
        _ => return None,
    })
}

/// The end of a `TolerateTail` read: damage stops it, a torn tail does not.
#[derive(Debug, Default)]
pub(crate) struct StrictEnd {
    /// The damage that stopped it, if any.
    pub(crate) damage: Option<String>,
    /// End of the last complete record it returned.
    pub(crate) valid_prefix_len: u64,
    /// Whether it found the log ending inside a record.
    pub(crate) incomplete_tail: bool,
}

/// A `TolerateTail` decoder fed the same bytes, for its verdict only.
struct Strict {
    decoder: LogDecoder,
    pending: BytesMut,
    damage: Option<String>,
}

impl Strict {
    /// Decodes `bytes`; tells `visitor` when this finds the first damage.
    fn feed(&mut self, bytes: &[u8], eof: bool, visitor: &mut dyn Visitor) -> Result<(), Failure> {
        if self.damage.is_some() {
            return Ok(());
        }
        self.pending.extend_from_slice(bytes);
        loop {
            let decoded = if eof {
                self.decoder.decode_eof(&mut self.pending)
            } else {
                self.decoder.decode(&mut self.pending)
            };
            match decoded {
                Ok(Some(_record)) => {}
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.damage = Some(e.to_string());
                    self.pending.clear();
                    return visitor.strict_damage();
                }
            }
        }
    }

    fn end(self) -> StrictEnd {
        StrictEnd {
            damage: self.damage,
            valid_prefix_len: self.decoder.valid_prefix_len(),
            incomplete_tail: self.decoder.has_incomplete_tail(),
        }
    }
}

/// Reads `input` from the block holding `start` to where its read ends, as `log`
/// says. With `decode` false only the physical walk is made. Memory stays bounded by
/// the read size and the largest record, whatever the input's length.
pub(crate) fn scan(
    input: &mut Input,
    start: u64,
    decode: bool,
    limits: Limits,
    log: &LogChoice,
    visitor: &mut dyn Visitor,
) -> Result<ScanEnd, Failure> {
    let mut offset = block_start(start);
    input.skip_to(offset)?;

    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut decoder = decoder_builder(
        log,
        Recovery::SkipCorrupted,
        start,
        limits,
        move |c: &Corruption| sink.lock().expect("not poisoned").push(c.clone()),
    )
    .build();
    let mut strict = Strict {
        decoder: decoder_builder(
            log,
            Recovery::TolerateTail,
            start,
            limits,
            |_: &Corruption| {},
        )
        .build(),
        pending: BytesMut::new(),
        damage: None,
    };
    let mut pass = Pass {
        decoder: &mut decoder,
        reports: &reports,
        pending: BytesMut::new(),
        visitor,
    };

    let rules = log.rules();
    let mut wal = WalFacts::default();
    let mut buffer = vec![0u8; READ_SIZE];
    loop {
        let n = read_full(input, &mut buffer).map_err(|e| input.failure(e))?;
        // Whole blocks (READ_SIZE is a multiple of the block size) or the file's end,
        // so the walker never sees a block cut by the buffer.
        for piece in Pieces::new(&buffer[..n], offset, rules) {
            wal.add(&piece);
            pass.visitor.piece(&piece)?;
        }
        offset += n as u64;
        if decode {
            pass.pending.extend_from_slice(&buffer[..n]);
            pass.drain(false)?;
            strict.feed(&buffer[..n], false, pass.visitor)?;
        }
        if n < buffer.len() {
            break;
        }
    }
    if decode {
        pass.drain(true)?;
        strict.feed(&[], true, pass.visitor)?;
    }
    Ok(ScanEnd {
        file_len: offset,
        input: input.finish(),
        stats: decoder.stats(),
        strict: strict.end(),
        wal,
    })
}

struct Pass<'a> {
    decoder: &'a mut LogDecoder,
    reports: &'a Mutex<Vec<Corruption>>,
    pending: BytesMut,
    visitor: &'a mut dyn Visitor,
}

impl Pass<'_> {
    /// Decodes what `pending` holds, handing records and reports over in log order.
    fn drain(&mut self, eof: bool) -> Result<(), Failure> {
        loop {
            let decoded = if eof {
                self.decoder.decode_eof(&mut self.pending)
            } else {
                self.decoder.decode(&mut self.pending)
            };
            // Reports made before a record was returned concern bytes before it.
            let reports = std::mem::take(&mut *self.reports.lock().expect("not poisoned"));
            for report in &reports {
                self.visitor.corruption(report)?;
            }
            // SkipCorrupted reports damage instead of failing, so only a bug lands here.
            let decoded = decoded.map_err(|e| Failure::new(format!("decoder: {e}")))?;
            match decoded {
                Some(record) => {
                    let position = self
                        .decoder
                        .last_record()
                        .expect("a returned record has a position");
                    self.visitor.record(position, &record)?;
                }
                None => return Ok(()),
            }
        }
    }
}

/// Reads until `buffer` is full or the file ends: a short read is not the end.
fn read_full(file: &mut Input, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
