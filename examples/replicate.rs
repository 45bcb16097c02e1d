//! Log shipping with `LogDir::serve_replica` and `Replica::sync_from`: tasks append
//! to a primary `LogDir` with small segments; a replica starts far behind and
//! follows over TCP through a proxy that cuts the connection after a random number
//! of bytes, a few times; it reconnects each time and resumes after its last
//! complete record. Once the primary closes its log, every segment of the replica
//! must equal the primary's, byte for byte; then the replica is promoted and
//! appended to. Exits non-zero on any mismatch.
//!
//! ```text
//! cargo run --release --example replicate
//! cargo run --release --example replicate -- --seed 7 --tasks 16 --events 2000 --drops 8
//! ```

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use walcodec::{LogDir, LogPosition, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Relays one connection to the primary, cutting it after `cut` bytes from the
/// primary (at any byte: in the hello, a message header, a record, a trailer).
async fn relay(replica: TcpStream, primary: SocketAddr, cut: Option<u64>) -> std::io::Result<()> {
    let upstream = TcpStream::connect(primary).await?;
    let (mut from_replica, mut to_replica) = replica.into_split();
    let (mut from_primary, mut to_primary) = upstream.into_split();
    let up = tokio::spawn(async move { tokio::io::copy(&mut from_replica, &mut to_primary).await });
    match cut {
        Some(cut) => {
            let mut limited = tokio::io::AsyncReadExt::take(&mut from_primary, cut);
            tokio::io::copy(&mut limited, &mut to_replica).await?;
        }
        None => {
            tokio::io::copy(&mut from_primary, &mut to_replica).await?;
        }
    }
    to_replica.shutdown().await?;
    up.abort();
    Ok(())
}

/// A small deterministic generator, so a seed replays a run.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn event(task: u64, seq: u64) -> Vec<u8> {
    let len = 20 + ((task * 7919 + seq * 104_729) % 3000) as usize;
    let mut bytes = format!("task {task} event {seq} ").into_bytes();
    bytes.resize(len, b'.');
    bytes
}

fn arg(name: &str, default: u64) -> Result<u64, BoxError> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args.get(i + 1).ok_or("missing value")?.parse()?),
        None => Ok(default),
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let (seed, tasks, events, drops) = (
        arg("--seed", 1)?,
        arg("--tasks", 8)?,
        arg("--events", 1000)?,
        arg("--drops", 5)?,
    );
    let mut rng = SplitMix64(seed);
    let dirs = (tempfile::tempdir()?, tempfile::tempdir()?);
    let log = LogDir::builder()
        .max_segment_bytes(1 << 20)
        .open(dirs.0.path())
        .await?;

    // The primary serves every replica that connects, each from its own task.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let primary = listener.local_addr()?;
    tokio::spawn({
        let log = log.clone();
        async move {
            while let Ok((conn, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move { log.serve_replica(conn).await });
            }
        }
    });

    let append = |range: std::ops::Range<u64>| {
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let (log, range) = (log.clone(), range.clone());
                tokio::spawn(async move {
                    for seq in range {
                        log.append(event(task, seq)).await?;
                    }
                    Ok::<_, walcodec::Error>(())
                })
            })
            .collect();
        async move {
            for handle in handles {
                handle.await??;
            }
            Ok::<_, BoxError>(())
        }
    };
    // Half the events before the replica exists: it starts far behind.
    append(0..events / 2).await?;
    let appending = tokio::spawn(append(events / 2..events));

    // The replica, through a proxy that cuts its first `drops` connections.
    let proxy = TcpListener::bind("127.0.0.1:0").await?;
    let proxy_addr = proxy.local_addr()?;
    let cuts: Vec<Option<u64>> = (0..drops)
        .map(|_| Some(rng.next() % 4_000_000))
        .chain([None])
        .collect();
    tokio::spawn(async move {
        for cut in cuts {
            let Ok((conn, _)) = proxy.accept().await else {
                return;
            };
            tokio::spawn(relay(conn, primary, cut));
        }
    });
    let mut replica = Replica::open(dirs.1.path()).await?;
    let started = Instant::now();
    let closing = tokio::spawn({
        let log = log.clone();
        async move {
            appending.await??;
            Ok::<_, BoxError>(log.close().await?)
        }
    });
    let mut connections = 0;
    let end = loop {
        connections += 1;
        let reached = match replica
            .sync_from(TcpStream::connect(proxy_addr).await?)
            .await
        {
            Ok(reached) => reached,
            // A cut in the handshake is a truncated hello: retried like any cut.
            Err(e) if connections <= drops => {
                println!("connection {connections} failed: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        println!("connection {connections} ended at {}", reached.end);
        // The primary's goodbye: it closed its log and sent all of it. Without
        // it, the connection was cut: connect again.
        if reached.primary_closed_cleanly {
            break reached.end;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    closing.await??;
    println!(
        "replica at {end} after {connections} connections in {:.2?}",
        started.elapsed()
    );

    // Byte for byte: every segment of the primary has an identical copy.
    let list = LogDir::list(dirs.0.path())?;
    for segment in &list.segments {
        let copy = std::fs::read(dirs.1.path().join(segment.path.file_name().unwrap()))?;
        if copy != std::fs::read(&segment.path)? {
            return Err(format!("segment {} differs", segment.number).into());
        }
    }
    println!("{} segments identical", list.segments.len());

    // Failover: the replica takes over appending, and reads back everything.
    let promoted = replica.promote().await?;
    promoted.append("after the failover").await?;
    let mut reader = promoted.read_from(LogPosition::START)?;
    let mut records = 0u64;
    while let Some(record) = reader.next_record().await {
        record?;
        records += 1;
    }
    if records != tasks * events + 1 {
        return Err(format!("{records} records, expected {}", tasks * events + 1).into());
    }
    promoted.close().await?;
    println!("promoted replica holds all {records} records");
    Ok(())
}
