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
//!
//! A live decoder in a mode that skips damage (`SkipCorrupted`, `PointInTime`) must
//! not report what may be a write in progress, nor skip past it to a later record: a
//! read racing the writer can see a page the writer had not reached yet (zeros) and,
//! after it, pages it has since filled. So the first damage met past the last record
//! is held ([`LiveDamage`]), neither reported nor counted, and the decoder goes on
//! only to learn what follows:
//!
//! | after held damage                | what the decoder does                                         |
//! |----------------------------------|---------------------------------------------------------------|
//! | the end of what was read         | nothing more: the follower goes back and reads again later    |
//! | a complete record                | the held damage as an error, the record not returned: the follower doubts it (reads again after a wait) and, met the same, believes it ([`LogDecoder::believe`]) |
//! | (believed) the same damage first | reported and counted as the mode says, the record returned     |
//!
//! Damage of a kind a read racing the writer leaves (zeros before data) is never
//! believed while the log is live. Damage reported once is not reported again when
//! the follower goes back over it.

use super::{Assembly, Flow, LogDecoder, Recovery, SkipReason};
use crate::decoder::error::{CodecError, Corruption, CorruptionKind};
use crate::format::block_start;

/// What a live decoder in a mode that skips damage did with the damage it met past
/// its last record (see the module docs).
#[derive(Clone, Debug, Default)]
pub(super) struct LiveDamage {
    /// The first damage met since the decoder last went back, neither reported
    /// nor counted: a write in progress, or a read racing one, until believed.
    held: Option<Corruption>,
    /// The damage the follower believes (its offset and kind): met first after
    /// going back, it and what follows it up to the next record are reported.
    believing: Option<(u64, CorruptionKind)>,
    /// This pass began with the believed damage.
    believed_pass: bool,
    /// The decoder's offset when it last reported damage: damage met there or
    /// before it again, after going back, was reported already.
    reported_to: Option<u64>,
}

/// What a live decoder that skips damage does with a piece of it.
pub(super) enum LiveVerdict {
    /// Believed: reported and counted as the mode says.
    Report,
    /// Held, or reported already: skipped (or stopped at) without a word.
    Quiet,
}

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

    /// Whether damage is judged by [`judge_live`](Self::judge_live): a live decoder
    /// in a mode that skips damage rather than failing on it.
    pub(super) fn holds_live_damage(&self) -> bool {
        self.live
            && matches!(
                self.recovery,
                Recovery::SkipCorrupted | Recovery::PointInTime
            )
    }

    /// What to do with `corruption`, met live in a mode that skips damage (see the
    /// module docs): reported when believed, otherwise held (the first) or passed
    /// over quietly.
    pub(super) fn judge_live(&mut self, corruption: &Corruption) -> LiveVerdict {
        let live = &mut self.live_damage;
        if live.reported_to.is_some_and(|to| self.offset <= to) || live.held.is_some() {
            return LiveVerdict::Quiet;
        }
        let key = (corruption.offset(), corruption.kind());
        let believed = live.believed_pass || live.believing == Some(key);
        if believed && !corruption.kind().unwritten_while_live() {
            live.believed_pass = true;
            live.reported_to = Some(self.offset);
            return LiveVerdict::Report;
        }
        live.held = Some(corruption.clone());
        LiveVerdict::Quiet
    }

    /// Whether a record just put together comes after held damage: then it is not
    /// settled (the follower goes back before it), and the decoder returns
    /// [`take_doubt`](Self::take_doubt) instead. Otherwise what was believed is over.
    #[inline]
    pub(super) fn record_after_held_damage(&mut self) -> bool {
        if !self.live {
            return false;
        }
        if self.live_damage.held.is_some() {
            return true;
        }
        self.live_damage.believing = None;
        self.live_damage.believed_pass = false;
        false
    }

    /// The held damage as the error a follower doubts, in place of what the decoder
    /// was about to hand out after it; `None` when nothing is held.
    #[inline]
    pub(super) fn take_doubt(&mut self) -> Option<CodecError> {
        if !self.live {
            return None;
        }
        let held = self.live_damage.held.take()?;
        self.flow = Flow::Failed;
        Some(held.into_error())
    }

    /// The follower met `error` (the held damage this decoder returned) twice at
    /// the same place: believe it. Returns whether this decoder skips damage (so
    /// the follower goes back and decodes again, now reporting it); a decoder that
    /// fails on damage has nothing to believe.
    pub(crate) fn believe(&mut self, error: &CodecError) -> bool {
        let CodecError::Corruption { offset, kind, .. } = *error else {
            return false;
        };
        if !self.holds_live_damage() {
            return false;
        }
        self.live_damage.believing = Some((offset, kind));
        true
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
        self.live_damage.held = None;
        self.live_damage.believed_pass = false;
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
