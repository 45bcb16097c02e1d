//! The follower engine: decoding a file that may still be growing, or being written
//! in place, with the rules a follower keeps. [`LogTailer`](crate::LogTailer)
//! (`reader/mod.rs`, one file) and the directory's
//! [`DirReader`](crate::logdir::DirReader) (`logdir/reader.rs`, one segment at a
//! time) each drive one; they own the file, how they read it and how they wait, and
//! ask the engine what the bytes mean.
//!
//! A followed file is watched (a [`FileGuard`]) and read live (`LogDecoder::set_live`):
//!
//! | met while following                              | rule                                                            |
//! |--------------------------------------------------|-----------------------------------------------------------------|
//! | damage past the last record                      | doubted once ([`LiveDoubt`]): go back, read again after a wait   |
//! | the same damage, read again                      | an error, or in a mode that skips damage believed ([`believe`](Follow::believe)): reported once, and the record after it returned |
//! | space the writer has not reached (zeros, an earlier use's bytes) | go back to the last record's end, read again after a wait |
//! | the file's end, with bytes read past the last record | go back: a record not yet complete may still change         |
//! | after going back, in `caught_up`                 | look again once at once: what was read may predate the writer's last write |
//! | a record put together from more than one read    | the file must still hold every byte of it ([`span`](Follow::span)) |
//! | each read                                        | its bytes noted in the guard's window, kept from the last record's end |
//! | a read after one that reached the file's end     | the guard's check first ([`check`](Follow::check)): same file, not shrunk, same bytes up to the last record; bytes after it that changed: go back |
//!
//! The engine keeps the decoder and the bytes read but not yet decoded: they start
//! at the decoder's offset and end at [`read_end`](Follow::read_end), where the
//! caller's next read goes; after [`go_back`](Follow::go_back) that is the offset it
//! returns.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

use crate::decoder::error::CodecError;
use crate::decoder::follow::LiveDoubt;
use crate::decoder::LogDecoder;
use crate::error::Error;
use crate::format::Position;
use crate::reader::guard::{Check, Checked, FileGuard, Span};

/// One followed (or plainly read) log: its decoder, the bytes read ahead of it, and
/// for a followed file the guard and the doubt.
#[derive(Debug)]
pub(crate) struct Follow {
    pub(crate) decoder: LogDecoder,
    /// Bytes read and not yet decoded, from the decoder's offset on.
    pub(crate) buf: BytesMut,
    /// A followed file: what tells that it changed under the reader. Its presence
    /// is what makes the file live (written in place, its bytes past the last
    /// record not final).
    guard: Option<FileGuard>,
    /// Where the last read began: a record that starts before it was put together
    /// from more than one read.
    read_from: u64,
    /// Damage met past the last record, read again before it is believed.
    doubted: LiveDoubt,
    /// In `caught_up`: whether it went back once already, so that what it decodes
    /// now was read after it began.
    looked_again: bool,
}

impl Follow {
    /// A log read with `decoder`, not watched: nothing is live.
    pub(crate) fn new(decoder: LogDecoder) -> Follow {
        Follow {
            decoder,
            buf: BytesMut::new(),
            guard: None,
            read_from: 0,
            doubted: LiveDoubt::default(),
            looked_again: false,
        }
    }

    /// Follows a file that `guard` watches: read live from here on.
    pub(crate) fn watch(&mut self, guard: FileGuard) {
        self.decoder.set_live();
        self.guard = Some(guard);
    }

    /// Whether the file is followed live (watched, maybe written in place).
    pub(crate) fn is_live(&self) -> bool {
        self.guard.is_some()
    }

    /// Just past the bytes read: where the next read starts.
    pub(crate) fn read_end(&self) -> u64 {
        self.decoder.offset() + self.buf.len() as u64
    }

    /// Decodes what was read (`eof`: all of it is there).
    pub(crate) fn decode(&mut self, eof: bool) -> Result<Option<Bytes>, CodecError> {
        if eof {
            self.decoder.decode_eof(&mut self.buf)
        } else {
            self.decoder.decode(&mut self.buf)
        }
    }

    /// Whether `error`, just decoded, may be a write still in progress: a live
    /// file's damage (not a failed read). The caller asks [`doubt`](Self::doubt)
    /// once it knows the file can still change.
    pub(crate) fn may_doubt(&self, error: &CodecError) -> bool {
        self.is_live() && !matches!(error, CodecError::Io(_))
    }

    /// Whether `error` (which [`may_doubt`](Self::may_doubt)) is to be read again,
    /// after a [`go_back`](Self::go_back): the first time it is met past the last
    /// record (see [`LiveDoubt`]). Notes it as met.
    pub(crate) fn doubt(&mut self, error: &CodecError) -> bool {
        self.doubted.read_again(self.decoder.rewind_point(), error)
    }

    /// `error` (which [`may_doubt`](Self::may_doubt)) was met again where it was
    /// doubted: believe it. Whether the decoder skips damage (`SkipCorrupted`,
    /// `PointInTime`, which hold it back while live): the caller then goes back and
    /// decodes again, and the damage is reported as the mode says. A decoder that
    /// fails on damage has nothing to believe: the error stands.
    pub(crate) fn believe(&mut self, error: &CodecError) -> bool {
        self.decoder.believe(error)
    }

    /// The decoder just returned a record: what was doubted is forgotten; its
    /// position.
    pub(crate) fn returned(&mut self) -> Position {
        self.doubted.clear();
        self.decoder
            .last_record()
            .expect("a returned record has a position")
    }

    /// Whether a record starting at `start` was put together from more than one
    /// read of a watched file (it starts before the last read did): the file must
    /// then still hold it ([`span`](Self::span)). A record inside one read is what
    /// the file held when it was read.
    pub(crate) fn assembled(&self, start: u64) -> bool {
        self.guard.is_some() && start < self.read_from
    }

    /// The check that the file still holds `start..end` (see `FileGuard::span`).
    pub(crate) fn span(&mut self, start: u64, end: u64) -> Span {
        self.guard_mut().span(start, end)
    }

    /// Notes the `n` bytes just read into `buf` after its first `before`: the
    /// guard's window keeps them, and a block before the last record's end.
    pub(crate) fn note_read(&mut self, before: usize, n: usize) {
        if let Some(guard) = self.guard.as_mut() {
            guard.read(&self.buf[before..before + n], self.decoder.rewind_point());
        }
        if n > 0 {
            self.read_from = self.decoder.offset() + before as u64;
        }
    }

    /// Goes back to the end of the last record (see `LogDecoder::rewind`): the
    /// decoder, the bytes read and the guard's window. Returns the offset the
    /// caller's next read must start at.
    pub(crate) fn go_back(&mut self) -> u64 {
        let point = self.decoder.rewind();
        self.buf.clear();
        self.read_from = point;
        if let Some(guard) = self.guard.as_mut() {
            guard.rewind(point);
        }
        point
    }

    /// Whether a live file's bytes were read past the last record (part of a
    /// record, or more): at the file's end they may still change, and are read
    /// again after a [`go_back`](Self::go_back).
    pub(crate) fn past_last_record(&self) -> bool {
        self.is_live() && self.read_end() > self.decoder.rewind_point()
    }

    /// Whether the decoder went past the end of what a live file's writer has
    /// written (zeros, an earlier use's bytes, a write cut short).
    pub(crate) fn passed_unwritten(&self) -> bool {
        self.is_live() && self.decoder.passed_unwritten()
    }

    /// A read that may stop at the end of what is there (`caught_up`) begins.
    pub(crate) fn start_looking(&mut self) {
        self.looked_again = false;
    }

    /// After going back, when not waiting (`no_wait`, in `caught_up`): read again
    /// at once, the first time, since the bytes that made it go back may have been
    /// read before the writer wrote there.
    pub(crate) fn look_again(&mut self, no_wait: bool) -> bool {
        no_wait && !std::mem::replace(&mut self.looked_again, true)
    }

    /// The guard's check before reading on after a read that reached the file's
    /// end (after a wait): the file must still be the one opened, at least as long
    /// as what was read, and hold the same bytes before the last record's end.
    pub(crate) fn check(&mut self) -> Option<Check> {
        let read_end = self.read_end();
        let returned_end = self.decoder.rewind_point();
        Some(self.guard.as_mut()?.check(read_end, returned_end))
    }

    /// What a check that passed found: the guard's window back, and when bytes
    /// read after the last record changed (a write in place went on), back to
    /// that record's end to read them again: then the offset to read from, as
    /// [`go_back`](Self::go_back) returns it.
    pub(crate) fn checked(&mut self, checked: Checked) -> Option<u64> {
        self.restore(checked.recent);
        checked.moved.then(|| self.go_back())
    }

    /// [`check`](Self::check), run from the page cache or else on a blocking
    /// thread: whether bytes read after the last record changed (the caller then
    /// goes back to read them again).
    pub(crate) async fn verify(&mut self) -> Result<bool, Error> {
        let read_end = self.read_end();
        let returned_end = self.decoder.rewind_point();
        self.guard_mut().verify(read_end, returned_end).await
    }

    /// Gives the guard its window back after a check that ran elsewhere.
    pub(crate) fn restore(&mut self, recent: BytesMut) {
        if let Some(guard) = self.guard.as_mut() {
            guard.restore(recent);
        }
    }

    /// The guard, for checks the caller runs its own way.
    pub(crate) fn guard_mut(&mut self) -> &mut FileGuard {
        self.guard.as_mut().expect("only a watched file is checked")
    }
}
