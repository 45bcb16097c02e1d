//! What Pebble's dialect adds to the decoder: how a log ends.
//!
//! | at a record start, or inside a record                       | Pebble's reader | here |
//! |-------------------------------------------------------------|-----------------|------|
//! | the EOF trailer (a header of log number N + 1, record start) | `io.EOF`        | clean end: [`LogDecoder::recycled_end`] |
//! | an invalid chunk, no later WAL-sync promise past it          | `ErrUnexpectedEOF`: the end | clean end: [`LogDecoder::recycled_end`] |
//! | an invalid chunk, a later WAL-sync fragment promising a synced offset past it | the chunk's error | corruption |
//! | bytes cut by EOF (header or payload)                          | `ErrUnexpectedEOF` | a torn tail, as for every dialect |
//!
//! An *invalid chunk* is any fragment Pebble's reader refuses: a bad checksum, a
//! length past the block, a header the block cannot hold, a zeroed header with 19
//! or more bytes left in the block (or with 11 to 18 left and anything but zeros
//! after it), another log number, an unknown type. Where it is, Pebble's reader
//! reads ahead from the next block on, through each block's intact fragments of the
//! log, looking for a WAL-sync fragment whose synced offset is past the invalid
//! chunk (past its payload's start for a bad checksum or length, as Pebble
//! measures). The decoder does the same, streaming: it returns no record after the
//! invalid chunk, and decides once it finds that promise or reaches EOF.
//!
//! Each [`Recovery`] mode maps onto that rule:
//!
//! | mode                  | invalid chunk, no promise past it | promise past it          |
//! |-----------------------|------------------------------------|--------------------------|
//! | `TolerateTail`        | clean end                          | `Err`, once the promise is read |
//! | `AbsoluteConsistency` | `Err` at once (a clean close ends with the EOF trailer) | `Err` at once |
//! | `PointInTime`         | clean end, `halted_at` there       | reported, `halted_at` there |
//! | `SkipCorrupted`       | reported and skipped (LevelDB's rule); fragments of other logs passed over | same |
//!
//! The EOF trailer ends the log in every mode.

use bytes::BytesMut;

use super::{Assembly, Flow, LogDecoder};
use crate::decoder::error::{CodecError, Corruption, CorruptionKind};
use crate::decoder::Recovery;
use crate::format::fragment::Parsed;
use crate::format::BLOCK_SIZE;

/// An invalid chunk waiting on the read-ahead's answer.
#[derive(Debug, Clone)]
pub(super) struct ReadAhead {
    /// The offset a synced offset must pass to prove the chunk damage.
    invalid_offset: u64,
    /// The damage, if proven.
    damage: Corruption,
    /// Where the scan goes on: the decoder passes over bytes up to here.
    scan_from: u64,
}

impl LogDecoder {
    /// Pebble: an invalid chunk of `kind` at `at`, `block_left` bytes before its
    /// block's end, whose damage covers `covered` bytes, with `invalid_offset` the
    /// offset a promise must pass. Applies the table in the module documentation.
    /// The chunk is not consumed.
    pub(super) fn pebble_invalid(
        &mut self,
        at: u64,
        invalid_offset: u64,
        kind: CorruptionKind,
        (covered, block_left): (usize, usize),
    ) -> Result<(), CodecError> {
        let damage = Corruption::new(at, covered.max(1) as u64, kind);
        if let Some(open) = self.abandon_assembly() {
            self.note_cut(open.offset(), CorruptionKind::OldRecord);
        }
        match self.recovery {
            Recovery::AbsoluteConsistency => self.corrupt(damage),
            _ => {
                self.state.recycled_end = Some(at);
                self.flow = Flow::Halted { at };
                self.read_ahead = Some(ReadAhead {
                    invalid_offset,
                    damage,
                    scan_from: at + block_left as u64,
                });
                Ok(())
            }
        }
    }

    /// Pebble: the EOF trailer at `at`, where a record would start: a clean end in
    /// every mode.
    pub(super) fn pebble_eof_trailer(&mut self, at: u64) {
        if self.flow == Flow::Reading {
            self.state.recycled_end = Some(at);
            self.state.eof_trailer = true;
            self.flow = Flow::Halted { at };
        }
    }

    /// Runs the read-ahead over `src`: `Ok(())` with the input used up (or the
    /// answer found and the read-ahead over).
    pub(super) fn run_read_ahead(
        &mut self,
        src: &mut BytesMut,
        eof: bool,
    ) -> Result<(), CodecError> {
        // The scan always checks checksums: a promise must be intact to count.
        let rules = self.rules.verify_checksums(true);
        while let Some(read_ahead) = &mut self.read_ahead {
            if self.offset < read_ahead.scan_from {
                let n = ((read_ahead.scan_from - self.offset) as usize).min(src.len());
                self.consume(src, n);
                if src.is_empty() {
                    return self.read_ahead_ran_out(eof);
                }
                continue;
            }
            let block_left = BLOCK_SIZE - (self.offset % BLOCK_SIZE as u64) as usize;
            match rules.parse(src, block_left) {
                // Another log number is a defect: a fragment here is the log's own.
                Parsed::Fragment(fragment) if fragment.fragment_type().is_some() => {
                    if fragment
                        .synced_offset()
                        .is_some_and(|synced| synced > read_ahead.invalid_offset)
                    {
                        let proven = self.read_ahead.take().expect("in the loop");
                        return self.pebble_proven(proven, fragment.synced_offset());
                    }
                    self.consume(src, fragment.len());
                }
                Parsed::Incomplete { needed, .. } => {
                    if !eof && needed > src.len() {
                        src.reserve(needed - src.len());
                    }
                    return self.read_ahead_ran_out(eof);
                }
                // Anything else ends the scan of this block (Pebble's `break`).
                _ => read_ahead.scan_from = self.offset + block_left as u64,
            }
        }
        Ok(())
    }

    /// The input ran out during the read-ahead: at EOF, no promise was found, so
    /// the invalid chunk was the log's end.
    fn read_ahead_ran_out(&mut self, eof: bool) -> Result<(), CodecError> {
        if eof {
            if let Some(read_ahead) = self.read_ahead.take() {
                self.state.recycled_end = Some(read_ahead.damage.offset());
            }
        }
        Ok(())
    }

    /// A promise past the invalid chunk was found: it was corruption.
    fn pebble_proven(&mut self, proven: ReadAhead, synced: Option<u64>) -> Result<(), CodecError> {
        self.state.recycled_end = None;
        self.flow = Flow::Reading;
        self.assembly = Assembly::Idle;
        let damage = proven.damage;
        let reason = format!(
            "{} (a later WAL-sync fragment promises the log synced to offset {})",
            damage.kind(),
            synced.unwrap_or_default()
        );
        let at = damage.offset();
        let result = self.corrupt(Corruption::with_reason(
            at,
            damage.bytes(),
            damage.kind(),
            reason,
        ));
        if self.flow == Flow::Reading {
            self.flow = Flow::Halted { at };
        }
        result
    }
}
