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

use std::io::Write;
use std::path::PathBuf;

use bytes::BytesMut;
use clap::ValueEnum;
use tokio_util::codec::Encoder;
use walcodec::RecordIoCodec;

use crate::common::{
    finish, finish_reader, hex_into, open_reader, read_status, stdout, Failure, Limits,
    RecoveryArg, Status,
};
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
    /// What to do with damage.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RecoveryArg::SkipCorrupted)]
    recovery: RecoveryArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum To {
    /// The payloads back to back, nothing between them.
    Raw,
    /// One payload a line; a payload that holds a newline is refused.
    Lines,
    /// One payload a line, in lowercase hex.
    Hex,
    /// Mesos RecordIO: `LENGTH\n` and the payload, for each record.
    Recordio,
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let mut reader = open_reader(&args.file, args.recovery, args.start, limits)?;
    let mut out = stdout();
    let mut line = Vec::new();
    let mut framed = BytesMut::new();
    let mut recordio = RecordIoCodec::new();
    let mut error = None;
    while let Some(record) = reader.next_record().await {
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                error = Some(e);
                continue;
            }
        };
        match args.to {
            To::Raw => out.write_all(&record.data)?,
            To::Lines => {
                if record.data.contains(&b'\n') {
                    finish(out)?;
                    return Err(Failure::new(format!(
                        "{}: the record at offset {} holds a newline: use --to hex",
                        input_name(&args.file),
                        record.position.start
                    )));
                }
                out.write_all(&record.data)?;
                out.write_all(b"\n")?;
            }
            To::Hex => {
                line.clear();
                hex_into(&record.data, &mut line);
                line.push(b'\n');
                out.write_all(&line)?;
            }
            To::Recordio => {
                framed.clear();
                recordio
                    .encode(&record.data[..], &mut framed)
                    .map_err(|e| Failure::new(format!("recordio: {e}")))?;
                out.write_all(&framed)?;
            }
        }
    }
    finish(out)?;
    let (name, decoder) = finish_reader(reader);
    read_status(&name, &decoder, error)
}
