//! What a follower of a live log needs from the decoder: where the log's written
//! part surely ends, whether the decoder has gone past it, and a way back.
//!
//! A log written in place (preallocated with zeros, or a recycled file holding an
//! earlier log) has bytes past its last record that the writer has not reached:
//! zeros, fragments of another log number, a write still in progress. Read at EOF
//! they are the log's end; read live they are "not yet". A follower that met them
//! goes back to the end of the last record (or metadata record) it read and reads
//! again from there once the writer has had time to write: nothing it decoded past
//! that point was returned, so nothing returned is ever read twice, and bytes from
//! before and after the writer filled the space are never joined.
//!
//! | what the decoder passed after the settled point | [`LogDecoder::passed_unwritten`] |
//! |--------------------------------------------------|----------------------------------|
//! | nothing, or part of a record (need more bytes)   | false                            |
//! | zero fill (preallocated space)                   | true                             |
//! | damage that zeros may explain (a write cut short)| true                             |
//! | a fragment of the file's earlier use             | true                             |
//! | damage it skips or stopped at                    | true                             |

use super::{Assembly, Flow, LogDecoder, SkipReason};
use crate::decoder::error::{CodecError, CorruptionKind};
use crate::format::block_start;

impl LogDecoder {
    /// The offset a follower goes back to: just past the last record returned or
    /// metadata record read, or where the decoder started before either.
    pub(crate) fn rewind_point(&self) -> u64 {
        let returned = match self.last_record {
            Some(_) => self.valid_end,
            None => block_start(self.start_offset),
        };
        returned.max(self.settled)
    }

    /// Whether the decoder has passed, after [`rewind_point`](Self::rewind_point),
    /// bytes that are no part of a record it could still complete: in a live log,
    /// space the writer has not reached yet (see the module docs' table).
    pub(crate) fn passed_unwritten(&self) -> bool {
        let skipping_no_record = self.skip.as_ref().is_some_and(|skip| {
            matches!(
                skip.why,
                SkipReason::ZeroFill | SkipReason::Damage { .. } | SkipReason::Reported
            )
        });
        let halted_early = matches!(self.flow, Flow::Halted { at } if at < self.end_offset);
        self.zero_suspect.is_some()
            || skipping_no_record
            || halted_early
            || self.state.recycled_end.is_some()
            || self.read_ahead.is_some()
    }

    /// Reads a live log from here on: a record that zeros or an earlier log's
    /// fragments cut short is held as a possible write in progress (a torn tail
    /// if only they follow, damage if data does), in every recovery mode, so that
    /// `SkipCorrupted` never reports what the writer has not finished writing.
    pub(crate) fn set_live(&mut self) {
        self.live = true;
    }

    /// Goes back to [`rewind_point`](Self::rewind_point), as a decoder that has just
    /// read up to it and nothing after: what it held of a record, skipped, suspected
    /// or stopped at after that point is forgotten (an error returned included);
    /// what the log's metadata records said is kept. Returns the offset, where the
    /// caller's input must now start. Statistics are not rolled back: bytes read
    /// again are counted again.
    pub(crate) fn rewind(&mut self) -> u64 {
        let point = self.rewind_point();
        self.offset = point;
        self.skip = None;
        self.assembly = Assembly::Idle;
        self.zero_suspect = None;
        self.flow = Flow::Reading;
        self.incomplete_tail = false;
        self.cut_short = None;
        self.state.recycled_end = None;
        // Pebble: a chunk waiting on later promises, or the trailer, may be what
        // the writer has not written yet; read from the record's end again.
        self.read_ahead = None;
        self.state.eof_trailer = false;
        if self.last_record.is_none() {
            // Back before the first record: fragments of one begun before the start
            // offset are skipped again.
            self.resyncing = self.start_offset > 0;
        }
        point
    }
}

/// A follower's memory of the last error it read again: damage past the last record of
/// a live log may be a write still in progress, so it is read once more before it is
/// believed. The follower engine both followers drive (`LogTailer` and the directory's
/// `DirReader`: `crate::reader::follow`) keeps one, so the rule lives here.
#[derive(Debug, Default)]
pub(crate) struct LiveDoubt {
    met: Option<(u64, ErrorKey)>,
}

/// What makes two errors the same error for [`LiveDoubt`]: where and what, without
/// the parts (an `io::Error`) that cannot be compared.
#[derive(Debug, PartialEq, Eq)]
enum ErrorKey {
    Corruption {
        offset: u64,
        bytes: u64,
        kind: CorruptionKind,
    },
    RecordTooLarge {
        offset: u64,
        size: u64,
    },
    IncompleteRecord {
        offset: u64,
        bytes: u64,
    },
    Other(std::mem::Discriminant<CodecError>),
}

impl ErrorKey {
    fn of(error: &CodecError) -> ErrorKey {
        match *error {
            CodecError::Corruption {
                offset,
                bytes,
                kind,
            } => ErrorKey::Corruption {
                offset,
                bytes,
                kind,
            },
            CodecError::RecordTooLarge { offset, size, .. } => {
                ErrorKey::RecordTooLarge { offset, size }
            }
            CodecError::IncompleteRecord { offset, bytes } => {
                ErrorKey::IncompleteRecord { offset, bytes }
            }
            ref other => ErrorKey::Other(std::mem::discriminant(other)),
        }
    }
}

impl LiveDoubt {
    /// Whether `error`, met decoding past `rewind_point` (the decoder's
    /// [`LogDecoder::rewind_point`]), is to be read again: the first time it is met
    /// there, and every time when it is damage a write in progress leaves (zeros before
    /// data). Notes it as met.
    pub(crate) fn read_again(&mut self, rewind_point: u64, error: &CodecError) -> bool {
        let met = (rewind_point, ErrorKey::of(error));
        if self.met.as_ref() == Some(&met) && !error.unwritten_while_live() {
            return false;
        }
        self.met = Some(met);
        true
    }

    /// A record was returned: what was met before is forgotten.
    pub(crate) fn clear(&mut self) {
        self.met = None;
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use tokio_util::codec::Decoder;

    use crate::codec::encoder::LogEncoder;
    use crate::decoder::LogDecoder;

    /// Zeros after a record are passed, and going back lands on the record's end.
    #[test]
    fn zeros_after_a_record_are_unwritten_and_rewind_lands_on_its_end() {
        let mut log = BytesMut::new();
        LogEncoder::new().encode_record(b"one", &mut log);
        let end = log.len() as u64;
        log.extend_from_slice(&[0u8; 100]);
        let mut decoder = LogDecoder::new();
        let mut src = log.clone();
        assert_eq!(&decoder.decode(&mut src).unwrap().unwrap()[..], b"one");
        assert!(!decoder.passed_unwritten());
        assert_eq!(decoder.decode(&mut src).unwrap(), None);
        assert!(decoder.passed_unwritten());
        assert!(decoder.offset() > end);
        assert_eq!(decoder.rewind(), end);
        assert!(!decoder.passed_unwritten());

        // The writer fills the zeros in: read from the record's end, the new
        // record comes out at the offset it was written at.
        let mut filled = BytesMut::new();
        let mut encoder = LogEncoder::new();
        encoder.encode_record(b"one", &mut filled);
        encoder.encode_record(b"two", &mut filled);
        let mut src = filled.split_off(end as usize);
        assert_eq!(&decoder.decode(&mut src).unwrap().unwrap()[..], b"two");
        assert_eq!(decoder.last_record().unwrap().start, end);
    }

    /// A record cut short is waited for, not passed, and a rewind before any
    /// record goes back to the start.
    #[test]
    fn a_partial_record_is_not_unwritten() {
        let mut log = BytesMut::new();
        LogEncoder::new().encode_record(&[7u8; 1000], &mut log);
        let mut decoder = LogDecoder::new();
        let mut src = BytesMut::from(&log[..500]);
        assert_eq!(decoder.decode(&mut src).unwrap(), None);
        assert!(!decoder.passed_unwritten());
        assert_eq!(decoder.rewind(), 0);
    }
}
