//! Log shipping: a primary appends to its log with `AsyncLogWriter` and ships the log
//! over TCP; a replica reads the stream with `FramedRead` + `LogDecoder` and keeps an
//! aligned, byte-identical copy, resuming from its last complete record whenever the
//! connection drops.
//!
//! The log format is the wire format: the primary sends the raw bytes of its log file
//! and nothing else. The one message the other way opens each connection:
//!
//! ```text
//! replica -> primary  resume offset, u64 little-endian: the end of the last record the
//!                     replica has (0 for an empty copy); then nothing more
//! primary -> replica  the log from block_start(offset) on, each byte once it is
//!                     durable, following the log as it grows; once the log is closed
//!                     and fully sent, the primary closes the stream
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
//! writer did, block trailers included. The replica checks that every record lands at
//! the position the decoder read it from, so a primary log with anything else in it (a
//! zero-filled gap, a torn tail appended after) is refused rather than copied
//! misaligned; and every checksum is verified on the way.
//!
//! Only durable bytes are shipped: a replica must never hold a record the primary
//! could still lose in a crash, or the two would diverge.
//!
//! The demo: N tasks append events durably while a replica follows through a proxy
//! that cuts the connection after a random number of bytes, a few times. Once the
//! primary closes its log, the replica's file must equal the primary's; then a second
//! replica copies the closed log from scratch, which measures the replication
//! throughput free of the primary's sync rate. Exits non-zero on any mismatch.
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
use tokio::time::{timeout, MissedTickBehavior};
use tokio_util::codec::FramedRead;
use walcodec::{block_start, repair_log, AsyncLogWriter, LogDecoder, LogEncoder, BLOCK_SIZE};

/// Errors of the demo's pieces, carried to `main` as text and exit status 1.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bytes the primary reads from its log and writes to a replica at a time.
const SHIP_CHUNK: usize = 256 * 1024;

/// How long the primary waits for a new connection's resume offset.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the primary looks at its writer's durable length; the writer has no
/// notification for it.
const DURABLE_POLL_INTERVAL: Duration = Duration::from_millis(1);

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

/// Publishes `writer`'s durable length to `ends` every `interval` until the log is
/// sealed (by whoever closes the writer, with its final length).
pub async fn publish_durable_len(
    writer: AsyncLogWriter,
    ends: watch::Sender<LogEnd>,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    while !ends.borrow().sealed {
        tick.tick().await;
        let durable_len = writer.stats().durable_len;
        ends.send_if_modified(|end| {
            let grew = !end.sealed && durable_len > end.durable_len;
            if grew {
                end.durable_len = durable_len;
            }
            grew
        });
    }
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
                // A replica going away is routine; anything else deserves a line.
                let routine = e.downcast_ref::<io::Error>().is_some_and(|e| {
                    matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                    )
                });
                if !routine {
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
    mut ends: watch::Receiver<LogEnd>,
) -> Result<(), BoxError> {
    socket.set_nodelay(true)?;
    let mut offset = [0u8; 8];
    timeout(HANDSHAKE_TIMEOUT, socket.read_exact(&mut offset))
        .await
        .map_err(|_| "no resume offset")??;
    let resume = u64::from_le_bytes(offset);
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
enum Ended {
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

async fn relay(mut replica: TcpStream, upstream: SocketAddr, cut: Option<u64>) -> io::Result<()> {
    let mut primary = TcpStream::connect(upstream).await?;
    replica.set_nodelay(true)?;
    primary.set_nodelay(true)?;
    let mut offset = [0u8; 8];
    replica.read_exact(&mut offset).await?;
    primary.write_all(&offset).await?;
    match cut {
        Some(limit) => tokio::io::copy(&mut (&mut primary).take(limit), &mut replica).await?,
        None => tokio::io::copy(&mut primary, &mut replica).await?,
    };
    // A clean close: the replica gets every byte relayed, then end of stream.
    replica.shutdown().await
}

// ---------------------------------------------------------------------------------
// The demo

/// The demo's settings.
#[derive(Debug, Clone)]
pub struct Demo {
    /// Tasks appending to the primary's log.
    pub tasks: u32,
    /// Events each task appends.
    pub events: u32,
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
    /// The primary's final length, which both copies match byte for byte.
    pub log_len: u64,
    /// Where the proxy cut the first connections (bytes into each).
    pub cuts: Vec<u64>,
    /// From the first append to the primary's close.
    pub append_time: Duration,
    /// The replica that followed the primary through the proxy.
    pub follower: FollowStats,
    /// From the primary's close to the follower's last byte.
    pub catch_up: Duration,
    /// The replica that copied the closed log from scratch.
    pub cold: FollowStats,
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

/// Runs the demo in `dir`: the primary appends while a replica follows through a
/// flaky proxy; checks the copy; then copies the closed log again from scratch.
pub async fn run(demo: &Demo, dir: &Path) -> Result<Report, BoxError> {
    let primary_path = dir.join("primary.log");
    let writer = AsyncLogWriter::create(&primary_path).await?;
    // Start from what the writer has: a reopened log is durable up to its length.
    let (ends_tx, ends) = watch::channel(LogEnd {
        durable_len: writer.stats().durable_len,
        sealed: false,
    });
    let poller = tokio::spawn(publish_durable_len(
        writer.clone(),
        ends_tx.clone(),
        DURABLE_POLL_INTERVAL,
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let primary_addr = listener.local_addr()?;
    let server = tokio::spawn(serve(listener, primary_path.clone(), ends));

    let mut rng = SplitMix64(demo.seed);
    let cuts = cut_points(&mut rng, demo.drops, demo.max_cut);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let proxy_addr = listener.local_addr()?;
    let proxy = tokio::spawn(flaky_proxy(listener, primary_addr, cuts.clone()));

    let follower_path = dir.join("replica.log");
    let (stop_tx, stop_at) = watch::channel(None);
    let mut follower = Replica::open(&follower_path).await?;
    let following = tokio::spawn(async move { follower.follow(proxy_addr, stop_at).await });

    let started = Instant::now();
    let mut appenders = JoinSet::new();
    for task in 0..demo.tasks {
        let (writer, events, seed) = (writer.clone(), demo.events, demo.seed);
        appenders.spawn(async move {
            for seq in 0..events {
                writer.append(event(seed, task, seq)).await?;
            }
            Ok::<_, walcodec::Error>(())
        });
    }
    while let Some(appended) = appenders.join_next().await {
        appended??;
    }
    let records = writer.stats().records;
    let log_len = writer.close().await?;
    let append_time = started.elapsed();

    let closed = Instant::now();
    stop_tx.send_replace(Some(log_len));
    ends_tx.send_replace(LogEnd {
        durable_len: log_len,
        sealed: true,
    });
    poller.await?;
    let follower = timeout(Duration::from_secs(60), following)
        .await
        .map_err(|_| "the replica did not catch up within 60 s")???;
    let catch_up = closed.elapsed();
    proxy.abort();
    compare_files(&primary_path, &follower_path).await?;
    if follower.records != records {
        return Err(format!(
            "the replica copied {} records, the primary wrote {records}",
            follower.records
        )
        .into());
    }

    let cold_path = dir.join("cold.log");
    let mut cold = Replica::open(&cold_path).await?;
    let (_sealed, stop_at) = watch::channel(Some(log_len));
    let started = Instant::now();
    let cold_stats = timeout(Duration::from_secs(60), cold.follow(primary_addr, stop_at))
        .await
        .map_err(|_| "the cold copy did not finish within 60 s")??;
    let cold_time = started.elapsed();
    server.abort();
    compare_files(&primary_path, &cold_path).await?;

    Ok(Report {
        records,
        log_len,
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
            "usage: replicate [--tasks N] [--events N] [--drops N] [--max-cut BYTES] [--seed N]"
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
        "primary: {} tasks appended {} durable records ({:.1} MB) in {secs:.2} s: \
         {:.0} records/s, {:.1} MB/s",
        demo.tasks,
        report.records,
        megabytes(report.log_len),
        report.records as f64 / secs,
        megabytes(report.log_len) / secs,
    );
    let list = |offsets: &[u64]| {
        let strings: Vec<String> = offsets.iter().map(u64::to_string).collect();
        strings.join(", ")
    };
    if !report.cuts.is_empty() {
        println!(
            "proxy: cuts the first {} connections after {} bytes",
            report.cuts.len(),
            list(&report.cuts)
        );
    }
    let follower = &report.follower;
    println!(
        "replica: {} records ({:.1} MB) over {} connections, resumed at offsets {}",
        follower.records,
        megabytes(follower.copied),
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
        "both copies are byte-identical to the primary's log ({} bytes)",
        report.log_len
    );
    Ok(())
}
