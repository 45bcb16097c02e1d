//! Log shipping as the `replicate` example does it (its primary, replica and proxy are
//! compiled in from `examples/replicate.rs`): a replica resumes from any record end and
//! from a connection cut at any byte, never copies a byte the primary has not made
//! durable, and ends byte-identical to the primary's log; over a `LogDir`, a replica
//! far behind gets the sealed segments, then follows the active one, and every segment
//! of its copy equals the primary's.

#[allow(dead_code)]
#[path = "../examples/replicate.rs"]
mod replicate;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use walcodec::{block_start, LogEncoder, Position, BLOCK_SIZE, HEADER_SIZE};

use replicate::{flaky_proxy, serve, Demo, FollowStats, LogEnd, Replica};

/// A log whose records end at the awkward places, and where each record sits.
struct Log {
    bytes: Vec<u8>,
    positions: Vec<Position>,
}

impl Log {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Where a replica holding `len` bytes resumes: the end of the last record that
    /// lies wholly within them.
    fn last_record_end_within(&self, len: u64) -> u64 {
        self.positions
            .iter()
            .map(|p| p.end)
            .filter(|&end| end <= len)
            .max()
            .unwrap_or(0)
    }

    fn records_after(&self, offset: u64) -> u64 {
        self.positions.iter().filter(|p| p.start >= offset).count() as u64
    }
}

struct LogBuilder {
    encoder: LogEncoder,
    bytes: BytesMut,
    positions: Vec<Position>,
}

impl LogBuilder {
    fn record(&mut self, len: usize) -> &mut Self {
        let n = self.positions.len();
        let data: Vec<u8> = (0..len).map(|i| (i * 31 + n * 7) as u8).collect();
        let position = self.encoder.encode_record(&data, &mut self.bytes);
        self.positions.push(position);
        self
    }

    /// A record that leaves exactly `left` bytes in its block (0: it ends on a block
    /// boundary).
    fn leaving(&mut self, left: usize) -> &mut Self {
        let room = BLOCK_SIZE - self.encoder.block_offset();
        assert!(room >= HEADER_SIZE + left, "no room to leave {left} bytes");
        self.record(room - HEADER_SIZE - left);
        assert_eq!(
            (BLOCK_SIZE - self.encoder.block_offset()) % BLOCK_SIZE,
            left
        );
        self
    }
}

/// Records ending exactly at a block end, with 1 to 7 bytes left (a trailer follows,
/// or with 7 the next record opens with an empty FIRST), spanning two and three
/// blocks, an empty one; the log itself ends 1 byte short of a block end.
fn awkward_log() -> Log {
    let mut b = LogBuilder {
        encoder: LogEncoder::new(),
        bytes: BytesMut::new(),
        positions: Vec::new(),
    };
    b.record(5).record(0).record(100).leaving(0);
    b.record(10).leaving(3).record(1000).leaving(7);
    b.record(50).record(70_000).record(20).leaving(6);
    b.record(40_000).record(3).leaving(1);
    let log = Log {
        bytes: b.bytes.to_vec(),
        positions: b.positions,
    };
    assert_eq!(
        log.positions[8].start % BLOCK_SIZE as u64,
        (BLOCK_SIZE - 7) as u64
    );
    assert_eq!(log.len() % BLOCK_SIZE as u64, (BLOCK_SIZE - 1) as u64);
    log
}

/// A primary serving the file at `path`, with what it may ship set through `ends`.
struct Primary {
    addr: SocketAddr,
    ends: watch::Sender<LogEnd>,
    server: JoinHandle<std::io::Result<()>>,
}

impl Drop for Primary {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn start_primary(path: &Path, end: LogEnd) -> Primary {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ends, receiver) = watch::channel(end);
    let server = tokio::spawn(serve(listener, path.to_path_buf(), receiver));
    Primary { addr, ends, server }
}

async fn sealed_primary(dir: &Path, log: &Log) -> Primary {
    let path = dir.join("primary.log");
    std::fs::write(&path, &log.bytes).unwrap();
    let end = LogEnd {
        durable_len: log.len(),
        sealed: true,
    };
    start_primary(&path, end).await
}

/// A proxy to `primary` that cuts its first connections after `cuts` bytes.
async fn start_proxy(primary: SocketAddr, cuts: Vec<u64>) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = tokio::spawn(async move {
        let _ = flaky_proxy(listener, primary, cuts).await;
    });
    (addr, proxy)
}

/// Follows `primary` into a copy at `path` (holding `prefix` first) until it is `len`
/// bytes long.
async fn copy(path: &Path, prefix: &[u8], primary: SocketAddr, len: u64) -> FollowStats {
    std::fs::write(path, prefix).unwrap();
    let mut replica = Replica::open(path).await.unwrap();
    assert_eq!(replica.resume_offset(), prefix.len() as u64);
    let (_stop, stop_at) = watch::channel(Some(len));
    tokio::time::timeout(Duration::from_secs(10), replica.follow(primary, stop_at))
        .await
        .expect("the replica finishes")
        .unwrap()
}

/// What a replica starting empty sends on each connection when the proxy cuts its
/// connections after `cuts` bytes (counted from the start of each stream, which is
/// the block holding the resume offset).
fn expected_resumes(log: &Log, cuts: &[u64]) -> Vec<u64> {
    let mut resume = 0;
    let mut resumes = Vec::new();
    for &cut in cuts {
        if resume == log.len() {
            return resumes;
        }
        resumes.push(resume);
        let reach = block_start(resume) + cut;
        if reach >= log.len() {
            return resumes; // the cut comes after the last byte: nothing is cut
        }
        resume = log.last_record_end_within(reach).max(resume);
    }
    if resume < log.len() {
        resumes.push(resume);
    }
    resumes
}

#[tokio::test]
async fn resume_from_every_record_end_gives_an_identical_copy() {
    let log = awkward_log();
    let dir = tempfile::tempdir().unwrap();
    let primary = sealed_primary(dir.path(), &log).await;
    let ends = std::iter::once(0).chain(log.positions.iter().map(|p| p.end));
    for (i, end) in ends.enumerate() {
        let path = dir.path().join(format!("copy-{i}.log"));
        let stats = copy(&path, &log.bytes[..end as usize], primary.addr, log.len()).await;
        assert!(
            std::fs::read(&path).unwrap() == log.bytes,
            "resumed at {end}"
        );
        assert_eq!(stats.records, log.records_after(end), "resumed at {end}");
        assert_eq!(stats.copied, log.len() - end);
        if end == log.len() {
            assert!(stats.resumed_from.is_empty(), "a complete copy connects");
        } else {
            assert_eq!(stats.resumed_from, [end]);
            // The stream starts at the resume offset's block: at most a block again.
            assert_eq!(stats.received, log.len() - block_start(end));
        }
    }
}

#[tokio::test]
async fn a_cut_anywhere_resumes_at_the_last_complete_record() {
    let log = awkward_log();
    let dir = tempfile::tempdir().unwrap();
    let primary = sealed_primary(dir.path(), &log).await;
    // Cuts inside a header, just after one, mid-payload (in a trailer-padded block,
    // in each block of a record that spans three), one byte short of a record's end,
    // at its end and just after (in a trailer).
    let mut cuts: Vec<u64> = log
        .positions
        .iter()
        .flat_map(|p| {
            let h = HEADER_SIZE as u64;
            let middle = p.start + h + (p.end - p.start - h) / 2;
            [
                p.start + 1,
                p.start + 3,
                p.start + h,
                middle,
                p.end - 1,
                p.end,
                p.end + 1,
            ]
        })
        .chain((1..=3).map(|block| block * BLOCK_SIZE as u64 - 2))
        .filter(|&cut| cut > 0 && cut < log.len())
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    for (i, &cut) in cuts.iter().enumerate() {
        let (proxy, _relays) = start_proxy(primary.addr, vec![cut]).await;
        let path = dir.path().join(format!("cut-{i}.log"));
        let stats = copy(&path, &[], proxy, log.len()).await;
        assert!(std::fs::read(&path).unwrap() == log.bytes, "cut at {cut}");
        assert_eq!(
            stats.resumed_from,
            [0, log.last_record_end_within(cut)],
            "cut at {cut}"
        );
        assert_eq!(stats.records, log.positions.len() as u64, "cut at {cut}");
    }
}

#[tokio::test]
async fn cuts_on_successive_connections_lose_and_repeat_nothing() {
    let log = awkward_log();
    let dir = tempfile::tempdir().unwrap();
    let primary = sealed_primary(dir.path(), &log).await;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut random = |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    for round in 0..12 {
        // Short cuts too, so some connections end before bringing a new record.
        let cuts: Vec<u64> = (0..1 + random(4))
            .map(|_| {
                let bound = if random(3) == 0 {
                    2000
                } else {
                    3 * BLOCK_SIZE as u64
                };
                1 + random(bound)
            })
            .collect();
        let (proxy, _relays) = start_proxy(primary.addr, cuts.clone()).await;
        let path = dir.path().join(format!("round-{round}.log"));
        let stats = copy(&path, &[], proxy, log.len()).await;
        assert!(std::fs::read(&path).unwrap() == log.bytes, "cuts {cuts:?}");
        assert_eq!(
            stats.resumed_from,
            expected_resumes(&log, &cuts),
            "cuts {cuts:?}"
        );
        assert_eq!(stats.records, log.positions.len() as u64, "cuts {cuts:?}");
    }
}

#[tokio::test]
async fn a_copy_torn_by_a_crash_resumes_after_its_last_complete_record() {
    let log = awkward_log();
    let dir = tempfile::tempdir().unwrap();
    let primary = sealed_primary(dir.path(), &log).await;
    // Torn inside a header, and inside the second block of a three-block record.
    let three_blocks = log.positions[9];
    assert!(three_blocks.end - three_blocks.start > 2 * BLOCK_SIZE as u64);
    for torn in [log.positions[3].end + 4, three_blocks.start + 40_000] {
        let path = dir.path().join(format!("torn-{torn}.log"));
        let kept = log.last_record_end_within(torn);
        std::fs::write(&path, &log.bytes[..torn as usize]).unwrap();
        let mut replica = Replica::open(&path).await.unwrap();
        assert_eq!(replica.resume_offset(), kept);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), kept, "cut durably");
        let (_stop, stop_at) = watch::channel(Some(log.len()));
        let stats = replica.follow(primary.addr, stop_at).await.unwrap();
        assert!(std::fs::read(&path).unwrap() == log.bytes, "torn at {torn}");
        assert_eq!(stats.resumed_from, [kept]);
    }
}

/// Polls until the file at `path` is `len` bytes long; panics after a second.
async fn wait_for_len(path: &Path, len: u64) {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let now = std::fs::metadata(path).map_or(0, |m| m.len());
        if now == len {
            return;
        }
        assert!(now < len, "{} grew past {len} to {now}", path.display());
        assert!(
            Instant::now() < deadline,
            "stuck at {now}, waiting for {len}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn only_durable_bytes_are_shipped_and_replicas_follow_growth() {
    let log = awkward_log();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("primary.log");
    // The whole log is in the file, but only a prefix ending 3 bytes short of a block
    // end is durable: a resume there starts past the durable end, in the next block.
    std::fs::write(&path, &log.bytes).unwrap();
    let durable = log.positions[5].end;
    assert!(block_start(durable) > durable);
    let end = LogEnd {
        durable_len: durable,
        sealed: false,
    };
    let primary = start_primary(&path, end).await;

    let (stop, stop_at) = watch::channel(None);
    let fresh_path = dir.path().join("fresh.log");
    let resumed_path = dir.path().join("resumed.log");
    let mut fresh = Replica::open(&fresh_path).await.unwrap();
    std::fs::write(&resumed_path, &log.bytes[..durable as usize]).unwrap();
    let mut resumed = Replica::open(&resumed_path).await.unwrap();
    let addr = primary.addr;
    let stop_at_too = stop_at.clone();
    let fresh = tokio::spawn(async move { fresh.follow(addr, stop_at).await });
    let resumed = tokio::spawn(async move { resumed.follow(addr, stop_at_too).await });

    wait_for_len(&fresh_path, durable).await;
    // Time for bytes past the durable end to arrive, were any sent.
    tokio::time::sleep(Duration::from_millis(30)).await;
    wait_for_len(&fresh_path, durable).await;
    wait_for_len(&resumed_path, durable).await;

    // The log grows (made durable in two steps), then is closed.
    let step = log.positions[10].end;
    primary.ends.send_replace(LogEnd {
        durable_len: step,
        sealed: false,
    });
    wait_for_len(&fresh_path, step).await;
    wait_for_len(&resumed_path, step).await;
    stop.send_replace(Some(log.len()));
    primary.ends.send_replace(LogEnd {
        durable_len: log.len(),
        sealed: true,
    });
    for (replica, path, first) in [(fresh, &fresh_path, 0), (resumed, &resumed_path, durable)] {
        let stats = tokio::time::timeout(Duration::from_secs(10), replica)
            .await
            .expect("the replica finishes")
            .unwrap()
            .unwrap();
        assert!(std::fs::read(path).unwrap() == log.bytes);
        // One connection followed the log through both steps.
        assert_eq!(stats.resumed_from, [first]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_replicates_a_segmented_log_through_dropped_connections() {
    let dir = tempfile::tempdir().unwrap();
    let demo = Demo {
        tasks: 4,
        events: 150,
        segment_bytes: 64 * 1024,
        drops: 4,
        max_cut: 48 * 1024,
        seed: 11,
    };
    // `run` itself fails unless every segment of both copies equals the primary's
    // byte for byte.
    let report = replicate::run(&demo, dir.path()).await.unwrap();
    assert_eq!(report.records, 600);
    assert_eq!(report.follower.records, 600);
    assert_eq!(report.cold.records, 600);
    assert_eq!(report.follower.copied, report.log_len);
    assert_eq!(report.cold.copied, report.log_len);
    // Dozens of segments: the replica started far behind (half the events were in
    // before it), went through the sealed ones and followed the active one.
    assert!(report.segments > 5, "{} segments", report.segments);
    assert_eq!(report.follower.segments, report.segments);
    assert_eq!(report.cold.segments, report.segments);
    for (name, _) in [("primary", 0), ("replica", 1), ("cold", 2)] {
        let n = std::fs::read_dir(dir.path().join(name))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".log")
            })
            .count();
        assert_eq!(n as u64, report.segments, "{name}");
    }
    // Each connection ends with a cut or a complete segment; resumes never go back.
    assert!(report.follower.reconnects() as u64 >= report.segments - 1);
    let resumes = &report.follower.resumed_from;
    assert!(resumes.windows(2).all(|w| w[0] <= w[1]), "{resumes:?}");
}
