//! The counting side of the Pebble decode goal (`benches/pebble.rs`): what a
//! WAL-sync log costs against a legacy one of the same records, counted rather
//! than timed, so that it holds on a loaded machine.
//!
//! ```text
//! cargo run --release -p walcodec-benches --bin pebble_decode_count -- SIZE legacy|wal_sync
//! scripts/pebble-decode-count.sh   # every size, both formats, under callgrind
//! ```
//!
//! Prints the log's bytes and fragments per record on stderr (the format's own
//! cost), then decodes the log once: run under `valgrind --tool=callgrind
//! --toggle-collect='*decode_eof*'`, the instructions counted are the decoder's.

use bytes::BytesMut;
use tokio_util::codec::Decoder;
use walcodec::fragment::{FragmentRules, Parsed};
use walcodec::{Dialect, LogDecoder, LogEncoder, BLOCK_SIZE};

#[path = "../common/mod.rs"]
mod common;

const LOG_NUMBER: u64 = 42;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(size), Some(format)) = (
        args.get(1).and_then(|size| size.parse::<usize>().ok()),
        args.get(2),
    ) else {
        eprintln!("usage: pebble_decode_count SIZE legacy|wal_sync");
        std::process::exit(2);
    };
    let wal_sync = format == "wal_sync";
    let records = common::records(size);
    // As benches/pebble.rs encodes them: each fragment promising the end of the
    // record before it.
    let mut encoder = if wal_sync {
        LogEncoder::builder().pebble(LOG_NUMBER).build()
    } else {
        LogEncoder::new()
    };
    let mut log = BytesMut::new();
    for record in &records {
        encoder.set_synced_offset(encoder.offset());
        encoder.encode_record(record, &mut log);
    }
    let dialect = if wal_sync {
        Dialect::Pebble
    } else {
        Dialect::LevelDb
    };
    let fragments = count_fragments(&log, dialect);
    let n = records.len() as f64;
    eprintln!(
        "{format} {size}: {} records, {:.1} bytes and {:.3} fragments a record",
        records.len(),
        log.len() as f64 / n,
        fragments as f64 / n
    );
    let mut builder = LogDecoder::builder();
    builder.dialect(dialect).log_number(LOG_NUMBER);
    let mut decoder = builder.build();
    let mut decoded = 0;
    while let Some(record) = decoder.decode_eof(&mut log).expect("a clean log") {
        decoded += record.len();
    }
    assert_eq!(decoded, records.iter().map(Vec::len).sum::<usize>());
}

/// The fragments of `log`, walked with the fragment layer's own rules.
fn count_fragments(log: &[u8], dialect: Dialect) -> usize {
    let rules = FragmentRules::new(dialect).log_number(LOG_NUMBER);
    let (mut at, mut fragments) = (0, 0);
    while at < log.len() {
        match rules.parse(&log[at..], BLOCK_SIZE - at % BLOCK_SIZE) {
            Parsed::Fragment(fragment) => {
                fragments += 1;
                at += fragment.len();
            }
            Parsed::Trailer { len } | Parsed::ZeroFill { len } => at += len,
            _ => break,
        }
    }
    fragments
}
