//! How the decoder meets damage and the end of its input: what it skips and reports,
//! zeros that are harmless up to the end and damage before data, torn tails, streams
//! cut inside a record, and fragments of a recycled file's earlier use.

use super::follow::LiveVerdict;
use super::*;

/// Bytes to pass over up to `until` (a block end).
#[derive(Clone)]
pub(super) struct Skip {
    pub(super) until: u64,
    pub(super) why: SkipReason,
}

#[derive(Clone)]
pub(super) enum SkipReason {
    Trailer,
    ZeroFill,
    /// Damage already reported at an EOF that the log has since grown past.
    Reported,
    /// Damage reported once the number of bytes dropped is known (LevelDB drops what
    /// it holds of the block, which is less at EOF); `then` follows it.
    Damage {
        at: u64,
        kind: CorruptionKind,
        then: Option<Corruption>,
    },
}

/// Where a torn write can stop: storage persists whole sectors, so a write cut
/// short by a crash or power cut ends at a multiple of this (4 KiB pages are a
/// multiple too).
pub(super) const SECTOR_SIZE: u64 = 512;

/// Zeros that are harmless if they run to the end of the input and damage if
/// anything but zeros follows them.
#[derive(Clone)]
pub(super) enum ZeroSuspect {
    /// Damage that zeros cut short: an open record cut by zero fill, or a fragment
    /// whose payload runs into zeros from a sector boundary on (so fails its
    /// checksum). With only zeros after it up to EOF it is a torn tail: what a
    /// power cut, or a crash in preallocated space, leaves.
    Cut(Corruption),
    /// Zero fill from the first byte of the block at `at`. Up to EOF that is
    /// preallocated space; followed by data it is lost data (a zeroed block), since
    /// writers pad with zeros only from the middle of a block to its end.
    ZeroedBlock { at: u64 },
    /// A live log's (a follower's, not recycled): a zeroed header at `at`, in the
    /// middle of a block. Up to EOF that is space the writer has not reached;
    /// followed by data it is a read that saw a later page of a write but not yet
    /// an earlier one, which a follower reads again for as long as the log is live
    /// (`CorruptionKind::ZeroFillBeforeData`), or else lost data. A finished log's
    /// reader skips it to the block's end as LevelDB does, and suspects nothing.
    ZeroFill { at: u64 },
}

/// Whether a fragment that failed its checksum has the shape of a write cut short
/// in zero-filled space: its bytes run into zeros that begin at a sector boundary
/// inside the fragment. `fragment` is the whole fragment, header included, and
/// `offset` where it starts in the log. Any other checksum failure is corruption,
/// even when its last byte happens to be zero.
pub(super) fn cut_at_sector(offset: u64, fragment: &[u8]) -> bool {
    let Some(last_data) = last_nonzero(fragment) else {
        return false;
    };
    let zeros_from = offset + last_data as u64 + 1;
    let end = offset + fragment.len() as u64;
    zeros_from.next_multiple_of(SECTOR_SIZE) < end
}

impl LogDecoder {
    /// Notes that the open record at `start` is dropped for `kind` (fragment mode).
    pub(super) fn note_cut(&mut self, start: u64, kind: CorruptionKind) {
        if self.fragments {
            self.cut_short = Some((start, kind));
        }
    }

    /// Whether damage waits on what follows some zeros: a torn tail if only zeros
    /// run to EOF, damage otherwise.
    pub(crate) fn zeros_pending(&self) -> bool {
        self.zero_suspect.is_some()
    }

    pub(super) fn consume(&mut self, src: &mut BytesMut, n: usize) {
        src.advance(n);
        self.offset += n as u64;
    }

    pub(super) fn report(&self, corruption: &Corruption) {
        report::damage(corruption, self.recovery, &self.name, self.file.as_deref());
        if let Some(reporter) = &self.reporter {
            // A reporter that panicked once still hears about later damage.
            let mut report = reporter
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            report(corruption);
        }
    }

    /// Handles one piece of damage according to the recovery mode.
    pub(super) fn corrupt(&mut self, corruption: Corruption) -> Result<(), CodecError> {
        if self.flow != Flow::Reading {
            // Stopped already (PointInTime or a split's end): later damage is not ours.
            return Ok(());
        }
        if self.holds_live_damage() {
            if let LiveVerdict::Quiet = self.judge_live(&corruption) {
                if self.recovery == Recovery::PointInTime {
                    self.flow = Flow::Halted {
                        at: corruption.offset(),
                    };
                }
                return Ok(());
            }
        }
        self.stats.corruptions += 1;
        self.stats.dropped_bytes += corruption.bytes();
        match self.recovery {
            Recovery::SkipCorrupted => {
                self.report(&corruption);
                Ok(())
            }
            Recovery::PointInTime => {
                self.report(&corruption);
                self.flow = Flow::Halted {
                    at: corruption.offset(),
                };
                Ok(())
            }
            Recovery::TolerateTail | Recovery::AbsoluteConsistency => {
                self.flow = Flow::Failed;
                if corruption.kind() == CorruptionKind::RecordTooLarge {
                    return Err(CodecError::RecordTooLarge {
                        offset: corruption.offset(),
                        size: corruption.bytes(),
                        max: self.max_record_bytes,
                    });
                }
                Err(corruption.into_error())
            }
        }
    }

    /// Drops an open record because a FULL or FIRST fragment arrived (LevelDB's
    /// "partial record without end"; an empty FIRST is an old writer's quirk, silent).
    pub(super) fn interrupt_assembly(&mut self) -> Result<(), CodecError> {
        match std::mem::replace(&mut self.assembly, Assembly::Idle) {
            Assembly::Idle => Ok(()),
            Assembly::Collecting { parts, .. } if parts.len == 0 => Ok(()),
            Assembly::Collecting { start, parts } => {
                self.note_cut(start, CorruptionKind::PartialRecordWithoutEnd);
                self.corrupt(Corruption::new(
                    start,
                    parts.len as u64,
                    CorruptionKind::PartialRecordWithoutEnd,
                ))
            }
            Assembly::Discarding { start, dropped } => self.corrupt(Corruption::new(
                start,
                dropped,
                CorruptionKind::RecordTooLarge,
            )),
        }
    }

    /// Drops an open record because damage cut it (LevelDB's "error in middle of
    /// record", reported even when the record held no bytes yet).
    pub(super) fn abandon_assembly(&mut self) -> Option<Corruption> {
        match std::mem::replace(&mut self.assembly, Assembly::Idle) {
            Assembly::Idle => None,
            Assembly::Collecting { start, parts } => {
                self.note_cut(start, CorruptionKind::ErrorInMiddleOfRecord);
                Some(Corruption::new(
                    start,
                    parts.len as u64,
                    CorruptionKind::ErrorInMiddleOfRecord,
                ))
            }
            Assembly::Discarding { start, dropped } => Some(Corruption::new(
                start,
                dropped,
                CorruptionKind::RecordTooLarge,
            )),
        }
    }

    pub(super) fn finish_record(&mut self, start: u64, record: Bytes) -> Bytes {
        if self.record_after_held_damage() {
            // Not settled: the follower goes back before the damage (`follow.rs`).
            return record;
        }
        self.last_record = Some(Position {
            start,
            end: self.offset,
        });
        self.valid_end = self.offset;
        self.stats.records += 1;
        self.stats.record_bytes += record.len() as u64;
        record
    }

    /// The input ran out before the next complete fragment.
    pub(super) fn need_more(
        &mut self,
        src: &BytesMut,
        eof: bool,
    ) -> Result<Option<Bytes>, CodecError> {
        if !eof {
            return Ok(None);
        }
        if self.zero_suspect.is_some() {
            let raised = self.zeros_only(src)?;
            match self.zero_suspect.take() {
                // Only zeros after the damage, up to EOF: the write that died.
                Some(ZeroSuspect::Cut(cut)) => {
                    self.incomplete_tail = true;
                    self.tail_start = cut.offset();
                    if self.recovery == Recovery::AbsoluteConsistency {
                        let bytes = self.offset + src.len() as u64 - cut.offset();
                        self.corrupt(Corruption::new(
                            cut.offset(),
                            bytes,
                            CorruptionKind::TruncatedTail,
                        ))?;
                    }
                }
                // Zeros from a block's start to EOF: preallocated space, nothing lost.
                Some(ZeroSuspect::ZeroedBlock { .. } | ZeroSuspect::ZeroFill { .. }) | None
                    if raised || src.is_empty() => {}
                // Zeros to a block's end, then fewer than a header's bytes of the next
                // block: a header cut short, as after any other block (the layout
                // walk, which looks at each block alone, calls it torn too).
                Some(ZeroSuspect::ZeroedBlock { .. } | ZeroSuspect::ZeroFill { .. }) | None => {
                    return self.torn_tail(src)
                }
            }
            return Ok(None);
        }
        self.torn_tail(src)
    }

    /// At EOF, with `src` left over: a torn tail, unless nothing is left or open.
    pub(super) fn torn_tail(&mut self, src: &BytesMut) -> Result<Option<Bytes>, CodecError> {
        let (tail_start, open) = match &self.assembly {
            Assembly::Idle => (self.offset, false),
            Assembly::Collecting { start, .. } | Assembly::Discarding { start, .. } => {
                (*start, true)
            }
        };
        if src.is_empty() && !open {
            return Ok(None);
        }
        // A torn tail: the writer died mid-write. Nothing is consumed, so a reader
        // that later finds more bytes (a log being tailed) picks up where it was.
        self.incomplete_tail = true;
        self.tail_start = tail_start;
        if let Assembly::Discarding { start, dropped } = self.assembly {
            // Bytes past the limit were dropped, torn tail or not: say so, once.
            self.assembly = Assembly::Idle;
            self.corrupt(Corruption::new(
                start,
                dropped,
                CorruptionKind::RecordTooLarge,
            ))?;
        }
        if self.recovery == Recovery::AbsoluteConsistency && self.flow == Flow::Reading {
            let bytes = self.offset + src.len() as u64 - tail_start;
            return self
                .corrupt(Corruption::new(
                    tail_start,
                    bytes,
                    CorruptionKind::TruncatedTail,
                ))
                .map(|()| None);
        }
        Ok(None)
    }

    /// At the end of a stream that stopped inside a record: the record is lost in
    /// transit, an error in every mode (a file's torn tail was handled already). A
    /// follower's decoder is never cut: its input's end is where the writer is.
    pub(super) fn cut_stream(&mut self, src: &BytesMut) -> Result<(), CodecError> {
        if self.input != LogInput::Stream
            || self.live
            || !self.incomplete_tail
            || self.flow != Flow::Reading
        {
            return Ok(());
        }
        self.flow = Flow::Failed;
        let end = self.offset + src.len() as u64;
        Err(CodecError::IncompleteRecord {
            offset: self.tail_start,
            bytes: end.saturating_sub(self.tail_start),
        })
    }

    /// While zeros are suspect (`zero_suspect`), what they hide is damage, handled
    /// as such, as soon as anything but zeros follows them. `bytes` are the next
    /// bytes of the input, from `self.offset`. Returns whether it was raised.
    pub(super) fn zeros_only(&mut self, bytes: &[u8]) -> Result<bool, CodecError> {
        if self.zero_suspect.is_none() {
            return Ok(false);
        }
        let Some(data_at) = first_nonzero(bytes) else {
            return Ok(false);
        };
        match self.zero_suspect.take().expect("checked above") {
            ZeroSuspect::Cut(damage) => self.corrupt(damage)?,
            suspect @ (ZeroSuspect::ZeroedBlock { at } | ZeroSuspect::ZeroFill { at }) => {
                let kind = if let ZeroSuspect::ZeroedBlock { .. } = suspect {
                    if self.flow == Flow::Reading {
                        self.stats.zeroed_blocks += 1;
                    }
                    CorruptionKind::ZeroedBlock
                } else {
                    CorruptionKind::ZeroFillBeforeData
                };
                // Live, a read racing the writer leaves it: held, never skipped.
                if self.recovery != Recovery::SkipCorrupted || self.live {
                    let zeros = self.offset + data_at as u64 - at;
                    self.corrupt(Corruption::new(at, zeros, kind))?;
                }
            }
        }
        Ok(true)
    }

    /// Holds `suspect` until the input shows what the zeros are; the first one
    /// pending is the earliest damage, so it stays.
    pub(super) fn suspect(&mut self, suspect: ZeroSuspect) {
        if self.zero_suspect.is_none() {
            self.zero_suspect = Some(suspect);
        }
    }

    /// Passes over skipped bytes; returns false when the input ran out first.
    pub(super) fn run_skip(&mut self, src: &mut BytesMut, eof: bool) -> Result<bool, CodecError> {
        let Some(until) = self.skip.as_ref().map(|skip| skip.until) else {
            return Ok(true);
        };
        let wanted = (until - self.offset) as usize;
        let n = wanted.min(src.len());
        self.zeros_only(&src[..n])?;
        let skip = self.skip.as_mut().expect("skip is set");
        match skip.why {
            SkipReason::Trailer => self.stats.trailer_bytes += n as u64,
            SkipReason::ZeroFill => self.stats.zero_fill_bytes += n as u64,
            SkipReason::Damage { .. } | SkipReason::Reported => {}
        }
        if n < wanted {
            let reported = std::mem::replace(&mut skip.why, SkipReason::Reported);
            src.advance(n);
            self.offset += n as u64;
            match reported {
                // EOF came first: LevelDB reports only the bytes it had. The skip
                // stays armed in case the log grows (a tailed log).
                SkipReason::Damage { at, kind, then } if eof => {
                    self.report_damage(at, kind, then)?
                }
                other => self.skip.as_mut().expect("skip is set").why = other,
            }
            return Ok(false);
        }
        let skip = self.skip.take().expect("skip is set");
        self.consume(src, n);
        if let SkipReason::Damage { at, kind, then } = skip.why {
            self.report_damage(at, kind, then)?;
        }
        Ok(true)
    }

    pub(super) fn report_damage(
        &mut self,
        at: u64,
        kind: CorruptionKind,
        then: Option<Corruption>,
    ) -> Result<(), CodecError> {
        self.corrupt(Corruption::new(at, self.offset - at, kind))?;
        if let Some(then) = then {
            self.corrupt(then)?;
        }
        Ok(())
    }

    /// A type-0, length-0 header: the rest of the block (`len` bytes) is zero fill.
    pub(super) fn zero_fill(
        &mut self,
        src: &mut BytesMut,
        at: u64,
        len: usize,
    ) -> Result<(), CodecError> {
        // Preallocated space: LevelDB skips the rest of the block silently. The
        // header goes at once: its checksum bytes may hold the start of a header cut
        // short, which is no sign of data after the zeros.
        self.stats.zero_fill_bytes += HEADER_SIZE as u64;
        self.consume(src, HEADER_SIZE);
        self.skip = Some(Skip {
            until: at + len as u64,
            why: SkipReason::ZeroFill,
        });
        if self.recovery == Recovery::SkipCorrupted && !self.live {
            if let Some(cut) = self.abandon_assembly() {
                self.corrupt(cut)?;
            }
        } else if let Some(cut) = self.abandon_assembly() {
            // Zeros after a FIRST are what a power cut leaves when the file's size
            // reached the disk before its data: a torn tail if only zeros follow to
            // EOF, damage if anything else does.
            self.suspect(ZeroSuspect::Cut(cut));
        }
        if at % BLOCK_SIZE as u64 == 0 {
            self.suspect(ZeroSuspect::ZeroedBlock { at });
        } else if self.live && !self.state.is_recycled() {
            // Not in a recycled log: past its live end lie an earlier log's bytes,
            // which a header parsed inside one of its payloads may take for zeros;
            // its fragments' log numbers tell them from this log's.
            self.suspect(ZeroSuspect::ZeroFill { at });
        }
        Ok(())
    }

    /// A fragment at `at`, `fragment_len` bytes long, failed its checksum; `block_left`
    /// bytes are left in its block.
    pub(super) fn checksum_mismatch(
        &mut self,
        src: &mut BytesMut,
        at: u64,
        fragment_len: usize,
        block_left: usize,
    ) -> Result<(), CodecError> {
        // The rest of the block, or of the log when it ends first (LevelDB and
        // RocksDB report what they held of the block).
        let covered = block_left.min(src.len());
        let damage = Corruption::new(at, covered as u64, CorruptionKind::ChecksumMismatch);
        if (self.recovery != Recovery::SkipCorrupted || self.live)
            && cut_at_sector(at, &src[..fragment_len])
        {
            // Perhaps a write cut short in space preallocated with zeros: the rest of
            // the file decides (see `ZeroSuspect::Cut`).
            self.assembly = Assembly::Idle;
            self.suspect(ZeroSuspect::Cut(damage));
            self.consume(src, fragment_len);
            self.skip = Some(Skip {
                until: at + block_left as u64,
                why: SkipReason::ZeroFill,
            });
            return Ok(());
        }
        let then = self.abandon_assembly();
        if self.recovery == Recovery::SkipCorrupted {
            self.skip = Some(Skip {
                until: self.offset + block_left as u64,
                why: SkipReason::Damage {
                    at,
                    kind: CorruptionKind::ChecksumMismatch,
                    then,
                },
            });
            Ok(())
        } else {
            self.corrupt(damage)
        }
    }

    /// RocksDB: in a recycled file, `TolerateTail` takes a bad checksum or length at
    /// `at` as the end of the log, silently (what is after it may be the file's
    /// earlier content, cut by a crash mid-write). Returns whether it did.
    pub(super) fn ends_recycled_log(&mut self, at: u64) -> bool {
        if !self.state.is_recycled() || self.recovery != Recovery::TolerateTail {
            return false;
        }
        if let Some(open) = self.abandon_assembly() {
            self.note_cut(open.offset(), CorruptionKind::OldRecord);
        }
        self.end_recycled_log(at);
        true
    }

    pub(super) fn end_recycled_log(&mut self, at: u64) {
        if self.flow == Flow::Reading {
            self.state.recycled_end = Some(at);
            self.flow = Flow::Halted { at };
        }
    }

    /// RocksDB: a recyclable fragment with another log number, left from the file's
    /// earlier use. It ends the log, except in `SkipCorrupted`, which passes over it.
    pub(super) fn old_fragment(
        &mut self,
        src: &mut BytesMut,
        at: u64,
        fragment: Fragment,
    ) -> Result<(), CodecError> {
        let len = fragment.len();
        self.consume(src, len);
        if self.legacy_data()
            && !self.state.is_recycled()
            && self.rules.dialect() != Dialect::Pebble
        {
            return self.unexpected_recyclable(at, len);
        }
        self.stats.old_fragment_bytes += len as u64;
        let open = self.abandon_assembly();
        if self.recovery == Recovery::SkipCorrupted && !self.live {
            return match open {
                Some(cut) => self.corrupt(cut),
                None => Ok(()),
            };
        }
        if let Some(cut) = open {
            self.note_cut(cut.offset(), CorruptionKind::OldRecord);
            if self.recovery != Recovery::TolerateTail {
                self.corrupt(Corruption::new(
                    cut.offset(),
                    cut.bytes(),
                    CorruptionKind::OldRecord,
                ))?;
            }
        }
        self.end_recycled_log(at);
        Ok(())
    }

    /// RocksDB: a recyclable fragment (already consumed, `len` bytes at `at`) after
    /// the log's legacy data.
    pub(super) fn unexpected_recyclable(&mut self, at: u64, len: usize) -> Result<(), CodecError> {
        let then = self.abandon_assembly();
        self.corrupt(Corruption::new(
            at,
            len as u64,
            CorruptionKind::UnexpectedRecyclable,
        ))?;
        match then {
            Some(cut) => self.corrupt(cut),
            None => Ok(()),
        }
    }

    /// A fragment of a type the dialect does not know: it and any open record go.
    pub(super) fn unknown_type(
        &mut self,
        at: u64,
        type_byte: u8,
        len: usize,
    ) -> Result<(), CodecError> {
        let held = match std::mem::replace(&mut self.assembly, Assembly::Idle) {
            Assembly::Idle => 0,
            Assembly::Collecting { start, parts } => {
                self.note_cut(start, CorruptionKind::UnknownRecordType(type_byte));
                parts.len as u64
            }
            Assembly::Discarding { dropped, .. } => dropped,
        };
        self.corrupt(Corruption::new(
            at,
            len as u64 + held,
            CorruptionKind::UnknownRecordType(type_byte),
        ))
    }
}
