//! A small durable event log: many tasks append events through `AsyncLogWriter`
//! (each `append` returns once its event is on disk, and concurrent appends share
//! syncs), then the log is replayed with `FramedRead` + `LogDecoder` and every event is
//! checked: present once, intact, in each task's order, where its append said.
//!
//! ```text
//! cargo run --release --example event_log
//! cargo run --release --example event_log -- --tasks 256 --events 200 --path /data/events.log
//! ```
//!
//! Options: `--tasks N` (default 64), `--events N` per task (default 500), `--path FILE`
//! (default: a new file in a temporary directory; an existing log is appended to and
//! only this run's events are checked), `--min-sync-interval-us N` (default 0).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use tokio_util::codec::FramedRead;
use walcodec::{LogDecoder, Position, WriterOptions};

struct Args {
    tasks: u32,
    events: u32,
    path: Option<PathBuf>,
    min_sync_interval: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        tasks: 64,
        events: 500,
        path: None,
        min_sync_interval: Duration::ZERO,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--tasks" => args.tasks = value()?.parse().map_err(|e| format!("--tasks: {e}"))?,
            "--events" => args.events = value()?.parse().map_err(|e| format!("--events: {e}"))?,
            "--path" => args.path = Some(PathBuf::from(value()?)),
            "--min-sync-interval-us" => {
                let micros = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
                args.min_sync_interval = Duration::from_micros(micros);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if args.tasks == 0 || args.events == 0 {
        return Err("--tasks and --events must be at least 1".into());
    }
    Ok(args)
}

const KINDS: [&str; 4] = ["page_view", "click", "add_to_cart", "checkout"];

/// The event task `task` appends as its `seq`-th: JSON, with a crc32c of everything
/// before the `check` field so a reader can tell an intact event from a damaged one.
/// `run` tells this run's events from those of earlier runs on the same log.
fn event(run: u64, task: u32, seq: u32) -> String {
    let mix = (u64::from(task) << 32 | u64::from(seq)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let body = format!(
        r#"{{"run":{run},"task":{task},"seq":{seq},"kind":"{}","user":"u-{:05}","amount_cents":{}"#,
        KINDS[(mix >> 60) as usize % KINDS.len()],
        (mix >> 20) % 100_000,
        (mix >> 40) % 50_000,
    );
    let check = crc32c::crc32c(body.as_bytes());
    format!(r#"{body},"check":"{check:08x}"}}"#)
}

/// The (run, task, seq) an event claims; `None` if it is not an event at all.
fn claimed_ids(record: &[u8]) -> Option<(u64, u32, u32)> {
    let text = std::str::from_utf8(record).ok()?;
    let field = |name: &str| -> Option<u64> {
        let start = text.find(&format!(r#""{name}":"#))? + name.len() + 3;
        let digits = text[start..].split(|c: char| !c.is_ascii_digit()).next()?;
        digits.parse().ok()
    };
    Some((
        field("run")?,
        u32::try_from(field("task")?).ok()?,
        u32::try_from(field("seq")?).ok()?,
    ))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args().map_err(|e| {
        eprintln!(
            "usage: event_log [--tasks N] [--events N] [--path FILE] [--min-sync-interval-us N]"
        );
        e
    })?;
    let temp = tempfile::tempdir()?;
    let path = args
        .path
        .clone()
        .unwrap_or_else(|| temp.path().join("events.log"));
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_micros() as u64;

    // Append: every task writes its events one after the other; each append resolves
    // once the event is durable.
    let log = WriterOptions::new()
        .min_sync_interval(args.min_sync_interval)
        .open(&path)
        .await?;
    let start_len = log.stats().len;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..args.tasks {
        let log = log.clone();
        let events = args.events;
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::with_capacity(events as usize);
            for seq in 0..events {
                let began = Instant::now();
                let position = log.append(event(run, task, seq)).await?;
                acked.push((position, began.elapsed()));
            }
            Ok::<_, walcodec::Error>(acked)
        }));
    }
    let mut positions: HashMap<(u32, u32), Position> = HashMap::new();
    let mut latencies = Vec::new();
    for (task, handle) in tasks.into_iter().enumerate() {
        for (seq, (position, latency)) in handle.await??.into_iter().enumerate() {
            positions.insert((task as u32, seq as u32), position);
            latencies.push(latency);
        }
    }
    let elapsed = started.elapsed();
    let stats = log.stats();
    let len = log.close().await?;
    latencies.sort_unstable();

    let appended = u64::from(args.tasks) * u64::from(args.events);
    println!("log: {} ({} bytes)", path.display(), len);
    println!(
        "appended {appended} durable events from {} tasks in {:.3} s: {:.0} events/s, {:.1} MB/s",
        args.tasks,
        elapsed.as_secs_f64(),
        appended as f64 / elapsed.as_secs_f64(),
        (len - start_len) as f64 / elapsed.as_secs_f64() / 1e6,
    );
    println!(
        "batching: {} records, {} syncs, {:.1} records/sync (largest batch {} records, {} bytes)",
        stats.records,
        stats.syncs,
        stats.records as f64 / stats.syncs.max(1) as f64,
        stats.largest_batch_records,
        stats.largest_batch_bytes,
    );
    println!(
        "append latency: p50 {:.0} µs, p99 {:.0} µs; last sync {:.0} µs, slowest {:.0} µs",
        percentile(&latencies, 0.5).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
        stats.last_sync_latency.unwrap_or_default().as_secs_f64() * 1e6,
        stats.max_sync_latency.unwrap_or_default().as_secs_f64() * 1e6,
    );

    // Replay with FramedRead and check every event.
    let started = Instant::now();
    let file = tokio::fs::File::open(&path).await?;
    let mut records = FramedRead::new(file, LogDecoder::new());
    let mut next_seq: HashMap<u32, u32> = HashMap::new();
    let (mut replayed, mut ours) = (0u64, 0u64);
    while let Some(record) = records.try_next().await? {
        replayed += 1;
        let position = records
            .decoder()
            .last_record()
            .expect("a record was just returned");
        let (event_run, task, seq) =
            claimed_ids(&record).ok_or_else(|| format!("not an event at {position:?}"))?;
        if event_run != run {
            continue; // an earlier run's event in a reused log
        }
        if record != event(run, task, seq).as_bytes() {
            return Err(format!("event {task}/{seq} at {position:?} is damaged").into());
        }
        let expected_seq = next_seq.entry(task).or_insert(0);
        if seq != *expected_seq {
            return Err(format!("task {task}: event {seq} where {expected_seq} was due").into());
        }
        *expected_seq += 1;
        if positions.remove(&(task, seq)) != Some(position) {
            return Err(format!("event {task}/{seq} is not where its append put it").into());
        }
        ours += 1;
    }
    if !positions.is_empty() {
        return Err(format!("{} acknowledged events are missing", positions.len()).into());
    }
    let elapsed = started.elapsed();
    println!(
        "replayed {replayed} records in {:.3} s ({:.0} records/s): all {ours} events of this run \
         present once, intact, in order, at their acknowledged positions",
        elapsed.as_secs_f64(),
        replayed as f64 / elapsed.as_secs_f64(),
    );
    Ok(())
}
