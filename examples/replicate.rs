//! Log shipping: a primary appends to a segmented log (`LogDir`) and ships its
//! segments over TCP; a replica reads the stream with `FramedRead` + `LogDecoder` and
//! keeps a directory of aligned, byte-identical segment copies, resuming from its last
//! complete record whenever the connection drops. A replica that is far behind
//! receives the sealed segments one after the other, then follows the active one.
//!
//! The log format is the wire format: the primary sends the raw bytes of a segment
//! file and nothing else. One message each way opens each connection:
//!
//! ```text
//! replica -> primary  resume position: segment u64 LE, offset u64 LE, the end of the
//!                     last record the replica has (0, 0 for an empty copy); then nothing
//! primary -> replica  the segment it ships, u64 LE: the replica's segment, or the next
//!                     one when the replica has all of a sealed segment (the first kept
//!                     one for 0); then that segment from block_start(offset) on, each
//!                     byte once it is durable (LogDir::durable_end, a watch channel: no
//!                     polling); once the segment is sealed and fully sent, the primary
//!                     closes the stream and the replica asks again from its end
//! ```
//!
//! Starting at the block boundary lets the replica's decoder find where fragments
//! begin; it passes over what the replica already has (at most one block is re-sent)
//! exactly as any reader started mid-log does (`LogDecoderBuilder::start_offset`).
//! A connection cut anywhere (mid-header, mid-record, in a trailer) leaves a torn
//! record at the end of the stream, which the decoder drops as a torn tail; the
//! replica reconnects and asks again from the end of its last complete record, so no
//! record is lost or copied twice.
//!
//! Why re-encoding gives a byte-identical copy: LevelDB's framing depends only on the
//! records and the offset they are written at, so a `LogEncoder` resumed at the copy's
//! length (`LogEncoder::with_offset`) writes each record exactly as the primary's
//! writer did, block trailers included; a segment holds only whole records, so each
//! segment copy starts at 0 like the original. The replica checks that every record
//! lands at the position the decoder read it from, so a primary log with anything else
//! in it (a zero-filled gap, a torn tail appended after) is refused rather than copied
//! misaligned; and every checksum is verified on the way.
//!
//! Only durable bytes are shipped: a replica must never hold a record the primary
//! could still lose in a crash, or the two would diverge.
//!
//! The demo: N tasks append half their events to a primary with small segments
//! before any replica exists; a replica then starts (far behind: the sealed segments
//! come first) and follows through a proxy that cuts the connection after a random
//! number of bytes, a few times, while the tasks append the other half. Once the
//! primary closes its log, every segment of the replica must equal the primary's;
//! then a second replica copies the closed log from scratch, which measures the
//! replication throughput free of the primary's sync rate. Exits non-zero on any
//! mismatch.
//!
//! ```text
//! cargo run --release --example replicate
//! cargo run --release --example replicate -- --seed 7 --tasks 16 --events 2000 --drops 8
//! ```

use std::cmp::Ordering;
use std::io::{self, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::{FutureExt, StreamExt};
use tokio::fs::{File, OpenOptions};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::timeout;
use tokio_util::codec::FramedRead;
use walcodec::{block_start, repair_log, LogDecoder, LogDir, LogEncoder, LogPosition, BLOCK_SIZE};

/// Errors of the demo's pieces, carried to `main` as text and exit status 1.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bytes the primary reads from its log and writes to a replica at a time.
const SHIP_CHUNK: usize = 256 * 1024;

/// How long the primary waits for a new connection's resume offset.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Encoded records a replica gathers before writing them to its copy.
const MAX_COPY_WRITE: usize = 1024 * 1024;

/// Connections in a row that bring no new record before a replica gives up (a cut in
/// the re-sent block, a primary that refuses the offset or is not listening).
const MAX_FRUITLESS_CONNECTIONS: u32 = 20;

/// Pause before the n-th fruitless reconnection: n times this (2.1 s in all at most).
const RECONNECT_BACKOFF: Duration = Duration::from_millis(10);

// ---------------------------------------------------------------------------------
// Primary

/// How much of the primary's log may be shipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogEnd {
    /// Bytes of the log known to be durable; nothing past them is shipped.
    pub durable_len: u64,
    /// The log is closed: `durable_len` is its final length.
    pub sealed: bool,
}

/// How much of `segment` may be shipped, from the primary's durable end: up to the
/// end in the active segment; all of it, sealed, once the log moved past it or was
/// closed (`closed`: its final end).
fn segment_end(
    log: &LogDir,
    segment: u64,
    durable: LogPosition,
    closed: Option<LogPosition>,
) -> LogEnd {
    match durable.segment.cmp(&segment) {
        Ordering::Equal => LogEnd {
            durable_len: durable.offset,
            sealed: closed.is_some_and(|end| end == durable),
        },
        Ordering::Greater => {
            let len = log
                .segments()
                .iter()
                .find(|s| s.0 == segment)
                .map(|s| s.1)
                .unwrap_or(0);
            LogEnd {
                durable_len: len,
                sealed: true,
            }
        }
        Ordering::Less => LogEnd::default(),
    }
}

/// `segment`'s end as a watch channel, following the log's durable end (a watch
/// channel too) until the segment is sealed or nobody listens.
async fn segment_ends(
    log: &LogDir,
    segment: u64,
    mut closed: watch::Receiver<Option<LogPosition>>,
) -> watch::Receiver<LogEnd> {
    let mut durable = log.durable_end();
    let first = segment_end(
        log,
        segment,
        *durable.borrow_and_update(),
        *closed.borrow_and_update(),
    );
    let (tx, rx) = watch::channel(first);
    if !first.sealed {
        let log = log.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = durable.changed() => if changed.is_err() { return },
                    changed = closed.changed() => if changed.is_err() { return },
                    _ = tx.closed() => return,
                }
                let end = segment_end(
                    &log,
                    segment,
                    *durable.borrow_and_update(),
                    *closed.borrow_and_update(),
                );
                tx.send_replace(end);
                if end.sealed {
                    return;
                }
            }
        });
    }
    rx
}

/// Serves the segments of `log` to replicas (see the protocol at the top), one task
/// per connection; `closed` gets the log's final end once it is closed, which seals
/// its last segment for the replicas. Runs until accepting fails; dropping the
/// future ends every connection.
pub async fn serve_dir(
    listener: TcpListener,
    log: LogDir,
    closed: watch::Receiver<Option<LogPosition>>,
) -> io::Result<()> {
    let mut connections = JoinSet::new();
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e),
        };
        while connections.try_join_next().is_some() {}
        let (log, closed) = (log.clone(), closed.clone());
        connections.spawn(async move {
            if let Err(e) = ship_segment(socket, &log, closed).await {
                if !routine(&e) {
                    eprintln!("primary: replica {peer}: {e}");
                }
            }
        });
    }
}

/// A replica going away is routine; anything else deserves a line.
fn routine(e: &BoxError) -> bool {
    e.downcast_ref::<io::Error>().is_some_and(|e| {
        matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
        )
    })
}

/// Ships one segment to one replica: reads its resume position, picks the segment
/// (the next one when the replica has all of a sealed one), sends its number, then
/// its bytes as `ship_from` does.
async fn ship_segment(
    mut socket: TcpStream,
    log: &LogDir,
    closed: watch::Receiver<Option<LogPosition>>,
) -> Result<(), BoxError> {
    socket.set_nodelay(true)?;
    let mut hello = [0u8; 16];
    timeout(HANDSHAKE_TIMEOUT, socket.read_exact(&mut hello))
        .await
        .map_err(|_| "no resume position")??;
    let asked = LogPosition::new(
        u64::from_le_bytes(hello[..8].try_into().unwrap()),
        u64::from_le_bytes(hello[8..].try_into().unwrap()),
    );
    let segments = log.segments();
    let (first, active) = (segments[0].0, segments[segments.len() - 1].0);
    let mut at = if asked.segment == 0 {
        LogPosition::new(first, 0)
    } else {
        asked
    };
    if at.segment < first || at.segment > active {
        return Err(format!("refused: segment {} is not kept here", at.segment).into());
    }
    // Past every sealed segment the replica has in full.
    while let Some(&(_, len)) = segments.iter().find(|s| s.0 == at.segment && s.0 != active) {
        if at.offset < len {
            break;
        }
        if at.offset > len {
            return Err(format!("refused: {at} is past the end of its segment").into());
        }
        at = LogPosition::new(at.segment + 1, 0);
    }
    socket.write_all(&at.segment.to_le_bytes()).await?;
    let path = log.path().join(format!("{:06}.log", at.segment));
    let ends = segment_ends(log, at.segment, closed).await;
    ship_from(socket, &path, ends, at.offset).await
}

/// Serves the log at `path` to replicas, one task per connection, shipping as much of
/// it as `ends` allows. Runs until accepting fails; dropping the future ends every
/// connection.
pub async fn serve(
    listener: TcpListener,
    path: PathBuf,
    ends: watch::Receiver<LogEnd>,
) -> io::Result<()> {
    let mut connections = JoinSet::new();
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // The replica gave up before its connection was accepted.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e),
        };
        // Reap finished connections so the set holds only live ones.
        while connections.try_join_next().is_some() {}
        let path = path.clone();
        let ends = ends.clone();
        connections.spawn(async move {
            if let Err(e) = ship(socket, &path, ends).await {
                if !routine(&e) {
                    eprintln!("primary: replica {peer}: {e}");
                }
            }
        });
    }
}

/// Ships the log to one replica: reads its resume offset, then sends the log from the
/// start of that offset's block, each byte once it is durable, until the log is sealed
/// and sent (or the replica goes away).
async fn ship(
    mut socket: TcpStream,
    path: &Path,
    ends: watch::Receiver<LogEnd>,
) -> Result<(), BoxError> {
    socket.set_nodelay(true)?;
    let mut offset = [0u8; 8];
    timeout(HANDSHAKE_TIMEOUT, socket.read_exact(&mut offset))
        .await
        .map_err(|_| "no resume offset")??;
    ship_from(socket, path, ends, u64::from_le_bytes(offset)).await
}

/// Sends the log at `path` from the start of `resume`'s block, each byte once it is
/// durable, until it is sealed and sent (or the replica goes away).
async fn ship_from(
    mut socket: TcpStream,
    path: &Path,
    mut ends: watch::Receiver<LogEnd>,
    resume: u64,
) -> Result<(), BoxError> {
    let durable_len = ends.borrow().durable_len;
    if resume > durable_len {
        // The replica holds bytes this log never made durable: it copied another log
        // (or a lost incarnation of this one). Shipping would make a mix of the two.
        return Err(format!(
            "refused: resume offset {resume} is past the durable length {durable_len}"
        )
        .into());
    }
    let mut log = File::open(path).await?;
    let mut sent = block_start(resume);
    log.seek(SeekFrom::Start(sent)).await?;
    let (mut from_replica, mut to_replica) = socket.split();
    let mut chunk = vec![0u8; SHIP_CHUNK];
    loop {
        let end = *ends.borrow_and_update();
        while sent < end.durable_len {
            let want = (end.durable_len - sent).min(SHIP_CHUNK as u64) as usize;
            let n = log.read(&mut chunk[..want]).await?;
            if n == 0 {
                return Err(format!("the log ends at {sent}, before its durable length").into());
            }
            to_replica.write_all(&chunk[..n]).await?;
            sent += n as u64;
        }
        if end.sealed {
            // A clean end of stream: the whole log is there.
            to_replica.shutdown().await?;
            return Ok(());
        }
        let mut probe = [0u8; 1];
        tokio::select! {
            changed = ends.changed() => {
                if changed.is_err() {
                    return Ok(()); // the primary is shutting down
                }
            }
            // The replica sends nothing after its offset: anything readable (EOF
            // included) means it is gone, so an idle log does not hold its connection.
            _ = from_replica.read(&mut probe) => return Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------------
// Replica

/// A replica's copy of the primary's log.
#[derive(Debug)]
pub struct Replica {
    /// Opened for appending: every write lands at the end of the copy.
    file: File,
    /// The copy's length: the end of its last record, where it resumes.
    len: u64,
}

/// What a replica did while following the primary.
#[derive(Debug, Clone, Default)]
pub struct FollowStats {
    /// Records appended to the copy.
    pub records: u64,
    /// Bytes appended to the copy.
    pub copied: u64,
    /// Bytes received from the primary, re-sent block prefixes and torn tails included.
    pub received: u64,
    /// The resume offset sent on each connection, in order.
    pub resumed_from: Vec<u64>,
}

impl FollowStats {
    /// Connections made after the first.
    pub fn reconnects(&self) -> usize {
        self.resumed_from.len().saturating_sub(1)
    }
}

/// How a connection to the primary ended, short of a fatal error.
#[derive(Debug)]
pub enum Ended {
    /// End of stream: the primary sent the whole log, or the connection was cut.
    Eof,
    /// The connection could not be made or failed.
    Lost(io::Error),
}

impl Replica {
    /// Opens the copy at `path`, creating it when missing. A copy torn by a crash
    /// mid-write is cut back to its last complete record first: that is where it
    /// resumes.
    pub async fn open(path: impl AsRef<Path>) -> Result<Replica, BoxError> {
        let path = path.as_ref();
        let created = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)
            .await;
        let file = match created {
            Ok(file) => {
                // The file's own sync does not make its name durable.
                let dir = match path.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                File::open(dir).await?.sync_all().await?;
                file
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                OpenOptions::new().append(true).open(path).await?
            }
            Err(e) => return Err(e.into()),
        };
        let scan = repair_log(path).await?;
        Ok(Replica {
            file,
            len: scan.valid_len,
        })
    }

    /// The copy's length, which is the end of its last complete record: the offset the
    /// next connection resumes from.
    pub fn resume_offset(&self) -> u64 {
        self.len
    }

    /// Follows the primary at `primary`, reconnecting whenever the connection drops,
    /// until the copy is as long as `stop_at` says (`None`: not known yet; in the demo
    /// the primary's final length once it has closed its log). Syncs the copy before
    /// returning.
    ///
    /// # Errors
    /// A damaged stream, a record that would land elsewhere than in the primary's log,
    /// a copy longer than `stop_at`, a failed write to the copy, or
    /// `MAX_FRUITLESS_CONNECTIONS` connections in a row without a new record.
    pub async fn follow(
        &mut self,
        primary: SocketAddr,
        stop_at: watch::Receiver<Option<u64>>,
    ) -> Result<FollowStats, BoxError> {
        let mut stats = FollowStats::default();
        let start_len = self.len;
        let mut fruitless = 0;
        loop {
            if let Some(end) = *stop_at.borrow() {
                match self.len.cmp(&end) {
                    Ordering::Equal => break,
                    Ordering::Greater => {
                        return Err(format!(
                            "the copy ({} bytes) is longer than the primary's log ({end} bytes)",
                            self.len
                        )
                        .into())
                    }
                    Ordering::Less => {}
                }
            }
            let before = self.len;
            let ended = self.session(primary, &mut stats).await?;
            if self.len > before {
                fruitless = 0;
                continue;
            }
            fruitless += 1;
            if fruitless >= MAX_FRUITLESS_CONNECTIONS {
                let why = match ended {
                    Ended::Eof => "the stream ended".to_string(),
                    Ended::Lost(e) => e.to_string(),
                };
                return Err(format!(
                    "no new record from {primary} over {fruitless} connections, stuck at \
                     offset {} (last: {why})",
                    self.len
                )
                .into());
            }
            tokio::time::sleep(RECONNECT_BACKOFF * fruitless).await;
        }
        self.file.sync_all().await?;
        stats.copied = self.len - start_len;
        Ok(stats)
    }

    /// One connection: send the resume offset, then append each record that arrives to
    /// the copy, until the stream ends or fails.
    async fn session(
        &mut self,
        primary: SocketAddr,
        stats: &mut FollowStats,
    ) -> Result<Ended, BoxError> {
        let mut socket = match TcpStream::connect(primary).await {
            Ok(socket) => socket,
            Err(e) => return Ok(Ended::Lost(e)),
        };
        let resume = self.len;
        if let Err(e) = socket.write_all(&resume.to_le_bytes()).await {
            return Ok(Ended::Lost(e));
        }
        stats.resumed_from.push(resume);
        self.receive(socket, stats).await
    }

    /// Appends each record that arrives on `socket` (the log from the start of the
    /// copy's last block on) to the copy, until the stream ends or fails.
    pub async fn receive(
        &mut self,
        socket: TcpStream,
        stats: &mut FollowStats,
    ) -> Result<Ended, BoxError> {
        let resume = self.len;
        // The stream starts at block_start(resume); the decoder skips the records
        // before `resume`, which the copy has.
        let decoder = LogDecoder::builder().start_offset(resume).build();
        let mut records = FramedRead::with_capacity(socket, decoder, 64 * 1024);
        let mut encoder = LogEncoder::with_offset(resume);
        let mut pending = BytesMut::new();
        let ended = loop {
            // Wait only with nothing pending: a burst of records that arrived together
            // goes to the copy in one write.
            let next = if pending.is_empty() {
                records.next().await
            } else {
                match records.next().now_or_never() {
                    Some(next) => next,
                    None => {
                        self.write(&mut pending, encoder.offset()).await?;
                        continue;
                    }
                }
            };
            match next {
                Some(Ok(record)) => {
                    let copied_at = encoder.encode_record(&record, &mut pending);
                    let read_at = records.decoder().last_record();
                    if read_at != Some(copied_at) {
                        return Err(format!(
                            "the record read at {read_at:?} would be copied at {copied_at:?}: \
                             the primary's log is not what a LevelDB writer writes"
                        )
                        .into());
                    }
                    stats.records += 1;
                    if pending.len() >= MAX_COPY_WRITE {
                        self.write(&mut pending, encoder.offset()).await?;
                    }
                }
                // A record cut by the end of the stream is a torn tail: dropped, and
                // asked for again on the next connection.
                None => break Ok(Ended::Eof),
                Some(Err(walcodec::Error::Io(e))) => break Ok(Ended::Lost(e)),
                // Damage in what the primary sent. The records before it are good.
                Some(Err(e)) => break Err(BoxError::from(e)),
            }
        };
        self.write(&mut pending, encoder.offset()).await?;
        let consumed = records.decoder().offset() - block_start(resume);
        stats.received += consumed + records.read_buffer().len() as u64;
        ended
    }

    /// Makes everything written to the copy durable.
    pub async fn sync(&mut self) -> io::Result<()> {
        self.file.sync_all().await
    }

    /// Appends the encoded records in `pending` to the copy, which then ends at `end`.
    async fn write(&mut self, pending: &mut BytesMut, end: u64) -> io::Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        // A failure of this write surfaces at the next write or at the final sync,
        // either of which ends `follow` with the error.
        self.file.write_all(pending).await?;
        pending.clear();
        self.len = end;
        Ok(())
    }
}

/// A replica's copy of the primary's segmented log: a directory of `NNNNNN.log`
/// files, each byte-identical to the primary's segment of that number.
#[derive(Debug)]
pub struct DirReplica {
    dir: PathBuf,
    /// The segment being copied (0 before the first) and its copy.
    segment: u64,
    copy: Option<Replica>,
}

/// What a directory replica did while following the primary.
#[derive(Debug, Clone, Default)]
pub struct DirFollowStats {
    /// Records appended to the copies.
    pub records: u64,
    /// Bytes appended to the copies.
    pub copied: u64,
    /// Bytes received from the primary, re-sent block prefixes and torn tails included.
    pub received: u64,
    /// Segment copies started.
    pub segments: u64,
    /// The resume position sent on each connection, in order.
    pub resumed_from: Vec<LogPosition>,
}

impl DirFollowStats {
    /// Connections made after the first.
    pub fn reconnects(&self) -> usize {
        self.resumed_from.len().saturating_sub(1)
    }
}

impl DirReplica {
    /// Opens the copy in `dir`, creating it when missing; the last segment copy is
    /// cut back to its last complete record, where the replica resumes.
    pub async fn open(dir: impl AsRef<Path>) -> Result<DirReplica, BoxError> {
        let dir = dir.as_ref().to_path_buf();
        tokio::fs::create_dir_all(&dir).await?;
        let mut segment = 0;
        let mut entries = tokio::fs::read_dir(&dir).await?;
        while let Some(entry) = entries.next_entry().await? {
            let name = entry.file_name();
            let number = name
                .to_str()
                .and_then(|n| n.strip_suffix(".log"))
                .filter(|n| n.len() >= 6)
                .and_then(|n| n.parse::<u64>().ok());
            segment = segment.max(number.unwrap_or(0));
        }
        let copy = match segment {
            0 => None,
            n => Some(Replica::open(segment_file(&dir, n)).await?),
        };
        Ok(DirReplica { dir, segment, copy })
    }

    /// Where the next connection resumes: the end of the last complete record.
    pub fn resume_position(&self) -> LogPosition {
        match &self.copy {
            Some(copy) => LogPosition::new(self.segment, copy.resume_offset()),
            None => LogPosition::START,
        }
    }

    /// Follows the primary at `primary`, segment after segment, reconnecting
    /// whenever a connection drops or a segment is complete, until the copy reaches
    /// `stop_at` (`None`: not known yet; in the demo the primary's final end once it
    /// has closed its log). Syncs the copy before returning.
    ///
    /// # Errors
    /// As [`Replica::follow`]; also a primary that answers with an older segment.
    pub async fn follow(
        &mut self,
        primary: SocketAddr,
        stop_at: watch::Receiver<Option<LogPosition>>,
    ) -> Result<DirFollowStats, BoxError> {
        let mut stats = DirFollowStats::default();
        let mut fruitless = 0;
        loop {
            let at = self.resume_position();
            if let Some(end) = *stop_at.borrow() {
                match at.cmp(&end) {
                    Ordering::Equal => break,
                    Ordering::Greater => {
                        return Err(
                            format!("the copy ({at}) is past the primary's log ({end})").into()
                        )
                    }
                    Ordering::Less => {}
                }
            }
            let ended = self.session(primary, &mut stats).await?;
            if self.resume_position() > at {
                fruitless = 0;
                continue;
            }
            fruitless += 1;
            if fruitless >= MAX_FRUITLESS_CONNECTIONS {
                let why = match ended {
                    Ended::Eof => "the stream ended".to_string(),
                    Ended::Lost(e) => e.to_string(),
                };
                return Err(format!(
                    "no progress from {primary} over {fruitless} connections, stuck at {at} \
                     (last: {why})"
                )
                .into());
            }
            tokio::time::sleep(RECONNECT_BACKOFF * fruitless).await;
        }
        if let Some(copy) = &mut self.copy {
            copy.sync().await?;
        }
        Ok(stats)
    }

    /// One connection: send the resume position, start the segment copy the primary
    /// names if it is a new one, then copy what arrives.
    async fn session(
        &mut self,
        primary: SocketAddr,
        stats: &mut DirFollowStats,
    ) -> Result<Ended, BoxError> {
        let mut socket = match TcpStream::connect(primary).await {
            Ok(socket) => socket,
            Err(e) => return Ok(Ended::Lost(e)),
        };
        let at = self.resume_position();
        let mut hello = [0u8; 16];
        hello[..8].copy_from_slice(&at.segment.to_le_bytes());
        hello[8..].copy_from_slice(&at.offset.to_le_bytes());
        if let Err(e) = socket.write_all(&hello).await {
            return Ok(Ended::Lost(e));
        }
        stats.resumed_from.push(at);
        let mut number = [0u8; 8];
        match socket.read_exact(&mut number).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Ended::Eof),
            Err(e) => return Ok(Ended::Lost(e)),
        }
        let shipped = u64::from_le_bytes(number);
        if shipped < self.segment {
            return Err(format!("the primary ships segment {shipped}, the copy is at {at}").into());
        }
        if shipped > self.segment {
            // The copy of the previous segment is complete: durable before the next
            // one exists, so a crash never leaves a short copy before a longer one.
            if let Some(copy) = &mut self.copy {
                copy.sync().await?;
            }
            self.copy = Some(Replica::open(segment_file(&self.dir, shipped)).await?);
            self.segment = shipped;
            stats.segments += 1;
        }
        let copy = self.copy.as_mut().expect("a segment copy is open");
        let before = copy.resume_offset();
        let mut one = FollowStats::default();
        let ended = copy.receive(socket, &mut one).await;
        stats.records += one.records;
        stats.received += one.received;
        stats.copied += copy.resume_offset() - before;
        ended
    }
}

fn segment_file(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:06}.log"))
}

// ---------------------------------------------------------------------------------
// The network in between

/// Relays replicas' connections to `upstream`, cutting the n-th connection after
/// `cuts[n]` bytes from the primary (closing both sides, as a network failure would);
/// connections past the list pass untouched. Runs until accepting fails; dropping the
/// future ends every relay.
pub async fn flaky_proxy(
    listener: TcpListener,
    upstream: SocketAddr,
    cuts: Vec<u64>,
) -> io::Result<()> {
    let mut cuts = cuts.into_iter();
    let mut relays = JoinSet::new();
    loop {
        let (replica, _) = listener.accept().await?;
        while relays.try_join_next().is_some() {}
        relays.spawn(relay(replica, upstream, cuts.next()));
    }
}

async fn relay(replica: TcpStream, upstream: SocketAddr, cut: Option<u64>) -> io::Result<()> {
    let primary = TcpStream::connect(upstream).await?;
    replica.set_nodelay(true)?;
    primary.set_nodelay(true)?;
    let (mut from_replica, mut to_replica) = replica.into_split();
    let (mut from_primary, mut to_primary) = primary.into_split();
    // The replica's side (its handshake, then its end of stream) passes untouched.
    let upstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_replica, &mut to_primary).await;
        let _ = to_primary.shutdown().await;
    });
    let relayed = match cut {
        Some(limit) => tokio::io::copy(&mut (&mut from_primary).take(limit), &mut to_replica).await,
        None => tokio::io::copy(&mut from_primary, &mut to_replica).await,
    };
    upstream.abort();
    relayed?;
    // A clean close: the replica gets every byte relayed, then end of stream.
    to_replica.shutdown().await
}

// ---------------------------------------------------------------------------------
// The demo

/// The demo's settings.
#[derive(Debug, Clone)]
pub struct Demo {
    /// Tasks appending to the primary's log.
    pub tasks: u32,
    /// Events each task appends (half before the replica starts).
    pub events: u32,
    /// The primary's `max_segment_bytes`.
    pub segment_bytes: u64,
    /// Connections the proxy cuts.
    pub drops: usize,
    /// Cuts fall within this many bytes of a connection's start.
    pub max_cut: u64,
    /// Seeds the event sizes and the cut points (the interleaving of the tasks is up to
    /// the scheduler).
    pub seed: u64,
}

/// What the demo did and measured.
#[derive(Debug)]
pub struct Report {
    /// Records in the primary's log.
    pub records: u64,
    /// Bytes in all of the primary's segments, which both copies match byte for byte.
    pub log_len: u64,
    /// The primary's segments.
    pub segments: u64,
    /// Where the proxy cut the first connections (bytes into each).
    pub cuts: Vec<u64>,
    /// From the first append to the primary's close.
    pub append_time: Duration,
    /// The replica that followed the primary through the proxy.
    pub follower: DirFollowStats,
    /// From the primary's close to the follower's last byte.
    pub catch_up: Duration,
    /// The replica that copied the closed log from scratch.
    pub cold: DirFollowStats,
    /// How long the cold copy took.
    pub cold_time: Duration,
}

/// Splitmix64: a small seedable generator for event sizes and cut points.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// The `seq`-th event of task `task`: a short line, and about one in 50 padded to
/// 20-80 KB so records span blocks and cuts land inside fragmented records.
fn event(seed: u64, task: u32, seq: u32) -> Vec<u8> {
    let mut rng = SplitMix64(seed ^ (u64::from(task) << 32 | u64::from(seq)));
    let mut event = format!(
        "task {task} seq {seq}: order {} shipped",
        rng.next() % 1_000_000
    )
    .into_bytes();
    let len = if rng.below(50) == 0 {
        20_000 + rng.below(60_000)
    } else {
        rng.below(200)
    };
    event.resize(event.len() + len as usize, b'.');
    event
}

/// Byte cuts: anywhere in the first `max_cut` bytes of a connection, a quarter of
/// them in its first block (often before any new record: a fruitless connection).
fn cut_points(rng: &mut SplitMix64, drops: usize, max_cut: u64) -> Vec<u64> {
    (0..drops)
        .map(|_| match rng.below(4) {
            0 => 1 + rng.below(max_cut.min(BLOCK_SIZE as u64)),
            _ => 1 + rng.below(max_cut),
        })
        .collect()
}

/// Checks that `copy` holds exactly the bytes of `original`; returns their length.
pub async fn compare_files(original: &Path, copy: &Path) -> Result<u64, BoxError> {
    let (a, b) = (
        tokio::fs::read(original).await?,
        tokio::fs::read(copy).await?,
    );
    if let Some(at) = a.iter().zip(&b).position(|(x, y)| x != y) {
        return Err(format!(
            "{} differs from {} at byte {at}",
            copy.display(),
            original.display()
        )
        .into());
    }
    if a.len() != b.len() {
        return Err(format!(
            "{} is {} bytes, {} is {}",
            copy.display(),
            b.len(),
            original.display(),
            a.len()
        )
        .into());
    }
    Ok(a.len() as u64)
}

/// Checks that the directory `copy` holds exactly the segments of `original`, each
/// byte for byte; returns their total length and count.
pub async fn compare_dirs(original: &Path, copy: &Path) -> Result<(u64, u64), BoxError> {
    let names = |dir: PathBuf| async move {
        let mut names = Vec::new();
        let mut entries = tokio::fs::read_dir(&dir).await?;
        while let Some(entry) = entries.next_entry().await? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".log") {
                names.push(name);
            }
        }
        names.sort();
        Ok::<_, io::Error>(names)
    };
    let (a, b) = (
        names(original.to_path_buf()).await?,
        names(copy.to_path_buf()).await?,
    );
    if a != b {
        return Err(format!(
            "{} holds {b:?}, {} holds {a:?}",
            copy.display(),
            original.display()
        )
        .into());
    }
    let mut total = 0;
    for name in &a {
        total += compare_files(&original.join(name), &copy.join(name)).await?;
    }
    Ok((total, a.len() as u64))
}

/// Runs the demo in `dir`: the primary appends half its events, then a replica
/// starts far behind and follows through a flaky proxy while the other half is
/// appended; checks the copy; then copies the closed log again from scratch.
pub async fn run(demo: &Demo, dir: &Path) -> Result<Report, BoxError> {
    let primary_dir = dir.join("primary");
    let log = LogDir::builder()
        .max_segment_bytes(demo.segment_bytes)
        .open(&primary_dir)
        .await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let primary_addr = listener.local_addr()?;
    let (closed_tx, closed) = watch::channel(None);
    let server = tokio::spawn(serve_dir(listener, log.clone(), closed));

    let append = |from: u32, to: u32| {
        let mut appenders = JoinSet::new();
        for task in 0..demo.tasks {
            let (log, seed) = (log.clone(), demo.seed);
            appenders.spawn(async move {
                for seq in from..to {
                    log.append(event(seed, task, seq)).await?;
                }
                Ok::<_, walcodec::Error>(())
            });
        }
        appenders
    };
    let started = Instant::now();
    let mut appenders = append(0, demo.events / 2);
    while let Some(appended) = appenders.join_next().await {
        appended??;
    }

    let mut rng = SplitMix64(demo.seed);
    let cuts = cut_points(&mut rng, demo.drops, demo.max_cut);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let proxy_addr = listener.local_addr()?;
    let proxy = tokio::spawn(flaky_proxy(listener, primary_addr, cuts.clone()));

    let follower_dir = dir.join("replica");
    let (stop_tx, stop_at) = watch::channel(None);
    let mut follower = DirReplica::open(&follower_dir).await?;
    let following = tokio::spawn(async move { follower.follow(proxy_addr, stop_at).await });

    let mut appenders = append(demo.events / 2, demo.events);
    while let Some(appended) = appenders.join_next().await {
        appended??;
    }
    let records = u64::from(demo.tasks) * u64::from(demo.events);
    let end = log.close().await?;
    let append_time = started.elapsed();

    let closed = Instant::now();
    closed_tx.send_replace(Some(end));
    stop_tx.send_replace(Some(end));
    let follower = timeout(Duration::from_secs(60), following)
        .await
        .map_err(|_| "the replica did not catch up within 60 s")???;
    let catch_up = closed.elapsed();
    proxy.abort();
    let (log_len, segments) = compare_dirs(&primary_dir, &follower_dir).await?;
    if follower.records != records {
        return Err(format!(
            "the replica copied {} records, the primary wrote {records}",
            follower.records
        )
        .into());
    }

    let cold_dir = dir.join("cold");
    let mut cold = DirReplica::open(&cold_dir).await?;
    let (_sealed, stop_at) = watch::channel(Some(end));
    let started = Instant::now();
    let cold_stats = timeout(Duration::from_secs(60), cold.follow(primary_addr, stop_at))
        .await
        .map_err(|_| "the cold copy did not finish within 60 s")??;
    let cold_time = started.elapsed();
    server.abort();
    compare_dirs(&primary_dir, &cold_dir).await?;

    Ok(Report {
        records,
        log_len,
        segments,
        cuts,
        append_time,
        follower,
        catch_up,
        cold: cold_stats,
        cold_time,
    })
}

fn parse_args() -> Result<Demo, String> {
    let mut demo = Demo {
        tasks: 8,
        events: 1500,
        segment_bytes: 1 << 20,
        drops: 5,
        max_cut: 2 << 20,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |t| t.as_nanos() as u64),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag}: {e}");
        match flag.as_str() {
            "--tasks" => demo.tasks = value.parse().map_err(bad)?,
            "--events" => demo.events = value.parse().map_err(bad)?,
            "--segment-bytes" => demo.segment_bytes = value.parse().map_err(bad)?,
            "--drops" => demo.drops = value.parse().map_err(bad)?,
            "--max-cut" => demo.max_cut = value.parse().map_err(bad)?,
            "--seed" => demo.seed = value.parse().map_err(bad)?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if demo.tasks == 0 || demo.events == 0 || demo.max_cut == 0 {
        return Err("--tasks, --events and --max-cut must be at least 1".into());
    }
    Ok(demo)
}

fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let demo = parse_args().map_err(|e| {
        eprintln!(
            "usage: replicate [--tasks N] [--events N] [--segment-bytes BYTES] [--drops N] \
             [--max-cut BYTES] [--seed N]"
        );
        e
    })?;
    println!(
        "seed {} (event sizes and cut points: --seed {0} repeats them)",
        demo.seed
    );
    let dir = tempfile::tempdir()?;
    let report = run(&demo, dir.path()).await?;

    let secs = report.append_time.as_secs_f64();
    println!(
        "primary: {} tasks appended {} durable records ({:.1} MB, {} segments) in {secs:.2} s: \
         {:.0} records/s, {:.1} MB/s",
        demo.tasks,
        report.records,
        megabytes(report.log_len),
        report.segments,
        report.records as f64 / secs,
        megabytes(report.log_len) / secs,
    );
    fn list<T: ToString>(items: &[T]) -> String {
        let strings: Vec<String> = items.iter().map(T::to_string).collect();
        strings.join(", ")
    }
    if !report.cuts.is_empty() {
        println!(
            "proxy: cuts the first {} connections after {} bytes",
            report.cuts.len(),
            list(&report.cuts)
        );
    }
    let follower = &report.follower;
    println!(
        "replica (started after half the events): {} records ({:.1} MB, {} segments) over {} \
         connections, resumed at {}",
        follower.records,
        megabytes(follower.copied),
        follower.segments,
        follower.resumed_from.len(),
        list(&follower.resumed_from),
    );
    println!(
        "replica: received {:.2} MB for {:.2} MB of log ({:.1} KB again after the cuts); \
         caught up {:.1} ms after the primary closed",
        megabytes(follower.received),
        megabytes(follower.copied),
        follower.received.saturating_sub(follower.copied) as f64 / 1e3,
        report.catch_up.as_secs_f64() * 1e3,
    );
    let secs = report.cold_time.as_secs_f64();
    println!(
        "cold copy of the closed log: {} records, {:.1} MB in {:.1} ms: {:.0} MB/s, \
         {:.0} records/s",
        report.cold.records,
        megabytes(report.cold.copied),
        secs * 1e3,
        megabytes(report.cold.copied) / secs,
        report.cold.records as f64 / secs,
    );
    println!(
        "every segment of both copies is byte-identical to the primary's ({} segments, {} bytes)",
        report.segments, report.log_len
    );
    Ok(())
}
