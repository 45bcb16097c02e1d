//! Feeding a log to `LogDecoder` in pieces: the part the decoder fuzz targets share.
//! Each target only says how large the next piece is.

use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use walcodec::{LogDecoder, LogDecoderBuilder, LogInput, Recovery, BLOCK_SIZE};

pub const MAX_RECORD: usize = 80_000;

/// Everything one read of a log produced.
#[derive(Debug, PartialEq)]
pub struct Run {
    pub records: Vec<Bytes>,
    pub reports: Vec<String>,
    pub error: Option<String>,
    pub valid_prefix: u64,
    pub torn: bool,
}

/// Decodes `log` in pieces, `piece(at)` bytes from offset `at` at a time, checking on
/// the way that no record exceeds `MAX_RECORD` and that a decoder waiting for input
/// holds less than a block.
#[allow(dead_code)] // Not every target configures more than the mode.
pub fn run(log: &[u8], recovery: Recovery, piece: impl FnMut(usize) -> usize) -> Run {
    run_with(log, LogDecoder::builder().recovery(recovery), piece)
}

/// [`run`] with a decoder configured by `builder` (its limit and reporter are set
/// here).
pub fn run_with(
    log: &[u8],
    builder: &mut LogDecoderBuilder,
    mut piece: impl FnMut(usize) -> usize,
) -> Run {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    // The log is a file's bytes: a record its end cuts is a torn tail.
    let mut decoder = builder
        .input(LogInput::File)
        .max_record_bytes(MAX_RECORD)
        .on_corruption(move |c| sink.lock().unwrap().push(c.to_string()))
        .build();
    let mut buffer = BytesMut::new();
    let mut records = Vec::new();
    let mut error = None;
    let mut at = 0;
    'feed: while at < log.len() {
        let end = (at + piece(at).max(1)).min(log.len());
        buffer.extend_from_slice(&log[at..end]);
        at = end;
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(record)) => {
                    assert!(record.len() <= MAX_RECORD);
                    records.push(record);
                }
                Ok(None) => {
                    assert!(buffer.len() < BLOCK_SIZE, "holds {} bytes", buffer.len());
                    break;
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break 'feed;
                }
            }
        }
    }
    if error.is_none() {
        loop {
            match decoder.decode_eof(&mut buffer) {
                Ok(Some(record)) => {
                    assert!(record.len() <= MAX_RECORD);
                    records.push(record);
                }
                Ok(None) => break,
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
    }
    let reports = reports.lock().unwrap().clone();
    Run {
        records,
        reports,
        error,
        valid_prefix: decoder.valid_prefix_len(),
        torn: decoder.has_incomplete_tail(),
    }
}
