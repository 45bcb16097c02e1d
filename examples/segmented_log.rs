//! A service with a durable event log that lives for months: it appends events to a
//! `LogDir`, applies them to its state, checkpoints the state with the log position
//! it reflects, purges the segments the checkpoint covers, and after a restart
//! rebuilds its state from the checkpoint plus the records after it.
//!
//! ```text
//! cargo run --release --example segmented_log
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use walcodec::{Error, LogDir, LogPosition};

/// The service's state: account balances, rebuilt from the log.
#[derive(Debug, Default, Clone, PartialEq)]
struct Balances(BTreeMap<String, i64>);

impl Balances {
    fn apply(&mut self, event: &[u8]) {
        // "account:amount"; a malformed event is skipped, never a panic.
        let Ok(text) = std::str::from_utf8(event) else {
            return;
        };
        let Some((account, amount)) = text.split_once(':') else {
            return;
        };
        if let Ok(amount) = amount.parse::<i64>() {
            *self.0.entry(account.to_string()).or_default() += amount;
        }
    }
}

/// A snapshot of the state and the log position it includes everything up to.
/// (A real service writes it durably: temporary file, fsync, rename, fsync dir.)
#[derive(Debug, Clone)]
struct Checkpoint {
    state: Balances,
    position: LogPosition,
}

async fn open(dir: &Path) -> Result<LogDir, Error> {
    LogDir::builder()
        .max_segment_bytes(16 * 1024) // small, so the demo rotates often
        .open(dir)
        .await
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let log = open(dir.path()).await?;

    // 1. Append events from many tasks; each append returns once it is durable.
    let mut tasks = Vec::new();
    for task in 0..8 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..250 {
                log.append(format!("account-{}:{}", (task + i) % 5, i % 7 - 3))
                    .await?;
            }
            Ok::<_, Error>(())
        }));
    }
    for task in tasks {
        task.await.expect("appender panicked")?;
    }
    println!(
        "appended 2000 events into {} segments",
        log.segments().len()
    );

    // 2. Seal the active segment, so the checkpoint below covers whole segments;
    //    then apply the log to the state and checkpoint it at the position reached.
    log.rotate().await?;
    let mut state = Balances::default();
    let mut reader = log.read_from(LogPosition::START)?;
    while let Some(record) = reader.next_record().await {
        state.apply(&record?.data);
    }
    let checkpoint = Checkpoint {
        state: state.clone(),
        position: reader.position(),
    };
    drop(reader);
    println!("checkpoint at {}", checkpoint.position);

    // 3. The checkpoint covers every segment up to it: purge them. (A position at
    //    the end of a purged segment still reads from the next one, restarts
    //    included.)
    let purged = log.purge_before(checkpoint.position).await?;
    println!(
        "purged {} segments; the log now starts at {}",
        purged.len(),
        log.start()
    );

    // 4. More events after the checkpoint, then a restart.
    for i in 0..100 {
        let event = format!("account-{}:{}", i % 3, 10);
        log.append(&event).await?;
        state.apply(event.as_bytes());
    }
    let end = log.close().await?;
    drop(log);

    // 5. After the restart: the checkpoint's state plus the records after it.
    let log = open(dir.path()).await?;
    assert_eq!(log.end(), end);
    let mut rebuilt = checkpoint.state.clone();
    let mut reader = log.read_from(checkpoint.position)?;
    let mut replayed = 0;
    while let Some(record) = reader.next_record().await {
        rebuilt.apply(&record?.data);
        replayed += 1;
    }
    drop(reader);
    println!("replayed {replayed} records after the checkpoint");
    assert_eq!(replayed, 100);
    assert_eq!(rebuilt, state, "the rebuilt state matches");
    println!("state after restart: {:?}", rebuilt.0);
    log.close().await?;
    Ok(())
}
