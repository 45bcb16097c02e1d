//! Pebble's WALs of `tests/data/pebble` (from Pebble's own test fixtures), and an
//! independent reference reader written from Pebble's reading rules
//! (`record/record.go`: `nextChunk`, `Next`, `readAheadForCorruption`) to check the
//! decoder against: a whole-buffer, obviously-sequential reader.
#![allow(dead_code)] // Each test binary uses its own subset.

use std::fs;
use std::path::PathBuf;

/// The five vectors, as `case/NNNNNN.log`.
pub const VECTORS: [&str; 5] = [
    "db-stage-1/000002.log",
    "db-stage-2/000002.log",
    "broken-external-db/000004.log",
    "broken-external-db/000006.log",
    "mixed/000004.log",
];

/// `tests/data/pebble/<name>`.
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pebble")
        .join(name)
}

/// The log number in `case/NNNNNN.log`.
pub fn log_number(name: &str) -> u64 {
    let file = name.rsplit('/').next().unwrap();
    file.trim_end_matches(".log").parse().unwrap()
}

/// The records Pebble's reader returns (the `.expected.hex` beside the WAL).
pub fn expected_records(name: &str) -> Vec<Vec<u8>> {
    let text = fs::read_to_string(data_path(&format!("{name}.expected.hex"))).unwrap();
    text.lines()
        .map(|line| {
            (0..line.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

const BLOCK: usize = 32 * 1024;

/// How Pebble's reader ends a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PebbleEnd {
    /// `io.EOF`: the log ended cleanly (EOF at a record start, or the EOF trailer).
    Eof,
    /// `ErrUnexpectedEOF`: an invalid chunk nothing proves corrupt, or EOF inside a
    /// record: the torn or recycled tail.
    UnexpectedEof,
    /// The invalid chunk's error: a later WAL-sync chunk promised a synced offset
    /// past `invalid_offset`.
    Corrupt { invalid_offset: u64 },
}

/// What the reference reader returns: the records, then how the log ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PebbleRead {
    pub records: Vec<Vec<u8>>,
    pub end: PebbleEnd,
}

fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// One chunk as Pebble's `nextChunk` sees it.
enum Chunk {
    /// A valid chunk: its payload range, and whether it is FULL/FIRST, LAST/FULL.
    Valid {
        payload: (usize, usize),
        first: bool,
        last: bool,
    },
    /// The EOF trailer (next log's number at a record start), or EOF itself.
    Eof,
    /// An invalid chunk, with the offset Pebble's `invalidOffset` takes.
    Invalid(u64),
}

/// The reader's position: the whole log, where the next chunk header is.
struct Reader<'a> {
    log: &'a [u8],
    pos: usize,
    log_number: u32,
}

impl Reader<'_> {
    /// The bytes of the block `pos` is in, as Pebble reads them (the last block may
    /// be short), and where it starts.
    fn block_end(&self, pos: usize) -> usize {
        ((pos / BLOCK + 1) * BLOCK).min(self.log.len())
    }

    fn next_chunk(&mut self, want_first: bool) -> Chunk {
        loop {
            if self.pos >= self.log.len() {
                // Nothing more to read: EOF at a record start, else an unexpected EOF.
                return if want_first {
                    Chunk::Eof
                } else {
                    Chunk::Invalid(u64::MAX)
                };
            }
            let n = self.block_end(self.pos);
            let at = self.pos;
            if at + 7 > n {
                if n % BLOCK == 0 {
                    // A full block: go on with the next.
                    self.pos = n;
                    continue;
                }
                // A short final block with bytes left: invalid unless nothing is.
                return if want_first && at == n {
                    Chunk::Eof
                } else {
                    Chunk::Invalid(at as u64)
                };
            }
            let b = self.log;
            let checksum = u32_at(b, at);
            let length = u16::from_le_bytes([b[at + 4], b[at + 5]]) as usize;
            let encoding = b[at + 6];
            if encoding > 12 {
                return Chunk::Invalid(at as u64);
            }
            if checksum == 0 && length == 0 && encoding == 0 {
                if at + 11 > n {
                    self.pos = n;
                    continue;
                }
                if at + 19 > n {
                    if b[at..n].iter().any(|&x| x != 0) {
                        return Chunk::Invalid(at as u64);
                    }
                    self.pos = n;
                    continue;
                }
                return Chunk::Invalid(at as u64);
            }
            if encoding == 0 {
                return Chunk::Invalid(at as u64);
            }
            let header = match encoding {
                1..=4 => 7,
                5..=8 => 11,
                _ => 19,
            };
            if header > 7 {
                if at + header > n {
                    return Chunk::Invalid(at as u64);
                }
                let number = u32_at(b, at + 7);
                if number != self.log_number {
                    if number == self.log_number.wrapping_add(1) && want_first {
                        return Chunk::Eof;
                    }
                    return Chunk::Invalid(at as u64);
                }
            }
            let begin = at + header;
            let end = begin + length;
            if end > n {
                return Chunk::Invalid(begin as u64);
            }
            if checksum != masked_crc(&b[at + 6..end]) {
                return Chunk::Invalid(begin as u64);
            }
            self.pos = end;
            let position = (encoding - 1) % 4; // 0 full, 1 first, 2 middle, 3 last
            if want_first && !(position == 0 || position == 1) {
                continue;
            }
            return Chunk::Valid {
                payload: (begin, end),
                first: position <= 1,
                last: position == 0 || position == 3,
            };
        }
    }

    /// `readAheadForCorruption`: from the block after the invalid chunk's, through
    /// each block's valid chunks of this log, for a synced offset past it.
    fn read_ahead(&self, invalid_offset: u64, invalid_at: usize) -> PebbleEnd {
        let mut block = invalid_at / BLOCK + 1;
        let b = self.log;
        while block * BLOCK < b.len() {
            let n = ((block + 1) * BLOCK).min(b.len());
            let mut at = block * BLOCK;
            while at + 7 <= n {
                let checksum = u32_at(b, at);
                let length = u16::from_le_bytes([b[at + 4], b[at + 5]]) as usize;
                let encoding = b[at + 6];
                if encoding > 12 || encoding == 0 {
                    break;
                }
                let header = match encoding {
                    1..=4 => 7,
                    5..=8 => 11,
                    _ => 19,
                };
                if header > 7 && (at + header > n || u32_at(b, at + 7) != self.log_number) {
                    break;
                }
                let end = at + header + length;
                if end > n || checksum != masked_crc(&b[at + 6..end]) {
                    break;
                }
                if header == 19 {
                    let synced = u64::from_le_bytes(b[at + 11..at + 19].try_into().unwrap());
                    if synced > invalid_offset {
                        return PebbleEnd::Corrupt { invalid_offset };
                    }
                }
                at = end;
            }
            block += 1;
        }
        PebbleEnd::UnexpectedEof
    }
}

/// Reads `log` as Pebble's `record.Reader` does for WAL `log_number`.
pub fn reference_read_pebble(log: &[u8], log_number: u64) -> PebbleRead {
    let mut reader = Reader {
        log,
        pos: 0,
        log_number: log_number as u32,
    };
    let mut records = Vec::new();
    loop {
        let start = reader.pos;
        let (mut record, mut last) = match reader.next_chunk(true) {
            Chunk::Eof => {
                return PebbleRead {
                    records,
                    end: PebbleEnd::Eof,
                }
            }
            Chunk::Invalid(offset) => {
                let end = reader.read_ahead(offset, reader.pos.max(start));
                return PebbleRead { records, end };
            }
            Chunk::Valid { payload, last, .. } => (log[payload.0..payload.1].to_vec(), last),
        };
        while !last {
            match reader.next_chunk(false) {
                Chunk::Valid {
                    payload, last: l, ..
                } => {
                    record.extend_from_slice(&log[payload.0..payload.1]);
                    last = l;
                }
                Chunk::Eof => unreachable!("want_first is false"),
                Chunk::Invalid(u64::MAX) => {
                    return PebbleRead {
                        records,
                        end: PebbleEnd::UnexpectedEof,
                    }
                }
                Chunk::Invalid(offset) => {
                    let end = reader.read_ahead(offset, reader.pos);
                    return PebbleRead { records, end };
                }
            }
        }
        records.push(record);
    }
}
