//! Records read straight from the archive, with ranged reads.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStore;
use walcodec::{Dialect, LogPosition};
use walcodec_archive::{Archive, Archiver};

use crate::support::{self, archived_records, assert_same_records, fill, open_log, Rng, S3Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_stream_from_the_archive_from_any_point() {
    let server = S3Server::start().await;
    // The dialects at once, each under its own prefix: their syncs overlap.
    futures::future::join_all(
        support::DIALECTS.map(|dialect| read_from_any_point(server.store(), dialect)),
    )
    .await;
}

/// A log of `dialect` archived to `store`, read back whole and from checkpoints.
async fn read_from_any_point(store: Arc<dyn ObjectStore>, dialect: Dialect) {
    let prefix = format!("read/{dialect:?}");
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), dialect, 32 * 1024).await;
    let mut rng = Rng(41);
    let written = fill(&log, &mut rng, 0, 80, 9000).await;
    log.rotate().await.unwrap();
    Archiver::new(Arc::clone(&store), prefix.as_str().into())
        .archive_sealed(&log)
        .await
        .unwrap();
    log.close().await.unwrap();
    // Reads of 4 KiB: records span several.
    let archive = Archive::open(Arc::clone(&store), prefix.as_str().into())
        .await
        .unwrap()
        .read_bytes(4096);
    let all = archived_records(&archive, LogPosition::START).await;
    assert_same_records(&all, &written);
    // From a checkpoint: the records after it.
    for i in [0usize, 1, 17, 40, 79] {
        let from = written[i].1;
        let rest: Vec<_> = archive.records(from).try_collect().await.unwrap();
        let expected: Vec<_> = written.iter().filter(|(_, end)| *end > from).collect();
        assert_eq!(rest.len(), expected.len(), "{dialect:?} from {from}");
        for ((data, _), record) in expected.iter().map(|r| (&r.0, &r.1)).zip(&rest) {
            assert_eq!(&record.data[..], &data[..]);
        }
    }
}
