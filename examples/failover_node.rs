//! One node of a replicated log that fails over: a primary that appends and
//! serves replicas over TCP, or a replica that follows one primary until it goes
//! away. `scripts/failover-drill.sh` runs three of them and kills the primary
//! under load, round after round; the library does the work, this program only
//! wires it to sockets and prints what happened, so it is the shape of a node you
//! would write yourself.
//!
//! ```text
//! failover_node primary DIR ADDRESS ACKS TAG [promote]   # serve and append
//! failover_node replica DIR ADDRESS                      # follow ADDRESS
//! failover_node check DIR ACKS...                        # every acknowledged record once
//! ```
//!
//! - `primary` opens `DIR` as the log (`promote`: a replica's directory, through
//!   `Replica::promote_with`, which starts a new epoch) with `sync_replicas(1)`,
//!   so an append is acknowledged only once it is durable here and on one
//!   replica. It serves replicas on `ADDRESS` (127.0.0.1 only) and appends from
//!   `LOAD_TASKS` concurrent tasks (default 16), writing the key of every record
//!   acknowledged to the file `ACKS`, one line each, after its `Ok`: what a client
//!   was told is durable. On SIGTERM it stops the load and closes the log, which
//!   says goodbye to its replicas.
//! - `replica` follows `ADDRESS`: on `Error::ReplicaDiverged` (a former primary
//!   holding records no replica had, or a replica that outran the one promoted)
//!   it rewinds to `common` and connects again; when the primary goes away it
//!   prints how (`cut` or `closed`, from `SyncEnd`) and its durable end, and
//!   exits. Whom to follow next is the operator's call (here, the drill's).
//! - `check` reads the log in `DIR` and checks every record's content, that no
//!   record is there twice, and that every key in the `ACKS` files is there.
//!
//! An example rather than a binary of the benches crate: `cargo test` builds it
//! with the library (so the drill in CI costs no build of its own), and it is a
//! program to copy, not a measurement.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::{TcpListener, TcpStream};
use walcodec::{DirReader, Error, LogDir, LogPosition, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The wall clock in nanoseconds: the drill times a failover across processes.
fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos()
}

/// Prints a line at once (stdout is a pipe the drill reads line by line).
fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A record: its key, `|`, then filler made from the key, of a length made from
/// the key (0 to 40,000 bytes: some records span blocks), so that `check` can
/// tell a damaged record from a good one by content alone.
fn record(key: &str) -> Vec<u8> {
    let seed = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let len = match seed % 8 {
        0 => 40_000,
        1 => 0,
        _ => (seed >> 8) as usize % 6000,
    };
    let mut data = Vec::with_capacity(key.len() + 1 + len);
    data.extend_from_slice(key.as_bytes());
    data.push(b'|');
    data.extend((0..len).map(|i| (seed >> (i % 7 * 8)) as u8 ^ i as u8));
    data
}

async fn primary(
    dir: &str,
    addr: &str,
    acks: &str,
    tag: &str,
    promote: bool,
) -> Result<(), BoxError> {
    // The primary's options, given to the replica promoted in its place too.
    let options = LogDir::builder()
        .max_segment_bytes(1 << 20)
        .sync_replicas(1)
        .replica_timeout(Duration::from_secs(5))
        .clone();
    let log = if promote {
        Replica::open(dir).await?.promote_with(&options).await?
    } else {
        options.open(dir).await?
    };
    say(format!("open {} {}", log.end(), now_ns()));
    let listener = TcpListener::bind(addr).await?;
    let (stop_serving, mut stopped) = tokio::sync::watch::channel(false);
    let serving = tokio::spawn({
        let log = log.clone();
        async move {
            let mut replicas = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((conn, _)) = accepted else { break };
                        let log = log.clone();
                        replicas.spawn(async move { log.serve_replica(conn).await });
                    }
                    _ = stopped.changed() => break,
                }
            }
            // Once the log is closed, each connection sends the rest of the log and
            // says goodbye before it ends: exiting before that would look like a
            // crash to the replicas.
            while let Some(served) = replicas.join_next().await {
                if let Ok(Err(e)) = served {
                    eprintln!("serving a replica: {e}");
                }
            }
        }
    });

    let acks = Arc::new(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(acks)?,
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let first = Arc::new(AtomicBool::new(false));
    let tasks: usize = std::env::var("LOAD_TASKS").map_or(Ok(16), |v| v.parse())?;
    let mut load = Vec::new();
    for task in 0..tasks {
        let (log, acks, stop, first) = (log.clone(), acks.clone(), stop.clone(), first.clone());
        let tag = tag.to_string();
        load.push(tokio::spawn(async move {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("{tag}-{task}-{seq}");
                seq += 1;
                match log.append(record(&key)).await {
                    Ok(_) => {
                        // One write per line: a SIGKILL never leaves half a key.
                        acks.lock()
                            .unwrap()
                            .write_all(format!("{key}\n").as_bytes())?;
                        if !first.swap(true, Ordering::Relaxed) {
                            say(format!("first-ack {}", now_ns()));
                        }
                    }
                    // Not acknowledged (its outcome is unknown): not logged.
                    Err(Error::ReplicasUnavailable { .. }) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(e) => return Err::<(), BoxError>(e.into()),
                }
            }
            Ok(())
        }));
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    term.recv().await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await??;
    }
    let end = log.close().await?;
    let _ = stop_serving.send(true);
    serving.await?;
    say(format!("closed {end}"));
    Ok(())
}

async fn replica(dir: &str, addr: &str) -> Result<(), BoxError> {
    let mut replica = Replica::open(dir).await?;
    let mut tries = 0;
    loop {
        let conn = match TcpStream::connect(addr).await {
            Ok(conn) => conn,
            // The primary may still be starting.
            Err(e) if tries < 1000 => {
                tries += 1;
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match replica.sync_from(conn).await {
            Ok(synced) => {
                let how = if synced.primary_closed_cleanly {
                    "closed"
                } else {
                    "cut"
                };
                let end = replica.close().await?;
                say(format!("{how} {end}"));
                return Ok(());
            }
            Err(Error::ReplicaDiverged { common, .. }) => {
                // Records past `common` were never the new primary's.
                say(format!("rewind {} {common}", replica.end()));
                replica.rewind(common).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn check(dir: &str, ack_files: &[String]) -> Result<bool, BoxError> {
    let mut reader = DirReader::open(Path::new(dir), LogPosition::START).await?;
    let mut seen: HashMap<String, u32> = HashMap::new();
    let (mut records, mut bad) = (0u64, 0u64);
    while let Some(got) = reader.next_record().await {
        let data = got?.data;
        records += 1;
        let key = data
            .iter()
            .position(|&b| b == b'|')
            .and_then(|at| std::str::from_utf8(&data[..at]).ok());
        match key {
            Some(key) if record(key) == data[..] => *seen.entry(key.to_string()).or_default() += 1,
            _ => bad += 1,
        }
    }
    let duplicates: u64 = seen.values().map(|&n| u64::from(n - 1)).sum();
    let (mut acked, mut lost) = (0u64, 0u64);
    for file in ack_files {
        for key in std::fs::read_to_string(file)?.lines() {
            acked += 1;
            if !seen.contains_key(key) {
                lost += 1;
                eprintln!("lost: {key}");
            }
        }
    }
    say(format!(
        "records {records} acked {acked} lost {lost} duplicates {duplicates} bad {bad}"
    ));
    Ok(lost == 0 && duplicates == 0 && bad == 0)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let a = |i: usize| args.get(i).map(String::as_str).ok_or("missing arguments");
    runtime.block_on(async {
        match a(0)? {
            "primary" => {
                primary(
                    a(1)?,
                    a(2)?,
                    a(3)?,
                    a(4)?,
                    a(5).is_ok_and(|p| p == "promote"),
                )
                .await
            }
            "replica" => replica(a(1)?, a(2)?).await,
            "check" => {
                if check(a(1)?, &args[2..]).await? {
                    Ok(())
                } else {
                    Err("records lost, duplicated or damaged".into())
                }
            }
            other => Err(format!("unknown command {other:?}: primary, replica or check").into()),
        }
    })
}
