//! What replication costs per commit, with the timing taken out: a primary appends
//! `batches` batches of 64 256-byte records, each waited for on every replica
//! (localhost TCP, in this process) before the next, so every run makes the same
//! commits, messages and replica syncs. Count the work from outside, against the
//! same run with no replica:
//!
//! ```text
//! cargo build --release --example replica_cost
//! valgrind --tool=callgrind target/release/examples/replica_cost 1 500   # replicas, batches
//! valgrind --tool=callgrind target/release/examples/replica_cost 0 500
//! ```
//!
//! Directories go to `REPLICA_COST_DIR` (default: the system's temporary
//! directory; a tmpfs such as /dev/shm leaves out the disk).

use walcodec::{LogDir, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let replicas: usize = args.next().map_or(Ok(1), |a| a.parse())?;
    let batches: usize = args.next().map_or(Ok(500), |a| a.parse())?;
    let base = std::env::var_os("REPLICA_COST_DIR").unwrap_or(std::env::temp_dir().into());
    let dir = tempfile::tempdir_in(&base)?;
    let log = LogDir::open(dir.path()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (mut copies, mut durable) = (Vec::new(), Vec::new());
    for _ in 0..replicas {
        let replica_dir = tempfile::tempdir_in(&base)?;
        let mut replica = Replica::open(replica_dir.path()).await?;
        durable.push(replica.durable_end());
        let conn = tokio::net::TcpStream::connect(addr).await?;
        let syncing = tokio::spawn(async move { replica.sync_from(conn).await });
        let (served, _) = listener.accept().await?;
        let serving = tokio::spawn({
            let log = log.clone();
            async move { log.serve_replica(served).await }
        });
        copies.push((replica_dir, syncing, serving));
    }
    let batch = vec![[0x5au8; 256]; 64];
    for _ in 0..batches {
        let end = log.append_batch(batch.iter()).await?.last().unwrap().end;
        for end_rx in &mut durable {
            end_rx.wait_for(|&copied| copied >= end).await?;
        }
    }
    let end = log.close().await?;
    for (_dir, syncing, serving) in copies {
        serving.await??;
        assert_eq!(syncing.await??.end, end);
    }
    println!("{replicas} replicas, {batches} batches of 64 records, end {end}");
    Ok(())
}
