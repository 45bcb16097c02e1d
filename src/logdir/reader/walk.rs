//! The state machine behind a [`DirReader`](crate::logdir::DirReader): one segment
//! at a time, open it, decode it with the follower engine (`crate::reader::follow`),
//! read more or go back as the engine's rules say, check what was read against the
//! file, move on to the next segment, wait. Where a segment ends and which comes
//! next is `segments.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::segments::Source;
use super::DirRecord;
use crate::decoder::error::CodecError;
use crate::error::Error;
use crate::error::LogChange;
use crate::format::block_start;
use crate::logdir::segment::segment_path;
use crate::logdir::wake::DurableWatch;
use crate::logdir::Inner;
use crate::logdir::LogDirOptions;
use crate::position::LogPosition;
use crate::read_at::read_at;
use crate::reader::follow::Follow;
use crate::reader::guard::FileGuard;
use crate::reader::LogTailer;

/// Bytes read from a segment file at a time.
const READ_CHUNK: usize = 64 * 1024;

/// The fewest bytes read at a time after a read in another process ran into space
/// a live segment's writer has not reached (preallocated zeros, a recycled file's
/// earlier use): it reads about twice what the writer added since it was there
/// last, doubling back to [`READ_CHUNK`] with each read that fills. A follower
/// polling every millisecond read a whole chunk of zeros on each poll.
const LIVE_READ_CHUNK: usize = 4 * 1024;

/// The state of a [`DirReader`], moved into the read under way and back.
#[derive(Debug)]
pub(super) struct Walk {
    pub(super) dir: PathBuf,
    pub(super) source: Source,
    /// The segments are Pebble's (see `LogDirOptions::dialect`).
    pub(super) pebble: bool,
    pub(super) follow: bool,
    pub(super) poll_interval: Duration,
    /// The segment being read.
    pub(super) segment: u64,
    /// Where to start in `segment` when it is opened.
    pub(super) start_offset: u64,
    pub(super) cursor: Option<Cursor>,
    /// Just past the last record returned (or where reading started).
    pub(super) position: LogPosition,
    pub(super) failed: bool,
    /// Stop where a follower would wait (`caught_up`), and say so in `at_end`.
    pub(super) no_wait: bool,
    pub(super) at_end: bool,
    /// In another process: the segment after which the directory was last listed
    /// for a later segment (none was there), and when.
    pub(super) holes_checked: Option<(u64, Instant)>,
    /// What the decoder said when [`next_buffered`](Walk::next_buffered) found no
    /// record in the buffer: the read it hands over to goes on from it.
    pub(super) decoded: Option<Result<Option<Bytes>, CodecError>>,
}

#[derive(Debug)]
pub(super) struct Cursor {
    /// Read at offsets (`read_at`): from the page cache on the task's thread.
    pub(super) file: Arc<std::fs::File>,
    /// The decoder and the bytes read ahead of it (just past them: the file
    /// offset of the next read), and in another process the follower's rules.
    pub(super) engine: Follow,
    /// The segment is over and every byte of it is in `buf`.
    pub(super) at_eof: bool,
    /// The last read reached the file's end (it got fewer bytes than it asked for):
    /// the file must be checked before the next, which may come after any change.
    pub(super) reached_end: bool,
    /// Bytes to read at a time ([`READ_CHUNK`], or less at a live end).
    pub(super) chunk: usize,
    /// Where the reader last went back to at the end of what the writer wrote.
    pub(super) live_end: Option<u64>,
    /// In another process, until the reader first sees the segment sealed: what it
    /// read past the last record may be older than the writer's last writes (a
    /// recycled file's earlier use, zeros, a read that raced a write), which the
    /// decoder passes over as space not yet written. Once sealed it goes back to
    /// the last record and reads the rest again, once, now that it cannot change.
    pub(super) read_live: bool,
}

impl Cursor {
    /// Whether `record`, just decoded, was put together from more than one read
    /// in another process (it starts before the last read did): the file must
    /// then be checked to still hold it. A record inside one read is what the file
    /// held when it was read.
    fn assembled(&self, record: &DirRecord) -> bool {
        self.engine.assembled(record.start.offset)
    }

    /// Whether the file still holds `record`'s bytes, checked on this thread from
    /// the page cache; `false` when it does not or cannot tell there.
    fn span_holds_cached(&mut self, record: &DirRecord) -> bool {
        match self
            .engine
            .span(record.start.offset, record.end.offset)
            .run_cached()
        {
            Ok((recent, result)) => {
                self.engine.restore(recent);
                result.is_ok()
            }
            Err(span) => {
                self.engine.restore(span.into_window());
                false
            }
        }
    }

    /// The record the decoder just returned, in `segment`.
    fn record(&mut self, segment: u64, data: Bytes) -> DirRecord {
        let position = self.engine.returned();
        DirRecord {
            start: LogPosition::new(segment, position.start),
            end: LogPosition::new(segment, position.end),
            data,
        }
    }
}

impl Walk {
    pub(super) fn in_process(inner: Arc<Inner>, from: LogPosition) -> Result<Walk, Error> {
        let (from, truncations_seen) = {
            let mut catalog = inner.catalog();
            let from = catalog.resolve(from)?;
            if from.segment > catalog.active {
                return Err(Error::InvalidPosition {
                    position: from,
                    reason: "past the end of the log",
                });
            }
            catalog.pin(from.segment);
            (from, catalog.truncations.len())
        };
        let end = DurableWatch::new(inner.subscribe(), LogDirOptions::DEFAULT_WAKE_INTERVAL);
        let (dir, pebble) = (inner.dir().to_path_buf(), inner.options.pebble());
        let source = Source::Writer {
            inner,
            end,
            truncations_seen,
        };
        Ok(Walk::at(dir, source, pebble, from))
    }

    pub(super) async fn open(path: impl AsRef<Path>, from: LogPosition) -> Result<Walk, Error> {
        let dir = path.as_ref().to_path_buf();
        // The segments a reader reads (`LogDir::list`): segments a crash kept from a
        // purge are not part of the log.
        let (listing, pebble) = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                let listing = crate::logdir::listing::list(&dir)?;
                Ok::<_, Error>((listing, crate::logdir::dialect::is_marked_pebble(&dir)?))
            })
            .await
            .map_err(std::io::Error::other)??
        };
        let purged_through = listing.purged_through;
        let first = listing
            .segments
            .first()
            .map_or(purged_through.segment + 1, |segment| segment.number);
        let from = crate::logdir::resolve_start(from, first, purged_through)?;
        Ok(Walk::at(dir, Source::Files, pebble, from))
    }

    /// A walk of the log in `dir` through `source`, about to read from `from`.
    fn at(dir: PathBuf, source: Source, pebble: bool, from: LogPosition) -> Walk {
        Walk {
            dir,
            source,
            pebble,
            follow: false,
            poll_interval: LogTailer::DEFAULT_POLL_INTERVAL,
            segment: from.segment,
            start_offset: from.offset,
            cursor: None,
            position: from,
            failed: false,
            no_wait: false,
            at_end: false,
            holes_checked: None,
            decoded: None,
        }
    }

    /// The next record; `None` at the end of what is readable (a follower waits
    /// instead, unless `no_wait`). After an error, `None`.
    pub(super) async fn next_record(&mut self) -> Option<Result<DirRecord, Error>> {
        if self.failed {
            return None;
        }
        match self.advance().await {
            Ok(record) => {
                if let Some(record) = &record {
                    self.position = record.end;
                }
                record.map(Ok)
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    /// The next record when the buffer already holds it, decoded on the spot: a
    /// read under way is a boxed future holding the whole walk, and a follower
    /// that finds a hundred records per poll spent much of its CPU building one
    /// per record. `None` when the read must go on as a future; what the decoder
    /// said is then kept for it.
    pub(super) fn next_buffered(&mut self) -> Option<Result<DirRecord, Error>> {
        if self.failed || self.decoded.is_some() || self.cursor.is_none() {
            return None;
        }
        if let Err(e) = self.check_truncations() {
            self.failed = true;
            return Some(Err(e));
        }
        let segment = self.segment;
        let cursor = self.cursor.as_mut().expect("checked above");
        let decoded = cursor.engine.decode(cursor.at_eof);
        match decoded {
            Ok(Some(data)) => {
                let record = cursor.record(segment, data);
                if cursor.assembled(&record) && !cursor.span_holds_cached(&record) {
                    // Not known to be whole yet: the read under way checks it, on a
                    // blocking thread if it must, and says what changed if it did.
                    self.decoded = Some(Ok(Some(record.data)));
                    return None;
                }
                self.position = record.end;
                Some(Ok(record))
            }
            other => {
                self.decoded = Some(other);
                None
            }
        }
    }

    pub(super) async fn advance(&mut self) -> Result<Option<DirRecord>, Error> {
        loop {
            // Before anything read is decoded, and while waiting for a segment that
            // a truncation may have removed.
            self.check_truncations()?;
            if self.cursor.is_none() && !self.open_segment().await? {
                if self.stop_here() {
                    return Ok(None);
                }
                self.wait().await;
                continue;
            }
            let segment = self.segment;
            let cursor = self.cursor.as_mut().expect("opened above");
            let decoded = match self.decoded.take() {
                Some(decoded) => decoded,
                None => cursor.engine.decode(cursor.at_eof),
            };
            let decoded = match decoded {
                Err(e) if !cursor.at_eof && self.is_live_error(&e).await? => {
                    // Damage past the last record of a segment still written in
                    // place may be a write in progress: read it again before
                    // believing it.
                    self.go_back().await?;
                    if self.look_again() {
                        continue;
                    }
                    if self.stop_here() {
                        return Ok(None);
                    }
                    self.wait().await;
                    continue;
                }
                decoded => decoded,
            };
            let cursor = self.cursor.as_mut().expect("opened above");
            let decoded = match decoded {
                Err(e) if cursor.engine.is_live() => Err(self.damage_or_change(e.into()).await),
                decoded => decoded.map_err(|e| bad_segment(segment, e.into())),
            };
            let cursor = self.cursor.as_mut().expect("opened above");
            match decoded? {
                Some(data) => {
                    let record = cursor.record(segment, data);
                    if cursor.assembled(&record) {
                        self.verify_assembled(&record).await?;
                    }
                    return Ok(Some(record));
                }
                None if cursor.at_eof => {
                    // Read in another process, a sealed segment ends at its last
                    // record whatever follows it (zeros, an earlier use's bytes, a
                    // write a crash cut short); the writer's process knows it synced
                    // the whole segment, so there a torn tail is damage.
                    let decoder = &cursor.engine.decoder;
                    if decoder.has_incomplete_tail() && !cursor.engine.is_live() {
                        let cut = Error::Corruption {
                            offset: decoder.valid_prefix_len(),
                            bytes: cursor.engine.read_end() - decoder.valid_prefix_len(),
                            kind: crate::decoder::error::CorruptionKind::TruncatedTail,
                        };
                        return Err(bad_segment(segment, cut));
                    }
                    if cursor.engine.is_live() {
                        // The end of what the file held, read through the file the
                        // reader opened: if a purge took the segment and its file
                        // was recycled (written over as a later segment), that end
                        // came early, and records it never returned went.
                        let purged = crate::logdir::recovery::read_purged(&self.dir).await?;
                        if purged.segment == segment && purged > self.returned_in_segment() {
                            return Err(Error::Purged { segment });
                        }
                    }
                    self.next_segment();
                    continue;
                }
                None => {}
            }
            let readable = self.readable().await?;
            let live = matches!(self.source, Source::Files) && !readable.sealed;
            let cursor = self.cursor.as_mut().expect("opened above");
            if readable.sealed && std::mem::replace(&mut cursor.read_live, false) {
                // Sealed since the bytes past the last record were read: read them
                // again (see `Cursor::read_live`), or records the writer put there
                // after the read would be skipped with the space they filled.
                self.go_back().await?;
                continue;
            }
            if live && cursor.engine.passed_unwritten() {
                // Past the last record into space the writer has not reached
                // (preallocated zeros, a recycled file's earlier use): back to that
                // record's end, to read again once the writer wrote more, or once a
                // later segment shows this one is sealed.
                self.go_back().await?;
                // Read about what the writer added since the last time here (twice
                // it), not a whole chunk of the space it has not reached.
                let cursor = self.cursor.as_mut().expect("opened above");
                let end = cursor.engine.read_end();
                let added = cursor.live_end.map_or(0, |last| end.saturating_sub(last));
                cursor.live_end = Some(end);
                cursor.chunk = (2 * added as usize)
                    .next_power_of_two()
                    .clamp(LIVE_READ_CHUNK, READ_CHUNK);
                // `readable` looked for the next segment just now (a `stat` per poll
                // spared): only a hole remains to be seen.
                if self.look_again() || self.later_segment_than_next().await? {
                    continue;
                }
                if self.stop_here() {
                    return Ok(None);
                }
                self.wait().await;
                continue;
            }
            let chunk = cursor.chunk;
            let room = match readable.limit {
                Some(limit) => limit
                    .saturating_sub(cursor.engine.read_end())
                    .min(chunk as u64) as usize,
                None => chunk,
            };
            if room > 0 && self.fill(room).await? > 0 {
                continue;
            }
            if self.cursor.as_ref().is_some_and(|cursor| cursor.at_eof) {
                // A purge took the segment after the reader returned its last record.
                continue;
            }
            if readable.sealed {
                // Sealed before the read above: the read saw all of it.
                let cursor = self.cursor.as_mut().expect("opened above");
                cursor.at_eof = true;
                continue;
            }
            if self.later_segment_exists().await? {
                // The writer moved on after the read above, and may have written the
                // segment's last bytes in between: read again from the last record
                // (see `Cursor::read_live`), now that nothing more can come, before
                // taking its end for the end.
                let cursor = self.cursor.as_mut().expect("opened above");
                if std::mem::replace(&mut cursor.read_live, false) {
                    self.go_back().await?;
                }
                if self.fill(READ_CHUNK).await? == 0 {
                    self.cursor.as_mut().expect("opened above").at_eof = true;
                }
                continue;
            }
            if live {
                // The bytes of a record not yet complete may still change in a file
                // written in place: read them again after the wait.
                let cursor = self.cursor.as_ref().expect("opened above");
                if cursor.engine.past_last_record() {
                    self.go_back().await?;
                    // What was read past the last record may be older than the
                    // writer's last write (zeros a decoder skips to a block's end
                    // leave no trace), so `caught_up` reads it again once.
                    if self.look_again() {
                        continue;
                    }
                }
            }
            if self.stop_here() {
                return Ok(None);
            }
            self.wait().await;
        }
    }

    /// Whether `error`, met decoding the current segment, may be a write still in
    /// progress to be read again (in another process, in a segment not sealed, and
    /// not met there already): then it is noted as met.
    pub(super) async fn is_live_error(&mut self, error: &CodecError) -> Result<bool, Error> {
        let cursor = self.cursor.as_ref().expect("a segment is open");
        if !cursor.engine.may_doubt(error) || self.readable().await?.sealed {
            return Ok(false);
        }
        let cursor = self.cursor.as_mut().expect("a segment is open");
        Ok(cursor.engine.doubt(error))
    }

    /// Goes back to the end of the current segment's last record (see
    /// `LogDecoder::rewind`): the decoder, the file and the guard's window. The
    /// guard checks the file before the next read.
    pub(super) async fn go_back(&mut self) -> Result<(), Error> {
        let cursor = self.cursor.as_mut().expect("a segment is open");
        cursor.engine.go_back();
        cursor.reached_end = true;
        Ok(())
    }

    /// Reads up to `max` more bytes of the current segment into its buffer; 0 at
    /// the end of the file. When the last read reached the file's end, checks first
    /// that the file is still the one read (another process), as a
    /// [`LogTailer`](crate::LogTailer) does after each wait: the writer may have cut
    /// and regrown it since, and once new bytes are read a rewrite before them can
    /// no longer be seen. Reads that got all they asked for skip the check, so
    /// catching up costs nothing more.
    pub(super) async fn fill(&mut self, max: usize) -> Result<usize, Error> {
        let segment = self.segment;
        let cursor = self.cursor.as_mut().expect("a segment is open");
        if cursor.at_eof {
            return Ok(0);
        }
        if cursor.reached_end && cursor.engine.is_live() {
            let returned_end = cursor.engine.decoder.rewind_point();
            let moved = match cursor.engine.verify().await {
                Ok(moved) => moved,
                Err(Error::LogChanged(LogChange::Removed | LogChange::Replaced))
                    if self.purged_to_here().await? =>
                {
                    // A purge up to the reader's position took the segment (deleted,
                    // or renamed into the pool of files to recycle): every record
                    // it held was returned, so it is over.
                    self.go_back().await?;
                    let cursor = self.cursor.as_mut().expect("a segment is open");
                    cursor.reached_end = false;
                    cursor.at_eof = true;
                    return Ok(0);
                }
                Err(e) => return Err(changed_under_reader(segment, returned_end, e)),
            };
            if moved {
                // Bytes read after the last record changed (a write in place went
                // on): read them again, now, from that record's end; the bytes
                // before it were just checked.
                self.go_back().await?;
                self.cursor.as_mut().expect("a segment is open").reached_end = false;
            }
        }
        let cursor = self.cursor.as_mut().expect("a segment is open");
        let read_end = cursor.engine.read_end();
        let before = cursor.engine.buf.len();
        cursor.engine.buf.reserve(max);
        let n = read_at(&cursor.file, &mut cursor.engine.buf, read_end, max).await?;
        cursor.engine.note_read(before, n);
        #[cfg(test)]
        seal_race::after_read(segment, cursor.engine.read_end());
        cursor.reached_end = n < max;
        if n == max {
            // A full read: catching up, so read in larger pieces again.
            cursor.chunk = (cursor.chunk * 2).min(READ_CHUNK);
        }
        Ok(n)
    }

    /// Opens the current segment at the reader's offset; `false` when it does not
    /// exist yet. A segment a purge took with nothing in it left to return is
    /// passed: the next one is opened.
    pub(super) async fn open_segment(&mut self) -> Result<bool, Error> {
        loop {
            match self.try_open_segment().await? {
                Some(opened) => return Ok(opened),
                None => self.next_segment(),
            }
        }
    }

    /// [`open_segment`](Self::open_segment) once: `None` when the segment was
    /// purged with nothing left in it that the reader has not returned.
    pub(super) async fn try_open_segment(&mut self) -> Result<Option<bool>, Error> {
        if let Source::Writer { inner, .. } = &self.source {
            let catalog = inner.catalog();
            if self.segment < catalog.first {
                return Err(Error::Purged {
                    segment: self.segment,
                });
            }
            if self.segment > catalog.active {
                return Ok(Some(false));
            }
        }
        let path = segment_path(&self.dir, self.segment);
        let file = {
            let path = path.clone();
            crate::logdir::fs::blocking(move || crate::open::open_to_read(&path)).await
        };
        let file = match file {
            Ok(file) => Arc::new(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match self.source {
                    Source::Writer { .. } => {
                        self.check_truncations()?;
                        Err(e.into())
                    }
                    Source::Files => self.missing_segment().await,
                };
            }
            Err(e) => return Err(e.into()),
        };
        let read_to = block_start(self.start_offset);
        let guard = match self.source {
            Source::Writer { .. } => None,
            Source::Files => {
                let segment = self.segment;
                let opened = Arc::clone(&file);
                let guard = tokio::task::spawn_blocking(move || {
                    FileGuard::new(path, &opened.metadata()?, read_to)
                })
                .await
                .map_err(|join| Error::Io(std::io::Error::other(join)))?
                .map_err(|e| changed_under_reader(segment, read_to, e))?;
                Some(guard)
            }
        };
        // RocksDB's dialect with the segment's number: a legacy segment reads as
        // LevelDB's reader reads it, a recyclable one (recycling) ends where the
        // bytes of its file's earlier use begin. Pebble's dialect with it in a
        // directory of Pebble's segments: a sealed one ends at its EOF trailer, a
        // recycled one where its file's earlier use (another number) begins.
        let decoder = crate::logdir::dialect::segment_decoder(self.segment, self.pebble)
            .start_offset(self.start_offset)
            .build();
        let mut engine = Follow::new(decoder);
        if let Some(guard) = guard {
            engine.watch(guard);
        }
        self.cursor = Some(Cursor {
            file,
            engine,
            at_eof: false,
            reached_end: false,
            chunk: READ_CHUNK,
            live_end: None,
            read_live: matches!(self.source, Source::Files),
        });
        Ok(Some(true))
    }

    /// A record put together from more than one read: the file must still hold
    /// its bytes (see `FileGuard::span`), else the log was rewritten under it.
    pub(super) async fn verify_assembled(&mut self, record: &DirRecord) -> Result<(), Error> {
        let cursor = self.cursor.as_mut().expect("a segment is open");
        match cursor
            .engine
            .guard_mut()
            .verify_span(record.start.offset, record.end.offset)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.changed_under(e).await),
        }
    }

    /// What damage the decoder met in another process means: if bytes read since
    /// the last record returned changed in a sealed segment (where no write in
    /// place goes on), the log was rewritten under the reader (reading them joined
    /// two versions of the file), not damaged. In a live segment the damage was
    /// read twice, and the guard's check between the two reads saw no rewrite.
    pub(super) async fn damage_or_change(&mut self, error: Error) -> Error {
        let segment = self.segment;
        match self.readable().await {
            Ok(readable) if readable.sealed => {}
            _ => return bad_segment(segment, error),
        }
        let cursor = self.cursor.as_mut().expect("a segment is open");
        if !cursor.engine.is_live() {
            return bad_segment(segment, error);
        }
        let to = cursor.engine.read_end();
        let from = cursor.engine.decoder.rewind_point().min(to);
        match cursor.engine.guard_mut().verify_span(from, to).await {
            Ok(()) => bad_segment(segment, error),
            Err(change) => self.changed_under(change).await,
        }
    }

    /// A change a span check found, as the reader reports it: a purge past its
    /// position ([`Error::Purged`]), else the log cut or rewritten under it.
    pub(super) async fn changed_under(&mut self, change: Error) -> Error {
        if let Err(purged) = self.purged_to_here().await {
            return purged;
        }
        let segment = self.segment;
        let read_to = self
            .cursor
            .as_ref()
            .map_or(0, |cursor| cursor.engine.read_end());
        let position = match change {
            Error::LogChanged(LogChange::Rewritten { offset }) => offset,
            Error::LogChanged(LogChange::Shrunk { len, .. }) => len,
            other => return other,
        };
        Error::TruncatedUnderReader {
            position: LogPosition::new(segment, position),
            reader: LogPosition::new(segment, read_to),
        }
    }

    /// After going back, in `caught_up` (`no_wait`): read again at once, the first
    /// time, since the bytes that made it go back may have been read before the
    /// writer wrote there.
    pub(super) fn look_again(&mut self) -> bool {
        let cursor = self.cursor.as_mut().expect("a segment is open");
        cursor.engine.look_again(self.no_wait)
    }

    /// At the end of what is readable now: whether to return rather than wait (a
    /// reader that does not follow, or `caught_up`, which learns so in `at_end`).
    pub(super) fn stop_here(&mut self) -> bool {
        self.at_end = self.follow && self.no_wait;
        !self.follow || self.no_wait
    }
}

/// What the guard of `segment`'s file found, as a LogDir reader reports it: the
/// log was cut (at the segment's new length, or at its start when the file is gone
/// or another) or rewritten (at the first byte that changed) below `returned_end`,
/// the end of the last record the reader returned (where it started, before any).
fn changed_under_reader(segment: u64, returned_end: u64, error: Error) -> Error {
    let position = |offset| Error::TruncatedUnderReader {
        position: LogPosition::new(segment, offset),
        reader: LogPosition::new(segment, returned_end),
    };
    match error {
        Error::LogChanged(LogChange::Shrunk { len, .. }) => position(len),
        Error::LogChanged(LogChange::Replaced | LogChange::Removed) => position(0),
        Error::LogChanged(LogChange::Rewritten { offset }) => position(offset),
        other => other,
    }
}

fn bad_segment(segment: u64, error: Error) -> Error {
    match error {
        Error::Io(e) => Error::Io(e),
        other => Error::BadSegment {
            segment,
            source: Box::new(other),
        },
    }
}

// The re-read at the seal, with its events ordered by a hook in `fill`.
#[cfg(test)]
#[path = "seal_race.rs"]
mod seal_race;
