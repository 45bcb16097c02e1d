//! `cat FILE`: the record payloads on stdout, for other programs.
//!
//! | `--to`  | output                                                         |
//! |---------|----------------------------------------------------------------|
//! | `raw`   | the payloads back to back                                      |
//! | `lines` | each payload and `\n` (a payload holding `\n` is an error)      |
//! | `hex`   | each payload as a line of lowercase hex (an empty line for an empty record) |
//! | `recordio` | Mesos RecordIO: each payload as `LENGTH\n` then its bytes, for a Mesos-style consumer |
//!
//! `write --from lines|hex|recordio` reads them back into a log.
//!
//! `--record N` writes only the payload of record N (the first is 0), raw, streamed
//! a fragment at a time: a record of any size, beyond `--max-record-bytes` too.
//! `write --stream` reads such a payload back into a log.

use std::io::Write;
use std::path::PathBuf;

use tokio::io::AsyncBufReadExt;

use bytes::BytesMut;
use clap::ValueEnum;
use tokio_util::codec::Encoder;
use walcodec::RecordIoCodec;

use crate::common::{
    finish, finish_reader, hex_into, open_reader, read_status, stdout, Failure, Limits,
    RecoveryArg, Status,
};
use crate::dialect::DialectArgs;
use crate::input::input_name;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file; `-` reads stdin.
    file: PathBuf,
    /// How the payloads are framed on stdout.
    #[arg(long, value_enum, default_value_t = To::Raw)]
    to: To,
    /// Start with the first record whose first fragment is at or after this offset.
    #[arg(long, value_name = "OFFSET", default_value_t = 0)]
    start: u64,
    /// What to do with damage [default: skip-corrupted; for a RocksDB WAL
    /// tolerate-tail, as `ldb dump_wal`: a recycled WAL ends at its first old bytes].
    #[arg(long, value_enum, value_name = "MODE")]
    recovery: Option<RecoveryArg>,
    /// Only record N (counted from 0, from --start), raw and streamed: of any size.
    #[arg(long, value_name = "N", conflicts_with = "to")]
    record: Option<u64>,
    #[command(flatten)]
    dialect: DialectArgs,
}

/// How `cat --to` frames payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum To {
    /// The payloads back to back, nothing between them.
    Raw,
    /// One payload a line; a payload that holds a newline is refused.
    Lines,
    /// One payload a line, in lowercase hex.
    Hex,
    /// Mesos RecordIO: `LENGTH\n` and the payload, for each record.
    Recordio,
}

/// Writes payloads framed as `--to` says, one a call (for a file and a directory).
pub(crate) struct PayloadWriter {
    to: To,
    line: Vec<u8>,
    framed: BytesMut,
    recordio: RecordIoCodec,
}

impl PayloadWriter {
    pub(crate) fn new(to: To) -> PayloadWriter {
        PayloadWriter {
            to,
            line: Vec::new(),
            framed: BytesMut::new(),
            recordio: RecordIoCodec::new(),
        }
    }

    /// Writes one payload; `Ok(false)`, with nothing written, for a payload that
    /// holds a newline in `--to lines`.
    pub(crate) fn write(&mut self, out: &mut impl Write, data: &[u8]) -> Result<bool, Failure> {
        match self.to {
            To::Raw => out.write_all(data)?,
            To::Lines => {
                if data.contains(&b'\n') {
                    return Ok(false);
                }
                out.write_all(data)?;
                out.write_all(b"\n")?;
            }
            To::Hex => {
                self.line.clear();
                hex_into(data, &mut self.line);
                self.line.push(b'\n');
                out.write_all(&self.line)?;
            }
            To::Recordio => {
                self.framed.clear();
                self.recordio
                    .encode(data, &mut self.framed)
                    .map_err(|e| Failure::new(format!("recordio: {e}")))?;
                out.write_all(&self.framed)?;
            }
        }
        Ok(true)
    }
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    if let Some(n) = args.record {
        return stream_record(&args, n, limits).await;
    }
    let (mut reader, _) =
        open_reader(&args.file, &args.dialect, args.recovery, args.start, limits)?;
    let mut out = stdout();
    let mut payloads = PayloadWriter::new(args.to);
    let mut error = None;
    while let Some(record) = reader.next_record().await {
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                error = Some(e);
                continue;
            }
        };
        if !payloads.write(&mut out, &record.data)? {
            finish(out)?;
            return Err(Failure::new(format!(
                "{}: the record at offset {} holds a newline: use --to hex",
                input_name(&args.file),
                record.position.start
            )));
        }
    }
    finish(out)?;
    let (name, decoder) = finish_reader(reader);
    read_status(&name, &decoder, error)
}

/// `--record N`: streams record `n` to stdout; the records before it are passed
/// over a fragment at a time, never assembled.
async fn stream_record(args: &Args, n: u64, limits: Limits) -> Result<Status, Failure> {
    let (mut reader, _) =
        open_reader(&args.file, &args.dialect, args.recovery, args.start, limits)?;
    let mut out = stdout();
    let mut seen = 0u64;
    let mut error = None;
    let mut broken = None;
    let mut found = false;
    while let Some(record) = reader.next_record_reader().await {
        let mut record = match record {
            Ok(record) => record,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        if seen < n {
            // Dropped unread: the rest of it is skipped.
            seen += 1;
            continue;
        }
        found = true;
        loop {
            let chunk = match record.fill_buf().await {
                Ok(chunk) => chunk,
                Err(e) => {
                    broken = Some((record.start(), e));
                    break;
                }
            };
            if chunk.is_empty() {
                break;
            }
            out.write_all(chunk)?;
            let len = chunk.len();
            std::pin::Pin::new(&mut record).consume(len);
        }
        break;
    }
    finish(out)?;
    let (name, decoder) = finish_reader(reader);
    if let Some((start, e)) = broken {
        // The bytes written belong to a record that did not complete.
        eprintln!(
            "walcodec: {name}: record {n} (offset {start}) is incomplete; what was written of it is not the record: {e}"
        );
        return Ok(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Status::TornTail
        } else {
            Status::Corrupt
        });
    }
    if !found && error.is_none() {
        return Err(Failure::new(format!(
            "{name}: no record {n}: the log holds {seen} record(s) from offset {}",
            args.start
        )));
    }
    read_status(&name, &decoder, error)
}
