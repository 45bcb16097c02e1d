//! The primary's side: [`LogDir::serve_replica`].

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::handshake::{self, RecordCheck};
use super::wire::{self, Hello, Identity, Message, Refusal, PROTOCOL_VERSION};
use crate::error::Error;
use crate::logdir::history::Epoch;
use crate::logdir::quorum::Member;
use crate::logdir::ship::{PinRefused, SegmentPin, ShipSource};
use crate::logdir::LogDir;
use crate::position::LogPosition;
use crate::read_at::read_exact_into;

/// Bytes read from a segment and sent in one data message: small enough that a
/// replica verifies and writes as it goes (a cut loses the message it is in).
const SHIP_CHUNK: usize = 64 * 1024;

/// What [`LogDir::serve_replica`] shipped to one replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShipStats {
    /// Where the replica started (its resume position, resolved: the start of the
    /// first segment for a new replica).
    pub from: LogPosition,
    /// Where the shipped bytes ended.
    pub to: LogPosition,
    /// Segment bytes sent.
    pub bytes: u64,
    /// Segments sent to their end (sealed on the replica).
    pub segments_sealed: u64,
}

impl LogDir {
    /// Serves one replica ([`Replica::sync_from`](crate::Replica::sync_from)) over
    /// `conn`: checks that the replica holds this log (its id, its history and its
    /// last record: see the [protocol](crate::Replica)), sends the sealed segments
    /// it lacks, then follows the active segment, durable bytes only, until the
    /// replica disconnects or the log is closed (then it says goodbye, so the
    /// replica tells a clean close from a failure); returns what it shipped.
    /// Serve any number of replicas at once, each from its own task. The protocol
    /// is in the [`Replica`](crate::Replica) docs.
    ///
    /// The segments a connected replica still needs are pinned against purges
    /// (retention included), up to
    /// [`replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes): a
    /// replica whose segments a purge released past that limit fails with
    /// [`Error::ReplicaTooFarBehind`]. A replica that sends no hello or takes no
    /// message for [`replica_timeout`](crate::LogDirOptions::replica_timeout)
    /// fails with [`Error::ReplicaProtocol`].
    ///
    /// # Errors
    /// [`Error::ReplicaTooFarBehind`] when the replica needs a purged segment;
    /// [`Error::ReplicaOfAnotherLog`] for a replica of another log;
    /// [`Error::ReplicaDiverged`] when its history forked from this log's (it
    /// holds records this log does not: past its end, after a truncation, or of
    /// an epoch this log never had), found in the handshake or, for a truncation
    /// while it is connected, while shipping; [`Error::ReplicaVersion`] and
    /// [`Error::ReplicaProtocol`] for a peer that is not a replica of this version
    /// (the replica is told before the connection is closed). A replica that goes
    /// away after the handshake is not an error. [`Error::WrongDialect`] at once
    /// for a log of Pebble's segments
    /// ([`LogDirOptions::dialect`](crate::LogDirOptions::dialect)): replication
    /// ships LevelDB's and RocksDB's segments only (the replica sees the
    /// connection closed before the handshake).
    pub async fn serve_replica<C>(&self, conn: C) -> Result<ShipStats, Error>
    where
        C: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let primary = Primary {
            source: self.ship_source(),
        };
        let connection = primary.source.observer().replica_connected();
        let result = primary.serve_connected(conn, connection).await;
        let shipped = result
            .as_ref()
            .map(|stats| (stats.from, stats.to, stats.bytes));
        primary.source.observer().replica_ended(connection, shipped);
        result
    }
}

/// One replica's connection, served from the directory's [`ShipSource`] alone.
struct Primary {
    source: ShipSource,
}

impl Primary {
    /// [`LogDir::serve_replica`] once the connection is counted.
    async fn serve_connected<C>(&self, conn: C, connection: u64) -> Result<ShipStats, Error>
    where
        C: AsyncRead + AsyncWrite + Unpin + Send,
    {
        if self.source.dialect() == crate::format::fragment::Dialect::Pebble {
            // The replica checks what arrives in RocksDB's dialect and keeps no
            // `DIALECT` file: Pebble's segments are refused before the handshake.
            return Err(Error::WrongDialect {
                path: self.source.path().to_path_buf(),
                found: crate::format::fragment::Dialect::Pebble,
                expected: crate::format::fragment::Dialect::LevelDb,
            });
        }
        let (mut rd, mut wr) = tokio::io::split(conn);
        let timeout = self.source.options().timeout;
        // Before anything is said of the log: a stray peer learns not even its end.
        #[cfg(feature = "replica-auth")]
        if let Some(secret) = &self.source.options().secret {
            super::auth::handshake(
                &mut rd,
                &mut wr,
                secret,
                super::auth::Role::Primary,
                timeout,
            )
            .await?;
        }
        let hello = Hello {
            version: PROTOCOL_VERSION,
            from_replica: false,
            position: self.source.end(),
        };
        // Both hellos go out before either is read, so a version mismatch is seen
        // on both ends.
        match tokio::time::timeout(timeout, send(&mut wr, &hello.encode())).await {
            Err(_) => return Err(wire::protocol("the replica took no hello in time")),
            Ok(Err(_)) => return Ok(ShipStats::default()),
            Ok(Ok(())) => {}
        }
        let theirs = wire::read_hello(&mut rd, timeout).await?;
        theirs.check(true)?;
        let mut stats = ShipStats::default();
        let result = async {
            let shipped = self.judge(theirs.position, &mut rd, &mut wr).await?;
            self.ship(
                theirs.position,
                shipped,
                &mut rd,
                &mut wr,
                &mut stats,
                connection,
            )
            .await
        }
        .await;
        match result {
            Err(e) => {
                if let Some(refusal) = Refusal::from_error(&e) {
                    // Timed too: a replica that stalled takes no refusal either.
                    let _ = timed_write(&mut wr, &Message::Refused(refusal), timeout).await;
                    hang_up(&mut rd, &mut wr, wire::heartbeat(timeout)).await;
                }
                Err(e)
            }
            Ok(()) => {
                hang_up(&mut rd, &mut wr, timeout).await;
                Ok(stats)
            }
        }
    }

    /// Reads the replica's identity and judges it ([`handshake::verdict`]): the
    /// same log, a history that has not forked, the same last record. Answers
    /// with this log's identity; returns the epoch the replica now knows last.
    async fn judge(
        &self,
        replica_end: LogPosition,
        rd: &mut (impl AsyncRead + Unpin),
        wr: &mut (impl AsyncWrite + Unpin),
    ) -> Result<(Option<Epoch>, usize), Error> {
        let timeout = self.source.options().timeout;
        let theirs = match tokio::time::timeout(timeout, wire::read_identity(rd)).await {
            Err(_) => return Err(wire::protocol("no identity from the replica in time")),
            Ok(Err(Error::Io(_))) => {
                return Err(wire::protocol("the connection ended in the handshake"))
            }
            Ok(identity) => identity?,
        };
        // The truncations counted with the history sent: any later one that cuts
        // what the replica holds is found while shipping.
        let ours = self.source.standing();
        let end = self.source.end();
        let (record, last) = match theirs.last {
            None => (RecordCheck::Nothing, None),
            Some((at, _)) if at.segment < ours.first => (RecordCheck::Purged, None),
            Some((at, crc)) => match handshake::checksum_ending_at(self.source.path(), at).await {
                Ok(Some(crc_here)) if crc_here == crc => (RecordCheck::Same, Some((at, crc_here))),
                // A purge that took the segment while it was read: as purged.
                _ if at.segment < self.source.first() => (RecordCheck::Purged, None),
                Ok(_) => (RecordCheck::Differs, None),
                Err(e) => return Err(e),
            },
        };
        handshake::verdict(
            handshake::Copy {
                id: Some(ours.log_id),
                history: &ours.history,
                end,
            },
            handshake::Copy {
                id: theirs.log_id,
                history: &theirs.history,
                end: replica_end,
            },
            record,
        )?;
        let current = ours.history.current().copied();
        let identity = Identity {
            log_id: Some(ours.log_id),
            last,
            history: ours.history,
        };
        match timed_write(wr, &Message::Identity(identity), timeout).await {
            Ok(()) | Err(Error::Io(_)) => {}
            Err(e) => return Err(e),
        }
        Ok((current, ours.truncations))
    }

    /// Pins the segment `from` resolves to, or refuses a replica that needs a
    /// purged one or is past the log's end.
    fn pin_for_replica(&self, from: LogPosition) -> Result<(LogPosition, SegmentPin), Error> {
        self.source.pin(from).map_err(|refused| match refused {
            PinRefused::Purged { first } => Error::ReplicaTooFarBehind {
                first_available: first,
            },
            PinRefused::PastEnd { end } => Error::ReplicaDiverged {
                common: end,
                replica: from,
                primary: end,
            },
        })
    }

    /// Ships to the replica while reading its acknowledgements, until either
    /// ends.
    async fn ship(
        &self,
        replica: LogPosition,
        (shipped, truncations_seen): (Option<Epoch>, usize),
        rd: &mut (impl AsyncRead + Unpin),
        wr: &mut (impl AsyncWrite + Unpin),
        stats: &mut ShipStats,
        connection: u64,
    ) -> Result<(), Error> {
        let (from, pin) = self.pin_for_replica(replica)?;
        stats.from = from;
        stats.to = from;
        // Counted as connected from here (its handshake passed) until it goes.
        let member = self.source.join();
        let acks = Acks {
            sent: Mutex::new(from),
            acked: watch::channel(from).0,
            member,
            connection,
        };
        self.report_behind(&acks);
        tokio::select! {
            sent = self.send(from, pin, (shipped, truncations_seen), wr, stats, &acks) => sent,
            read = self.read_acks(from, rd, &acks) => read,
        }
    }

    /// Reads the replica's acknowledgements of its durable end: each at least the
    /// last, at most what was sent. A replica that acknowledges nothing for
    /// [`replica_timeout`](crate::LogDirOptions::replica_timeout) (it answers each
    /// heartbeat) is cut off. Returns when the replica goes away.
    async fn read_acks(
        &self,
        from: LogPosition,
        rd: &mut (impl AsyncRead + Unpin),
        acks: &Acks,
    ) -> Result<(), Error> {
        let timeout = self.source.options().timeout;
        let mut last = from;
        loop {
            let end = match tokio::time::timeout(timeout, wire::read_ack(rd)).await {
                Err(_) => {
                    return Err(wire::protocol(
                        "no acknowledgement from the replica in time",
                    ))
                }
                // The replica went away, between messages or inside one.
                Ok(Ok(None)) | Ok(Err(Error::Io(_))) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(Some(end))) => end,
            };
            let sent = *acks.sent.lock().unwrap_or_else(PoisonError::into_inner);
            if end < last || end > sent {
                return Err(wire::protocol(
                    "an acknowledgement before the last one or past what was sent",
                ));
            }
            last = end;
            acks.acked.send_replace(end);
            // Reported before the quorum hears of it: whoever waits on the
            // replicated end sees the figure that goes with it.
            self.report_behind(acks);
            acks.member.ack(end);
        }
    }

    /// Reports how many bytes of the durable log the replica lacks, by its last
    /// acknowledgement: after each acknowledgement and each message sent, so a
    /// replica that stops acknowledging is seen falling behind.
    fn report_behind(&self, acks: &Acks) {
        self.source.observer().replica_behind(acks.connection, || {
            self.source.bytes_behind(*acks.acked.borrow())
        });
    }

    async fn send(
        &self,
        from: LogPosition,
        mut pin: SegmentPin,
        (mut shipped, mut truncations_seen): (Option<Epoch>, usize),
        wr: &mut (impl AsyncWrite + Unpin),
        stats: &mut ShipStats,
        acks: &Acks,
    ) -> Result<(), Error> {
        let timeout = self.source.options().timeout;
        let mut end_rx = self.source.durable_watch();
        let mut segment = from.segment;
        let mut sent = from.offset;
        // A data message's header, then its bytes, read in place: one write each.
        let mut buf = Some(vec![0u8; wire::DATA_HEADER_LEN + SHIP_CHUNK]);
        'segments: loop {
            let file = self.source.open_segment(segment)?;
            let start = Message::Segment {
                segment,
                offset: sent,
            };
            match timed_write(wr, &start, timeout).await {
                Ok(()) => {}
                Err(Error::Io(_)) => return Ok(()),
                Err(e) => return Err(e),
            }
            loop {
                // How far the segment may be shipped, and whether that is its end.
                let end = end_rx.current();
                let here = LogPosition::new(segment, sent);
                let since = self.source.since(truncations_seen, here, shipped.as_ref());
                released(since.first, segment)?;
                if since.cut.is_some() || end < here {
                    return Err(Error::ReplicaDiverged {
                        common: since.cut.unwrap_or(end).min(end),
                        replica: here,
                        primary: end,
                    });
                }
                // A truncation past what was shipped started an epoch: the
                // replica learns it before any byte of it.
                if let Some((history, truncations)) = since.history {
                    // The history sent tells of every truncation so far (none
                    // below what was shipped): shipping past one later is no
                    // divergence.
                    truncations_seen = truncations;
                    shipped = history.current().copied();
                    match timed_write(wr, &Message::History(history), timeout).await {
                        Ok(()) => {}
                        Err(Error::Io(_)) => return Ok(()),
                        Err(e) => return Err(e),
                    }
                }
                let (limit, sealed) = if end.segment == segment {
                    (end.offset, false)
                } else {
                    match self.source.sealed_len(segment) {
                        Some(len) => (len, true),
                        None => {
                            return Err(Error::ReplicaDiverged {
                                common: end.min(here),
                                replica: here,
                                primary: end,
                            })
                        }
                    }
                };
                if sent < limit {
                    let n = ((limit - sent) as usize).min(SHIP_CHUNK);
                    let message = buf
                        .take()
                        .unwrap_or_else(|| vec![0; wire::DATA_HEADER_LEN + SHIP_CHUNK]);
                    // What a commit just made durable is in the page cache: read on
                    // this thread (a hop to a blocking thread and back per commit
                    // cost a replica of a busy log more CPU than all else it did);
                    // a replica catching up may need the disk: a blocking thread.
                    let range = wire::DATA_HEADER_LEN..wire::DATA_HEADER_LEN + n;
                    let mut message = read_exact_into(&file, message, range, sent).await?;
                    // Checked again after the read: a purge releases a segment before
                    // it deletes (or pools, to be written over) its file, so bytes
                    // read while it was still held are the segment's.
                    released(self.source.first(), segment)?;
                    // The replica measures its lag by the messages that reach the
                    // end this primary had made durable.
                    let at_end = !sealed && sent + n as u64 == limit;
                    wire::put_data_header(&mut message[..wire::DATA_HEADER_LEN + n], at_end);
                    // Raised before the write: the replica may acknowledge the bytes
                    // before the write returns.
                    acks.sent_to(LogPosition::new(segment, sent + n as u64));
                    let written = tokio::time::timeout(timeout, async {
                        wr.write_all(&message[..wire::DATA_HEADER_LEN + n]).await?;
                        wr.flush().await
                    })
                    .await;
                    buf = Some(message);
                    match written {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return Ok(()),
                        Err(_) => return Err(wire::protocol("the replica took nothing in time")),
                    }
                    sent += n as u64;
                    stats.bytes += n as u64;
                    stats.to = LogPosition::new(segment, sent);
                    self.source.observer().shipped(n as u64);
                    self.report_behind(acks);
                    continue;
                }
                if sealed {
                    let message = Message::Sealed { len: limit };
                    acks.sent_to(LogPosition::new(segment + 1, 0));
                    match timed_write(wr, &message, timeout).await {
                        Ok(()) => {}
                        Err(Error::Io(_)) => return Ok(()),
                        Err(e) => return Err(e),
                    }
                    stats.segments_sealed += 1;
                    // Pin the next segment before letting this one go.
                    let (_, next_pin) = self.pin_for_replica(LogPosition::new(segment + 1, 0))?;
                    drop(std::mem::replace(&mut pin, next_pin));
                    segment += 1;
                    sent = 0;
                    stats.to = LogPosition::new(segment, 0);
                    continue 'segments;
                }
                if self.source.is_closed() && end_rx.peek() == end {
                    if self.source.is_sync() {
                        // Appends still waiting for this replica's acknowledgement of
                        // the last bytes get it before the connection ends.
                        let mut acked = acks.acked.subscribe();
                        let _ = tokio::time::timeout(timeout, acked.wait_for(|&a| a >= here)).await;
                    }
                    // A clean end: the replica tells it from a primary that died.
                    let _ = timed_write(wr, &Message::Goodbye, timeout).await;
                    return Ok(());
                }
                tokio::select! {
                    changed = end_rx.moved() => {
                        if changed.is_err() {
                            return Ok(());
                        }
                    }
                    _ = tokio::time::sleep(wire::heartbeat(timeout)) => {
                        if timed_write(wr, &Message::Heartbeat, timeout).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
}

async fn send<W: AsyncWrite + Unpin>(wr: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    wr.write_all(bytes).await?;
    wr.flush().await
}

/// A replica's `segment` that a purge released
/// ([`replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes)): the
/// replica is too far behind. `first` is the oldest segment kept.
fn released(first: u64, segment: u64) -> Result<(), Error> {
    if segment < first {
        return Err(Error::ReplicaTooFarBehind {
            first_available: LogPosition::new(first, 0),
        });
    }
    Ok(())
}

/// Ends the connection without losing what was sent: the write side is shut (the
/// replica reads to the end, then hangs up) and the replica's acknowledgements
/// are read until it does, for at most `timeout`. A TCP socket closed with unread
/// bytes in it is reset, and a reset can discard the last bytes sent before the
/// replica read them.
async fn hang_up(
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
    timeout: Duration,
) {
    let _ = tokio::time::timeout(timeout, async {
        let _ = wr.shutdown().await;
        let mut sink = [0u8; 256];
        while let Ok(1..) = rd.read(&mut sink).await {}
    })
    .await;
}

/// What one replica acknowledged, and what it may acknowledge.
struct Acks {
    /// The end of what was sent (or is being sent): the most the replica may
    /// acknowledge.
    sent: Mutex<LogPosition>,
    /// The replica's last acknowledged end.
    acked: watch::Sender<LogPosition>,
    /// Its place among the synchronous replicas.
    member: Member,
    /// The connection's number, for what the primary reports of it.
    connection: u64,
}

impl Acks {
    fn sent_to(&self, end: LogPosition) {
        *self.sent.lock().unwrap_or_else(PoisonError::into_inner) = end;
    }
}

/// Writes a message; a replica that takes nothing for `timeout` is a protocol
/// error.
async fn timed_write<W: AsyncWrite + Unpin>(
    wr: &mut W,
    message: &Message,
    timeout: Duration,
) -> Result<(), Error> {
    match tokio::time::timeout(timeout, wire::write_message(wr, message)).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(wire::protocol("the replica took nothing in time")),
    }
}
