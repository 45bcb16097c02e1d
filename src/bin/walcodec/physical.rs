//! `dump --physical`: one line per fragment, trailer and damaged piece, in the format
//! of the shared vectors' `chunks.txt`:
//!
//! ```text
//! OFFSET blk=BLOCK/OFFSET_IN_BLOCK type=T(NAME) len=L crc=ok|BAD
//! pad OFFSET N                   N trailer bytes at a block's end (" nonzero" if not zeros)
//! zero OFFSET N                  preallocated space skipped to the block's end (" nonzero" if it hides data)
//! OFFSET blk=... len=L bad-length   a length running past the block; "skip" follows
//! skip OFFSET N                  the rest of a block a reader drops after damage
//! torn OFFSET N [type=.. len=..] a fragment cut by the end of the file
//! size N                         the file's length, last
//! ```
//!
//! Read as a RocksDB WAL (`--dialect`), the lines say more; the first is
//! `dialect rocksdb log=N (SOURCE)`, and every fragment line ends with its header size:
//!
//! ```text
//! OFFSET blk=B/O type=5(R-FULL) len=L crc=ok log=N hdr=11      a recyclable fragment and its log number
//! ... type=2(FIRST) len=L crc=ok hdr=7 chunk-end    a FIRST or MIDDLE ending inside its block: the
//!                                                   writer's compressed output chunk ends there
//! ... type=9(SETCOMPRESSION) len=4 crc=ok hdr=7 compression=zstd(7)
//! ... type=10(UDT-SIZE) ... ts-sizes=cf0:8,cf2:16   (11: R-UDT-SIZE)
//! ... type=130(PREDECESSOR-WAL) ... predecessor=log:7,size:4096,last-seq:99   (131: R-PREDECESSOR-WAL)
//! ... malformed(REASON)            a metadata record whose payload does not parse
//! ... ignorable                    an unknown type with bit 7 set: skipped silently
//! end OFFSET log N ends here: old log M follows       before the first fragment of another log
//! ... log=M hdr=11 old             a fragment of an older log (left by the file's earlier use)
//! end OFFSET recycled log N ends here: REASON         a bad checksum or length in a recycled
//!                                  log: old bytes, where RocksDB's tolerate-tail reader stops
//! pad OFFSET N                     trailers of 7 to 10 bytes too (a recyclable writer's)
//! ```
//!
//! After an `end` line the pieces are what the file holds, not the log: they do not
//! change the exit status.

use std::io::{self, Write};
use std::path::Path;

use walcodec::fragment::{Fragment, FragmentHeader, FragmentType, Part};
use walcodec::inspect::{InspectError, LayoutWalk};
use walcodec::physical::{Chunk, Metadata, Piece, Pieces};
use walcodec::{ChunkReader, Dialect, BLOCK_SIZE, HEADER_SIZE};

use crate::common::READ_SIZE;
use crate::common::{finish, input_notes, stdout, Failure, Limits, Status};
use crate::dialect::{DialectArgs, LogChoice};
use crate::input::{Input, InputEnd};
use crate::scan::JobsArgs;
use crate::wal::compression_name;

/// The name of a fragment type, as in `chunks.txt`.
pub(crate) fn type_name(type_byte: u8) -> &'static str {
    match FragmentType::from_u8(type_byte, Dialect::LevelDb) {
        Some(FragmentType::Zero) => "ZERO",
        Some(FragmentType::Full) => "FULL",
        Some(FragmentType::First) => "FIRST",
        Some(FragmentType::Middle) => "MIDDLE",
        Some(FragmentType::Last) => "LAST",
        _ => "UNKNOWN",
    }
}

fn location(offset: u64) -> String {
    let block = BLOCK_SIZE as u64;
    format!("{offset} blk={}/{}", offset / block, offset % block)
}

fn nonzero(bytes: &[u8]) -> &'static str {
    if bytes.iter().any(|&b| b != 0) {
        " nonzero"
    } else {
        ""
    }
}

/// Writes the line(s) for `chunk`.
pub(crate) fn render(chunk: &Chunk<'_>, out: &mut impl Write) -> std::io::Result<()> {
    match *chunk {
        Chunk::Fragment {
            offset,
            header,
            checksum_ok,
            ..
        } => writeln!(
            out,
            "{} type={}({}) len={} crc={}",
            location(offset),
            header.type_byte,
            type_name(header.type_byte),
            header.length,
            if checksum_ok { "ok" } else { "BAD" }
        ),
        Chunk::Trailer { offset, bytes } => {
            writeln!(out, "pad {offset} {}{}", bytes.len(), nonzero(bytes))
        }
        Chunk::ZeroFill { offset, bytes } => {
            writeln!(out, "zero {offset} {}{}", bytes.len(), nonzero(bytes))
        }
        Chunk::BadLength {
            offset,
            header,
            bytes,
        } => {
            writeln!(
                out,
                "{} type={}({}) len={} bad-length",
                location(offset),
                header.type_byte,
                type_name(header.type_byte),
                header.length
            )?;
            if bytes.len() > HEADER_SIZE {
                writeln!(
                    out,
                    "skip {} {}",
                    offset + HEADER_SIZE as u64,
                    bytes.len() - HEADER_SIZE
                )?;
            }
            Ok(())
        }
        Chunk::Skipped { offset, bytes } => writeln!(out, "skip {offset} {}", bytes.len()),
        Chunk::Torn {
            offset,
            header,
            bytes,
        } => match header {
            Some(header) => writeln!(
                out,
                "torn {offset} {} type={}({}) len={}",
                bytes.len(),
                header.type_byte,
                type_name(header.type_byte),
                header.length
            ),
            None => writeln!(out, "torn {offset} {}", bytes.len()),
        },
    }
}

/// What the physical layer alone says about a chunk: damage, a torn end, or fine.
/// (Damage only the record layer sees, like a LAST without a FIRST, needs `verify`.)
pub(crate) fn judge(chunk: &Chunk<'_>) -> Status {
    match *chunk {
        Chunk::Fragment {
            header,
            checksum_ok,
            ..
        } => {
            let known = matches!(
                FragmentType::from_u8(header.type_byte, Dialect::LevelDb),
                Some(
                    FragmentType::Full
                        | FragmentType::First
                        | FragmentType::Middle
                        | FragmentType::Last
                )
            );
            if checksum_ok && known {
                Status::Clean
            } else {
                Status::Corrupt
            }
        }
        Chunk::Trailer { .. } => Status::Clean,
        Chunk::ZeroFill { bytes, .. } => {
            if bytes.iter().all(|&b| b == 0) {
                Status::Clean
            } else {
                Status::Corrupt
            }
        }
        Chunk::BadLength { .. } | Chunk::Skipped { .. } => Status::Corrupt,
        Chunk::Torn { .. } => Status::TornTail,
    }
}

/// The name of a type byte in RocksDB's dialect.
fn rocksdb_type_name(type_byte: u8) -> &'static str {
    match FragmentType::from_u8(type_byte, Dialect::RocksDb) {
        Some(FragmentType::Zero) => "ZERO",
        Some(FragmentType::Full) => "FULL",
        Some(FragmentType::First) => "FIRST",
        Some(FragmentType::Middle) => "MIDDLE",
        Some(FragmentType::Last) => "LAST",
        Some(FragmentType::RecyclableFull) => "R-FULL",
        Some(FragmentType::RecyclableFirst) => "R-FIRST",
        Some(FragmentType::RecyclableMiddle) => "R-MIDDLE",
        Some(FragmentType::RecyclableLast) => "R-LAST",
        Some(FragmentType::SetCompressionType) => "SETCOMPRESSION",
        Some(FragmentType::UserDefinedTimestampSize) => "UDT-SIZE",
        Some(FragmentType::RecyclableUserDefinedTimestampSize) => "R-UDT-SIZE",
        Some(FragmentType::PredecessorWalInfo) => "PREDECESSOR-WAL",
        Some(FragmentType::RecyclablePredecessorWalInfo) => "R-PREDECESSOR-WAL",
        _ => "UNKNOWN",
    }
}

/// `type=T(NAME) len=L` of a header, in RocksDB's dialect (Pebble's WAL-sync
/// types for a header carrying a synced offset).
fn rocksdb_type(header: &FragmentHeader) -> String {
    let name = match (header.synced_offset, header.type_byte) {
        (Some(_), 9) => "W-FULL",
        (Some(_), 10) => "W-FIRST",
        (Some(_), 11) => "W-MIDDLE",
        (Some(_), 12) => "W-LAST",
        _ => rocksdb_type_name(header.type_byte),
    };
    format!("type={}({name}) len={}", header.type_byte, header.length)
}

/// ` log=N hdr=H` of a header.
fn header_fields(header: &FragmentHeader) -> String {
    let log = match header.log_number {
        Some(n) => format!(" log={n}"),
        None => String::new(),
    };
    let synced = match header.synced_offset {
        Some(offset) => format!(" synced={offset}"),
        None => String::new(),
    };
    format!("{log}{synced} hdr={}", header.len())
}

/// The line of a complete fragment, in RocksDB's dialect, without its newline.
fn fragment_line(offset: u64, fragment: &Fragment, checksum_ok: bool) -> String {
    let header = fragment.header();
    format!(
        "{} {} crc={}{}",
        location(offset),
        rocksdb_type(&header),
        if checksum_ok { "ok" } else { "BAD" },
        header_fields(&header)
    )
}

/// The parsed payload of a metadata record, as ` name=value`.
fn metadata_fields(record: &Result<Metadata<'_>, walcodec::metadata::MetadataError>) -> String {
    match record {
        Ok(Metadata::Compression(compression)) => format!(
            " compression={}({})",
            compression_name(*compression),
            compression.as_u32()
        ),
        Ok(Metadata::TimestampSizes(sizes)) => {
            let entries: Vec<String> = sizes
                .iter()
                .map(|s| format!("cf{}:{}", s.column_family, s.timestamp_size))
                .collect();
            format!(" ts-sizes={}", entries.join(","))
        }
        Ok(Metadata::PredecessorWal(info)) => format!(
            " predecessor=log:{},size:{},last-seq:{}",
            info.log_number, info.size_bytes, info.last_sequence
        ),
        Ok(_) => " malformed(unknown metadata)".to_string(),
        Err(error) => format!(" malformed({error})"),
    }
}

/// Prints the layout in RocksDB's dialect, and judges it as RocksDB's reader would.
struct RocksPrinter {
    log_number: u64,
    /// A recyclable fragment was seen: the file is recycled, and its first bad
    /// checksum or length is where its log ends.
    recycled: bool,
    /// Where the log ended (an `end` line was printed): what follows is not judged.
    ended: bool,
    /// Pebble's dialect: the end of a recycled log is only where no later synced
    /// offset proves damage, which `verify` decides; the layout says so.
    pebble: bool,
}

impl RocksPrinter {
    fn end_line(&mut self, out: &mut impl Write, offset: u64, why: &str) -> std::io::Result<()> {
        self.ended = true;
        writeln!(out, "end {offset} {why}")
    }

    /// Writes the line(s) of `piece`; returns its status.
    fn piece(&mut self, piece: &Piece<'_>, out: &mut impl Write) -> std::io::Result<Status> {
        let log = self.log_number;
        let damaged_recycled = |printer: &mut RocksPrinter, out: &mut dyn Write, why: &str| {
            if printer.recycled && !printer.ended {
                printer.ended = true;
                let reader = if printer.pebble {
                    "where Pebble's reader stops unless a later synced offset proves it damaged: `walcodec verify` says which"
                } else {
                    "old bytes of the reused file, where RocksDB's tolerate-tail reader stops"
                };
                writeln!(
                    out,
                    "end {} recycled log {log} ends here: {why} ({reader})",
                    piece.offset()
                )?;
                return Ok(true);
            }
            Ok::<_, std::io::Error>(false)
        };
        let status = match *piece {
            Piece::Fragment {
                offset,
                fragment,
                checksum_ok,
                ..
            } => {
                if fragment.header_len() > HEADER_SIZE {
                    self.recycled = true;
                }
                let ended = !checksum_ok && damaged_recycled(self, out, "checksum mismatch")?;
                let mut line = fragment_line(offset, &fragment, checksum_ok);
                if fragment.is_ignorable() {
                    line.push_str(" ignorable");
                }
                let ends_in_block = (offset + fragment.len() as u64) % BLOCK_SIZE as u64 != 0;
                if matches!(fragment.part(), Some(Part::First | Part::Middle)) && ends_in_block {
                    line.push_str(" chunk-end");
                }
                writeln!(out, "{line}")?;
                let usable = checksum_ok && (fragment.part().is_some() || fragment.is_ignorable());
                if ended || usable {
                    Status::Clean
                } else {
                    Status::Corrupt
                }
            }
            Piece::Metadata {
                offset,
                fragment,
                record,
                ..
            } => {
                writeln!(
                    out,
                    "{}{}",
                    fragment_line(offset, &fragment, true),
                    metadata_fields(&record)
                )?;
                if record.is_ok() {
                    Status::Clean
                } else {
                    Status::Corrupt
                }
            }
            Piece::Old {
                offset,
                fragment,
                checksum_ok,
                ..
            } => {
                if !self.ended {
                    let old = fragment.log_number().unwrap_or_default();
                    // Pebble's EOF trailer carries the next log's number.
                    let why = if u64::from(old) == (log + 1) & 0xffff_ffff
                        && fragment.fragment_type() == Some(FragmentType::RecyclableFull)
                        && fragment.header().checksum == 0
                        && fragment.header().length == 0
                    {
                        format!("log {log} ends here: its EOF trailer (a clean close)")
                    } else {
                        format!("log {log} ends here: old log {old} follows")
                    };
                    self.end_line(out, offset, &why)?;
                }
                writeln!(out, "{} old", fragment_line(offset, &fragment, checksum_ok))?;
                Status::Clean
            }
            Piece::Trailer { offset, bytes } => {
                writeln!(out, "pad {offset} {}{}", bytes.len(), nonzero(bytes))?;
                Status::Clean
            }
            Piece::ZeroFill { offset, bytes } => {
                writeln!(out, "zero {offset} {}{}", bytes.len(), nonzero(bytes))?;
                if bytes.iter().all(|&b| b == 0) {
                    Status::Clean
                } else {
                    Status::Corrupt
                }
            }
            Piece::BadLength {
                offset,
                header,
                bytes,
            } => {
                let ended = damaged_recycled(self, out, "bad record length")?;
                writeln!(
                    out,
                    "{} {} bad-length{}",
                    location(offset),
                    rocksdb_type(&header),
                    header_fields(&header)
                )?;
                let header_len = header.len().min(bytes.len());
                if bytes.len() > header_len {
                    writeln!(
                        out,
                        "skip {} {}",
                        offset + header_len as u64,
                        bytes.len() - header_len
                    )?;
                }
                if ended {
                    Status::Clean
                } else {
                    Status::Corrupt
                }
            }
            Piece::Skipped { offset, bytes } => {
                writeln!(out, "skip {offset} {}", bytes.len())?;
                Status::Corrupt
            }
            Piece::Torn {
                offset,
                header,
                bytes,
            } => {
                match header {
                    Some(header) => writeln!(
                        out,
                        "torn {offset} {} {}{}",
                        bytes.len(),
                        rocksdb_type(&header),
                        header_fields(&header)
                    )?,
                    None => writeln!(out, "torn {offset} {}", bytes.len())?,
                }
                Status::TornTail
            }
            _ => Status::Clean,
        };
        // After the log's end, the file's bytes are not the log's.
        Ok(if self.ended { Status::Clean } else { status })
    }
}

struct Printer<W> {
    out: W,
    status: Status,
    /// Set for a log read in RocksDB's dialect.
    rocks: Option<RocksPrinter>,
}

impl<W: Write> Printer<W> {
    /// Prints and judges a piece read by LevelDB's rules: every piece is a chunk.
    fn leveldb_piece(&mut self, piece: &Piece<'_>) -> io::Result<()> {
        if let Some(chunk) = leveldb_chunk(piece) {
            self.status = self.status.max(judge(&chunk));
            render(&chunk, &mut self.out)?;
        }
        Ok(())
    }
}

impl<W: Write> Visitor for Printer<W> {
    fn piece(&mut self, piece: &Piece<'_>) -> Result<(), Failure> {
        match &mut self.rocks {
            Some(rocks) => {
                let status = rocks.piece(piece, &mut self.out)?;
                self.status = self.status.max(status);
                Ok(())
            }
            None => Ok(self.leveldb_piece(piece)?),
        }
    }
}

/// Prints the physical layout of `path` from the block holding `start`. How the read
/// ended, when worth saying, goes to stderr: stdout keeps the `chunks.txt` format.
///
/// In LevelDB's dialect each block's layout depends on that block alone (and the
/// file's end), so a file is walked in ranges of whole blocks on `--jobs` threads
/// and printed in order: the same lines as one walk. RocksDB's dialect carries what
/// came before (an old log number ends the log), so it is walked by one.
pub(crate) fn dump(
    path: &Path,
    dialect: &DialectArgs,
    start: u64,
    jobs: &JobsArgs,
    limits: Limits,
) -> Result<Status, Failure> {
    let mut input = Input::open(path, limits)?;
    let log = LogChoice::resolve(&mut input, path, dialect)?;
    let mut printer = Printer {
        out: stdout(),
        status: Status::Clean,
        rocks: None,
    };
    if log.dialect != Dialect::LevelDb {
        writeln!(
            printer.out,
            "dialect {} log={} ({})",
            log.dialect_name(),
            log.log_number,
            log.number_source
        )?;
        printer.rocks = Some(RocksPrinter {
            log_number: log.log_number,
            recycled: false,
            ended: false,
            pebble: log.dialect == Dialect::Pebble,
        });
    }
    let from = walcodec::block_start(start);
    let split = input
        .split_source()
        .filter(|_| log.dialect == Dialect::LevelDb && jobs.jobs() > 1);
    let (file_len, input_end) = match split {
        Some((file, end)) => {
            let mut walk = LayoutWalk::new(log.rules());
            walk.jobs(jobs.jobs()).range_bytes(jobs.split_bytes());
            if let Some(bar) = input.progress_bar() {
                walk.progress(move |bytes| bar.inc(bytes));
            }
            let out = &mut printer;
            walk.read_file(
                &file,
                from,
                end,
                |pieces| {
                    let mut lines = Printer {
                        out: Vec::new(),
                        status: Status::Clean,
                        rocks: None,
                    };
                    for piece in pieces {
                        // Writes to memory, which do not fail.
                        let _ = lines.leveldb_piece(&piece);
                    }
                    (lines.out, lines.status)
                },
                |(lines, status): (Vec<u8>, Status)| {
                    out.status = out.status.max(status);
                    out.out.write_all(&lines)
                },
            )
            .map_err(|e| match e {
                InspectError::Io(e) => input.failure(e),
                // The consumer only writes to stdout: a closed pipe ends quietly.
                InspectError::Consumer(e) => Failure::from(e),
                other => Failure::new(format!("{}: {other}", input.name())),
            })?;
            input.set_read_to(end.max(from));
            (end.max(from), input.finish())
        }
        None => walk(&mut input, start, &log, &mut printer)?,
    };
    writeln!(printer.out, "size {file_len}")?;
    finish(printer.out)?;
    for note in input_notes(&input_end) {
        eprintln!("walcodec: {}: {note}", input.name());
    }
    Ok(printer.status)
}

/// The LevelDB view of a piece: the chunk `physical::Chunks` yields for it. `None`
/// for what only RocksDB's dialect has: a fragment with an 11-byte header, an old
/// fragment. (A metadata record with a 7-byte header is a fragment of a type LevelDB
/// does not know; a 7-to-10-byte trailer a trailer.)
fn leveldb_chunk<'a>(piece: &Piece<'a>) -> Option<Chunk<'a>> {
    (!piece.is_rocksdb_only()).then(|| piece.to_chunk())
}

/// What `dump --physical` does with each piece of the layout.
trait Visitor {
    /// Each piece of the layout, in the log's dialect.
    fn piece(&mut self, piece: &Piece<'_>) -> Result<(), Failure>;
}

/// Walks the layout of `input` in `log`'s dialect from the block holding `start` to
/// where its read ends, on this thread: a stream, a log in RocksDB's or Pebble's
/// dialect (whose layout depends on what came before), or `--jobs 1`. Memory stays
/// bounded by the read size.
fn walk(
    input: &mut Input,
    start: u64,
    log: &LogChoice,
    visitor: &mut dyn Visitor,
) -> Result<(u64, InputEnd), Failure> {
    let mut offset = walcodec::block_start(start);
    input.skip_to(offset)?;
    let rules = log.rules();
    let name = input.name().to_string();
    for chunk in ChunkReader::new(&mut *input, READ_SIZE) {
        let chunk = chunk.map_err(|e| Failure::named(&name, e))?;
        // Whole blocks (READ_SIZE is a multiple of the block size) or the file's end,
        // so the walker never sees a block cut by the chunk.
        for piece in Pieces::new(&chunk, offset, rules) {
            visitor.piece(&piece)?;
        }
        offset += chunk.len() as u64;
    }
    Ok((offset, input.finish()))
}
