//! A log's identity and history: the [`LogId`] that tells one log from another,
//! and the [`Epoch`]s that tell this log's records from a fork's.
//!
//! Bytes alone cannot tell two logs apart: a replica of log A connected to log B,
//! or a former primary whose last records never reached the replica that took over,
//! holds segments that look like any other. So every log directory keeps, in one
//! small file (`HISTORY`), a random 128-bit id made when the log is created and the
//! list of its epochs, each starting at a [`LogPosition`]:
//!
//! | event                                      | history                               |
//! |--------------------------------------------|---------------------------------------|
//! | the log is created (or an older directory opened by its writer) | epoch 1 at its first segment's start |
//! | [`Replica::promote`](crate::Replica::promote) | a new epoch at the replica's end    |
//! | [`LogDir::truncate_after`](crate::LogDir::truncate_after) removes records | epochs after the cut dropped, a new epoch at the cut |
//!
//! Each epoch has a number (one more than the last the log had) and a random id, so
//! two logs that each started an epoch numbered 3 at the same position still have
//! two different epochs. Two copies of one log share their history up to where they
//! forked: the end of the last epoch both have, as each of them holds it (the
//! primary answers where the replica's latest shared epoch ends on its own log, as
//! Kafka's leader epochs do).
//!
//! # The file
//!
//! ```text
//! walcodec history 1
//! log 5f0c2a1e9b7d4c3a8e6f1b2d3c4a5e6f
//! epoch 1 9a3b5c7d1e2f4a6b 000001:0
//! epoch 2 0c1d2e3f4a5b6c7d 000003:1234
//! truncate 000003:1234            only while a truncation is under way
//! crc 1a2b3c4d                    crc32c of every line above, hex
//! ```
//!
//! It is replaced as the crate's other markers are: a new file written in full and
//! synced under a temporary name, renamed over the old one, the directory synced.
//! A power cut at any byte leaves the old file or the new one under the name; the
//! checksum refuses a file damaged otherwise (a disk error), never misreads it.
//!
//! A truncation writes its new epoch and the cut (`truncate`) in one replacement,
//! before it cuts anything; once the cut is done, a second replacement drops the
//! `truncate` line. A crash in between is finished by the next open: the new epoch
//! never stands without the cut, nor the cut without the epoch.
//!
//! A directory made by an older version has no `HISTORY`: its writer
//! ([`LogDir::open`](crate::LogDir::open)) creates one at the next open, with a
//! new id and one epoch at the start of its oldest segment; a
//! [`Replica`](crate::Replica) makes none of its own: it takes its primary's id
//! and history in the handshake, durably before its first record, and follows
//! the primary's epochs from then on (see [`Replica::sync_from`](crate::Replica::sync_from)).

use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::Path;

use super::fs::DirStorage;
use crate::log_id::LogId;
use crate::position::LogPosition;

/// The file holding a log directory's id and history.
pub(crate) const HISTORY_FILE: &str = "HISTORY";
const HISTORY_TMP: &str = "HISTORY.tmp";

/// The first line of the file: its format and version.
const FIRST_LINE: &str = "walcodec history 1";

/// The most epochs a history holds: each truncation and promotion adds one, and a
/// replica receives its primary's whole history in the handshake, so the count is
/// bounded (about 1.3 MiB on the wire at most).
pub(crate) const MAX_EPOCHS: usize = 1 << 16;

/// The largest `HISTORY` file read: [`MAX_EPOCHS`] lines and the rest.
const MAX_FILE_BYTES: u64 = (MAX_EPOCHS as u64 + 8) * 80;

/// One epoch of a log's [`History`]: the records from `start` on, up to the next
/// epoch's start, were appended by one writer in one line of descent.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Epoch {
    /// One more than the number of the epoch before it; the first is 1.
    pub number: u64,
    /// Random, made with the epoch: two epochs with one number (made by two
    /// writers that each took over) are told apart by it.
    pub id: u64,
    /// Where its records start.
    pub start: LogPosition,
}

impl Epoch {
    /// A new epoch numbered `number` starting at `start`.
    pub(crate) fn new(number: u64, start: LogPosition) -> Epoch {
        let mut bytes = [0u8; 8];
        fill_random(&mut bytes);
        Epoch {
            number,
            id: u64::from_le_bytes(bytes),
            start,
        }
    }
}

/// A log's epochs, oldest first ([`LogDir::history`](crate::LogDir::history)).
/// Starts never decrease; numbers increase.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct History {
    /// The epochs, oldest first.
    pub epochs: Vec<Epoch>,
}

impl History {
    /// The latest epoch: the one appends go on in.
    pub fn current(&self) -> Option<&Epoch> {
        self.epochs.last()
    }

    /// The number the next epoch gets.
    fn next_number(&self) -> u64 {
        self.current().map_or(1, |e| e.number.saturating_add(1))
    }

    /// Drops the epochs that start after `end` (none of their records is held);
    /// whether any was.
    pub(crate) fn trim_after(&mut self, end: LogPosition) -> bool {
        let before = self.epochs.len();
        self.epochs.retain(|e| e.start <= end);
        self.epochs.len() != before
    }

    /// Starts a new epoch at `start` (after dropping those that start after it).
    pub(crate) fn begin(&mut self, start: LogPosition) -> Epoch {
        // Numbered past every epoch the log had, those dropped here included.
        let number = self.next_number();
        self.trim_after(start);
        let epoch = Epoch::new(number, start);
        self.epochs.push(epoch);
        // A long-lived log that truncates often: the oldest epochs go first, so the
        // history stays within what a handshake carries.
        if self.epochs.len() > MAX_EPOCHS {
            let extra = self.epochs.len() - MAX_EPOCHS;
            self.epochs.drain(..extra);
        }
        epoch
    }

    /// Whether the epochs are well formed: numbers increasing, starts never
    /// decreasing, at most [`MAX_EPOCHS`].
    pub(crate) fn is_well_formed(&self) -> bool {
        self.epochs.len() <= MAX_EPOCHS
            && self
                .epochs
                .windows(2)
                .all(|w| w[0].number < w[1].number && w[0].start <= w[1].start)
    }
}

/// Where two copies of one log stop sharing their history: the end of the latest
/// epoch of the replica (among those it holds records of, starting at or before
/// `replica_end`) that the primary has too, as each of them holds it: on the
/// primary, the start of its next epoch or its end; on the replica, the same.
/// [`LogPosition::START`] when they share no epoch.
///
/// A replica whose last record ends past this point holds records the primary's
/// history does not: it diverged.
pub(crate) fn common_end(
    primary: &History,
    primary_end: LogPosition,
    replica: &History,
    replica_end: LogPosition,
) -> LogPosition {
    let held = replica
        .epochs
        .iter()
        .take_while(|e| e.start <= replica_end)
        .count();
    for r in (0..held).rev() {
        let Some(p) = primary.epochs.iter().position(|e| *e == replica.epochs[r]) else {
            continue;
        };
        let on_primary = primary
            .epochs
            .get(p + 1)
            .map_or(primary_end, |next| next.start);
        let on_replica = replica
            .epochs
            .get(r + 1)
            .filter(|_| r + 1 < held)
            .map_or(replica_end, |next| next.start);
        return on_primary.min(on_replica);
    }
    LogPosition::START
}

/// What `HISTORY` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistoryFile {
    pub(crate) log_id: LogId,
    pub(crate) history: History,
    /// A truncation decided and not yet known to be done: cut the log after it.
    pub(crate) truncate: Option<LogPosition>,
}

impl HistoryFile {
    /// A new log's: a new id, one epoch at `start`.
    pub(crate) fn new(start: LogPosition) -> HistoryFile {
        let mut history = History::default();
        history.begin(start);
        HistoryFile {
            log_id: random_log_id(),
            history,
            truncate: None,
        }
    }

    fn encode(&self) -> String {
        use std::fmt::Write as _;
        let mut text = format!("{FIRST_LINE}\nlog {}\n", self.log_id);
        for e in &self.history.epochs {
            let _ = writeln!(text, "epoch {} {:016x} {}", e.number, e.id, e.start);
        }
        if let Some(cut) = self.truncate {
            let _ = writeln!(text, "truncate {cut}");
        }
        let crc = crc32c::crc32c(text.as_bytes());
        let _ = writeln!(text, "crc {crc:08x}");
        text
    }

    fn decode(text: &str) -> io::Result<HistoryFile> {
        // Exactly as written: one newline after the checksum, nothing else.
        let text = text
            .strip_suffix('\n')
            .ok_or_else(|| invalid("no checksum line".into()))?;
        let body_len = text
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or_else(|| invalid("no checksum line".into()))?;
        let (body, last) = text.split_at(body_len);
        let crc = last
            .strip_prefix("crc ")
            .filter(|hex| hex.len() == 8)
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .ok_or_else(|| invalid("no checksum line".into()))?;
        if crc != crc32c::crc32c(body.as_bytes()) {
            return Err(invalid("checksum mismatch".into()));
        }
        let mut lines = body.lines();
        if lines.next() != Some(FIRST_LINE) {
            return Err(invalid("not a walcodec history of a known version".into()));
        }
        let log_id: LogId = lines
            .next()
            .and_then(|l| l.strip_prefix("log "))
            .ok_or_else(|| invalid("no log id".into()))?
            .parse()?;
        let mut history = History::default();
        let mut truncate = None;
        for line in lines {
            let mut words = line.split(' ');
            match (words.next(), words.next(), words.next(), words.next()) {
                (Some("epoch"), Some(number), Some(id), Some(start)) if truncate.is_none() => {
                    let number = number
                        .parse::<u64>()
                        .map_err(|_| invalid(format!("bad epoch number {number:.24?}")))?;
                    let id = u64::from_str_radix(id, 16)
                        .map_err(|_| invalid(format!("bad epoch id {id:.24?}")))?;
                    let start = start
                        .parse()
                        .map_err(|e: super::ParsePositionError| invalid(e.to_string()))?;
                    history.epochs.push(Epoch { number, id, start });
                }
                (Some("truncate"), Some(cut), None, None) if truncate.is_none() => {
                    truncate = Some(
                        cut.parse()
                            .map_err(|e: super::ParsePositionError| invalid(e.to_string()))?,
                    );
                }
                _ => return Err(invalid(format!("unexpected line {line:.80?}"))),
            }
            if words.next().is_some() {
                return Err(invalid(format!("unexpected line {line:.80?}")));
            }
        }
        if history.epochs.is_empty() || !history.is_well_formed() {
            return Err(invalid("epochs out of order".into()));
        }
        Ok(HistoryFile {
            log_id,
            history,
            truncate,
        })
    }
}

/// Reads `dir`'s `HISTORY` (`None` when there is none). Blocking.
pub(crate) fn read(dir: &Path) -> io::Result<Option<HistoryFile>> {
    use std::io::Read;
    let file = match std::fs::File::open(dir.join(HISTORY_FILE)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(invalid("larger than a history can be".into()));
    }
    HistoryFile::decode(&text).map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "unreadable {HISTORY_FILE} file in the log directory {}: {e}",
                dir.display()
            ),
        )
    })
}

/// Replaces `dir`'s `HISTORY` with `file`, durably: written and synced under a
/// temporary name, renamed over the old one, the directory synced. Blocking.
pub(crate) fn write(dir: &Path, file: &HistoryFile, fs: &dyn DirStorage) -> io::Result<()> {
    let tmp = dir.join(HISTORY_TMP);
    // A temporary file left by a crash before its rename: never the history.
    match fs.remove(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut out = fs.create(&tmp)?;
    out.write_all(file.encode().as_bytes())?;
    fs.sync_file(&out)?;
    drop(out);
    fs.rename(&tmp, &dir.join(HISTORY_FILE))?;
    fs.sync_dir(dir)
}

/// A new random log id.
pub(crate) fn random_log_id() -> LogId {
    let mut bytes = [0u8; 16];
    fill_random(&mut bytes);
    // Zero means "no id" on the wire: never made.
    LogId::from_u128(u128::from_le_bytes(bytes).max(1))
}

/// Fills `out` with random bytes: the kernel's (`/dev/urandom`), else std's
/// randomly keyed hasher over the time, the process id and a counter.
fn fill_random(out: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut urandom) = std::fs::File::open("/dev/urandom") {
        if urandom.read_exact(out).is_ok() {
            return;
        }
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    for chunk in out.chunks_mut(8) {
        // Each `RandomState` is keyed from the OS's randomness once per thread and
        // then stepped: mixed with the time and a counter, no two calls repeat.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        hasher.write_u32(std::process::id());
        if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            hasher.write_u128(now.as_nanos());
        }
        hasher.write_usize(chunk.as_ptr() as usize);
        let bytes = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

fn invalid(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(number: u64, id: u64, segment: u64, offset: u64) -> Epoch {
        Epoch {
            number,
            id,
            start: LogPosition::new(segment, offset),
        }
    }

    fn history(epochs: &[Epoch]) -> History {
        History {
            epochs: epochs.to_vec(),
        }
    }

    #[test]
    fn the_file_round_trips_and_damage_is_refused() {
        let mut file = HistoryFile::new(LogPosition::new(1, 0));
        file.history.begin(LogPosition::new(3, 1234));
        file.truncate = Some(LogPosition::new(3, 1234));
        let text = file.encode();
        assert_eq!(HistoryFile::decode(&text).unwrap(), file);
        for i in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[i] ^= 0x01;
            if let Ok(damaged) = String::from_utf8(bytes) {
                assert!(HistoryFile::decode(&damaged).is_err(), "byte {i}");
            }
            assert!(HistoryFile::decode(&text[..i]).is_err(), "cut at {i}");
        }
    }

    #[test]
    fn ids_differ() {
        assert_ne!(random_log_id(), random_log_id());
        let id = random_log_id();
        assert_eq!(id.to_string().parse::<LogId>().unwrap(), id);
        assert!("xyz".parse::<LogId>().is_err());
    }

    #[test]
    fn the_common_end_is_where_the_latest_shared_epoch_ends() {
        let (e1, e2, e3) = (epoch(1, 7, 1, 0), epoch(2, 8, 2, 100), epoch(3, 9, 3, 50));
        let end = LogPosition::new(4, 10);
        // The same history: the shorter end.
        let p = history(&[e1, e2]);
        assert_eq!(
            common_end(&p, end, &p, LogPosition::new(2, 500)),
            LogPosition::new(2, 500)
        );
        // A replica two promotions behind: where its latest epoch ends on the
        // primary, or its own end when that is sooner.
        let p = history(&[e1, e2, e3]);
        let stale = history(&[e1]);
        assert_eq!(
            common_end(&p, end, &stale, LogPosition::new(5, 0)),
            LogPosition::new(2, 100)
        );
        assert_eq!(
            common_end(&p, end, &stale, LogPosition::new(1, 9)),
            LogPosition::new(1, 9)
        );
        // A fork: the replica's own epoch 2 (another id) is not the primary's.
        let forked = history(&[e1, epoch(2, 99, 2, 100)]);
        assert_eq!(
            common_end(&p, end, &forked, LogPosition::new(2, 900)),
            LogPosition::new(2, 100)
        );
        // Epochs the replica holds no record of are not its.
        let ahead = history(&[e1, epoch(2, 99, 9, 0)]);
        assert_eq!(
            common_end(&p, end, &ahead, LogPosition::new(1, 50)),
            LogPosition::new(1, 50)
        );
        // Nothing shared.
        assert_eq!(
            common_end(&p, end, &history(&[epoch(1, 1, 1, 0)]), end),
            LogPosition::START
        );
    }

    #[test]
    fn a_new_epoch_drops_those_after_it() {
        let mut h = history(&[epoch(1, 1, 1, 0), epoch(2, 2, 3, 0)]);
        let e = h.begin(LogPosition::new(2, 10));
        assert_eq!(e.number, 3, "numbered past the epoch dropped");
        assert_eq!(h.epochs.len(), 2);
        assert_eq!(h.epochs[1], e);
        assert!(h.is_well_formed());
    }
}
