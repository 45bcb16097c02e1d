//! Paired measurement for log shipping: a closed `LogDir` copied to a `Replica`
//! over localhost TCP, against the bound: the same segment files sent over the same
//! kind of socket with no log logic, written to files and synced once each. Rounds
//! alternate the two; prints each and the median ratio.
//!
//! ```text
//! cargo run --release --example replica_throughput -- 256   # MiB of log, default 256
//! ```

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use walcodec::{LogDir, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn replicate(log: &LogDir) -> Result<Duration, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn({
        let log = log.clone();
        async move {
            let (conn, _) = listener.accept().await?;
            Ok::<_, BoxError>(log.serve_replica(conn).await?)
        }
    });
    let dir = tempfile::tempdir()?;
    let mut replica = Replica::open(dir.path()).await?;
    let started = Instant::now();
    let end = replica
        .sync_from(TcpStream::connect(addr).await?)
        .await?
        .end;
    let elapsed = started.elapsed();
    server.await??;
    assert_eq!(end, log.end());
    Ok(elapsed)
}

/// The bound: each file's length and bytes over TCP, written out and synced.
async fn plain_send(log: &LogDir) -> Result<Duration, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let paths: Vec<_> = LogDir::list(log_path(log))?.segments;
    let sender = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await?;
        for segment in paths {
            let mut file = tokio::fs::File::open(&segment.path).await?;
            conn.write_u64_le(segment.len).await?;
            tokio::io::copy(&mut (&mut file).take(segment.len), &mut conn).await?;
        }
        Ok::<_, BoxError>(())
    });
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let mut conn = TcpStream::connect(addr).await?;
    let mut n = 0;
    while let Ok(len) = conn.read_u64_le().await {
        n += 1;
        let mut file = tokio::fs::File::create(dir.path().join(format!("{n:06}.log"))).await?;
        tokio::io::copy(&mut (&mut conn).take(len), &mut file).await?;
        file.sync_data().await?;
    }
    let elapsed = started.elapsed();
    sender.await??;
    Ok(elapsed)
}

fn log_path(log: &LogDir) -> std::path::PathBuf {
    // `LogDir` does not expose its path; the debug form names it.
    let text = format!("{log:?}");
    let start = text.find("dir: \"").expect("dir in Debug") + 6;
    let end = text[start..].find('"').unwrap() + start;
    std::path::PathBuf::from(&text[start..end])
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mib: usize = std::env::args().nth(1).map_or(Ok(256), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let log = LogDir::builder()
        .max_segment_bytes(64 << 20)
        .open(dir.path())
        .await?;
    let record = vec![0x5au8; 4000];
    while log.segments().iter().map(|s| s.1).sum::<u64>() < (mib as u64) << 20 {
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (log, record) = (log.clone(), record.clone());
                tokio::spawn(async move {
                    for _ in 0..64 {
                        log.append(&record).await?;
                    }
                    Ok::<_, walcodec::Error>(())
                })
            })
            .collect();
        for task in tasks {
            task.await??;
        }
    }
    log.close().await?;
    let bytes: u64 = log.segments().iter().map(|s| s.1).sum();
    let mut ratios = Vec::new();
    for round in 0..5 {
        let (bound, ours) = if round % 2 == 0 {
            let b = plain_send(&log).await?;
            (b, replicate(&log).await?)
        } else {
            let o = replicate(&log).await?;
            (plain_send(&log).await?, o)
        };
        let rate = |d: Duration| bytes as f64 / d.as_secs_f64() / (1 << 20) as f64;
        println!(
            "round {round}: replica {:.0} MiB/s, plain send {:.0} MiB/s, ratio {:.2}",
            rate(ours),
            rate(bound),
            bound.as_secs_f64() / ours.as_secs_f64()
        );
        ratios.push(bound.as_secs_f64() / ours.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{} MiB: median ratio {:.2} (replica / plain send throughput)",
        bytes >> 20,
        ratios[2]
    );
    Ok(())
}
