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

use std::io::Write;
use std::path::Path;

use walcodec::physical::Chunk;
use walcodec::{RecordType, BLOCK_SIZE, HEADER_SIZE};

use crate::common::{finish, input_notes, stdout, Failure, Limits, Status};
use crate::input::Input;
use crate::scan::{walk, Visitor};

/// The name of a fragment type, as in `chunks.txt`.
pub(crate) fn type_name(type_byte: u8) -> &'static str {
    match RecordType::from_u8(type_byte) {
        Some(RecordType::Zero) => "ZERO",
        Some(RecordType::Full) => "FULL",
        Some(RecordType::First) => "FIRST",
        Some(RecordType::Middle) => "MIDDLE",
        Some(RecordType::Last) => "LAST",
        None => "UNKNOWN",
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
                header.record_type(),
                Some(RecordType::Full | RecordType::First | RecordType::Middle | RecordType::Last)
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

struct Printer<W> {
    out: W,
    status: Status,
}

impl<W: Write> Visitor for Printer<W> {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), Failure> {
        self.status = self.status.max(judge(chunk));
        render(chunk, &mut self.out)?;
        Ok(())
    }
}

/// Prints the physical layout of `path` from the block holding `start`. How the read
/// ended, when worth saying, goes to stderr: stdout keeps the `chunks.txt` format.
pub(crate) fn dump(path: &Path, start: u64, limits: Limits) -> Result<Status, Failure> {
    let mut input = Input::open(path, limits)?;
    let mut printer = Printer {
        out: stdout(),
        status: Status::Clean,
    };
    let (file_len, input_end) = walk(&mut input, start, limits, &mut printer)?;
    writeln!(printer.out, "size {file_len}")?;
    finish(printer.out)?;
    for note in input_notes(&input_end) {
        eprintln!("walcodec: {}: {note}", input.name());
    }
    Ok(printer.status)
}
