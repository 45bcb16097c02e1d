//! The follower in another process, with its events in the one order that needs
//! the re-read when it first sees its segment sealed (`Cursor::read_live`): it reads
//! past its last record into zeros while the segment is live, then, before it
//! looks for the next segment, the writer appends a record into those zeros and
//! moves on to the next segment. Taking the zeros it already read for the sealed
//! segment's end would skip that record.
//!
//! The order is fixed by a hook the reader calls after each read of a file (on the
//! thread that runs it: one current-thread runtime here), so the writer's steps
//! land exactly between that read and the reader's next look at the directory.

use std::cell::RefCell;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};

use crate::codec::encoder::LogEncoder;
use crate::logdir::reader::DirReader;
use crate::position::LogPosition;

/// What runs after the reader's next read of a file: (segment, end of the read).
type Hook = Box<dyn FnMut(u64, u64)>;

thread_local! {
    static AFTER_READ: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Called by the reader after each read of a segment's file (tests only).
pub(super) fn after_read(segment: u64, read_to: u64) {
    let hook = AFTER_READ.with(|hook| hook.borrow_mut().take());
    if let Some(mut hook) = hook {
        hook(segment, read_to);
    }
}

fn segment(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

#[tokio::test]
async fn a_follower_reads_again_what_the_writer_appended_before_it_saw_the_seal() {
    let dir = tempfile::tempdir().unwrap();
    let mut encoder = LogEncoder::new();
    let mut whole = BytesMut::new();
    let first = encoder.encode_record(b"first", &mut whole);
    let second = encoder.encode_record(b"second", &mut whole);
    // Segment 1 as preallocated: the first record, then zeros well past a read.
    let mut file = whole[..first.end as usize].to_vec();
    file.resize(256 * 1024, 0);
    std::fs::write(segment(dir.path(), 1), &file).unwrap();
    let mut next = BytesMut::new();
    LogEncoder::new().encode_record(b"third", &mut next);

    let mut reader = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow();
    let writer_dir = dir.path().to_path_buf();
    let next_end = next.len() as u64;
    let appended = std::rc::Rc::new(std::cell::Cell::new(false));
    let seen = std::rc::Rc::clone(&appended);
    AFTER_READ.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move |number, read_to| {
            // The reader's first read, a whole chunk: it holds the first record
            // and zeros after it.
            assert_eq!(number, 1);
            assert!(read_to > second.end, "the read ends at {read_to}");
            // The writer appends the second record where the zeros were, then
            // starts segment 2 (which seals segment 1).
            let out = std::fs::OpenOptions::new()
                .write(true)
                .open(segment(&writer_dir, 1))
                .unwrap();
            out.write_all_at(&whole[first.end as usize..], first.end)
                .unwrap();
            std::fs::write(segment(&writer_dir, 2), &next).unwrap();
            seen.set(true);
        }));
    });

    let mut read = Vec::new();
    for _ in 0..3 {
        // A follower that skipped a record would wait for one more for ever: a
        // bound turns that into this test's failure (not a timing assertion: the
        // records are all on disk before the first read returns).
        let record = tokio::time::timeout(std::time::Duration::from_secs(30), reader.next_record())
            .await
            .unwrap_or_else(|_| panic!("waiting for record {} after {read:?}", read.len() + 1))
            .unwrap()
            .unwrap();
        read.push((record.end, record.data));
    }
    assert!(appended.get(), "the hook ran");
    assert_eq!(
        read,
        [
            (LogPosition::new(1, first.end), Bytes::from_static(b"first")),
            (
                LogPosition::new(1, second.end),
                Bytes::from_static(b"second")
            ),
            (LogPosition::new(2, next_end), Bytes::from_static(b"third")),
        ]
    );
    assert!(reader.caught_up().await.unwrap());
}
