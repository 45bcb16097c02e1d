//! How the end of a decoder's input inside a record reads: a stream cut mid-record
//! is an error (`Error::IncompleteRecord`), a file's torn tail is the log's end, as
//! LevelDB's reader takes it.

use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Decoder, FramedRead};
use walcodec::{
    CodecError, LogCodec, LogDecoder, LogEncoder, LogInput, LogReader, LogTailer, Recovery,
};

/// Two small records, then a 100 KB record cut 40 KB short: what a sender that
/// died mid-record leaves. Returns the bytes and where the cut record starts.
fn cut_log() -> (BytesMut, u64) {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    encoder.encode_record(b"first", &mut log);
    encoder.encode_record(b"second", &mut log);
    let cut_start = log.len() as u64;
    encoder.encode_record(&vec![9u8; 100_000], &mut log);
    log.truncate(log.len() - 40_000);
    (log, cut_start)
}

/// A real localhost socket carrying `bytes`, closed by the sender once they are
/// written: the receiving end.
async fn socket_with(bytes: Bytes) -> TcpStream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket.write_all(&bytes).await.unwrap();
        socket.shutdown().await.unwrap();
    });
    let socket = TcpStream::connect(addr).await.unwrap();
    sender.await.unwrap();
    socket
}

#[tokio::test]
async fn a_socket_closed_mid_record_ends_with_an_error() {
    let (log, cut_start) = cut_log();
    let cut_bytes = log.len() as u64 - cut_start;
    let mut records = FramedRead::new(socket_with(log.freeze()).await, LogDecoder::new());
    assert_eq!(records.next().await.unwrap().unwrap(), &b"first"[..]);
    assert_eq!(records.next().await.unwrap().unwrap(), &b"second"[..]);
    match records.next().await {
        Some(Err(CodecError::IncompleteRecord { offset, bytes })) => {
            assert_eq!((offset, bytes), (cut_start, cut_bytes));
        }
        other => panic!("expected IncompleteRecord, got {other:?}"),
    }
    assert!(records.decoder().has_incomplete_tail());
    assert!(records.next().await.is_none());
}

/// The relay built the obvious way fails rather than closing its output as if the
/// log had ended there.
#[tokio::test]
async fn a_relay_from_a_cut_socket_fails() {
    let (log, cut_start) = cut_log();
    let socket = socket_with(log.freeze()).await;
    let mut copy = Vec::new();
    let relayed = LogDecoder::framed_read(socket)
        .forward(LogEncoder::framed_write(&mut copy))
        .await;
    assert!(
        matches!(relayed, Err(CodecError::IncompleteRecord { offset, .. }) if offset == cut_start),
        "{relayed:?}"
    );
}

/// `LogCodec`, the two-way codec, reads the same way.
#[tokio::test]
async fn the_codec_errs_on_a_socket_cut_mid_header() {
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"whole", &mut log);
    log.extend_from_slice(&[1, 2, 3]); // three bytes of a seven-byte header
    let records: Result<Vec<Bytes>, CodecError> =
        FramedRead::new(socket_with(log.freeze()).await, LogCodec::<Bytes>::new())
            .try_collect()
            .await;
    assert!(
        matches!(
            records,
            Err(CodecError::IncompleteRecord {
                offset: 12,
                bytes: 3
            })
        ),
        "{records:?}"
    );
}

/// Whatever the recovery mode, a stream cut inside a record does not end cleanly
/// (`AbsoluteConsistency` says so with its own error).
#[test]
fn a_cut_stream_is_an_error_in_every_mode() {
    let (log, cut_start) = cut_log();
    for recovery in Recovery::ALL {
        let mut decoder = LogDecoder::builder().recovery(recovery).build();
        let mut src = log.clone();
        let mut records = 0;
        let error = loop {
            match decoder.decode_eof(&mut src) {
                Ok(Some(_)) => records += 1,
                Ok(None) => panic!("{recovery}: the cut stream ended cleanly"),
                Err(e) => break e,
            }
        };
        assert_eq!(records, 2, "{recovery}");
        match recovery {
            Recovery::AbsoluteConsistency => {
                assert!(matches!(error, CodecError::Corruption { .. }), "{error}")
            }
            _ => assert!(
                matches!(error, CodecError::IncompleteRecord { offset, .. } if offset == cut_start),
                "{recovery}: {error}"
            ),
        }
        // The stream is over: no second error, no record.
        assert_eq!(decoder.decode_eof(&mut src).unwrap(), None);
    }
}

/// A stream that ends at a record boundary ends cleanly, as does an empty one.
#[test]
fn a_stream_ending_between_records_is_clean() {
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"only", &mut log);
    for bytes in [log.clone(), BytesMut::new()] {
        let mut decoder = LogDecoder::new();
        let mut src = bytes.clone();
        let mut n = 0;
        while decoder.decode_eof(&mut src).unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, usize::from(!bytes.is_empty()));
        assert!(!decoder.has_incomplete_tail());
    }
}

/// A file whose writer died mid-record reads as it always has: every whole record,
/// then the end, with the torn tail noted, through every file reader.
#[tokio::test]
async fn a_file_with_a_torn_tail_ends_cleanly() {
    let (log, _) = cut_log();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    std::fs::write(&path, &log).unwrap();

    let mut reader = LogReader::open(&path).await.unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        records.push(record.unwrap().data);
    }
    assert_eq!(records, [&b"first"[..], &b"second"[..]]);
    assert!(reader.decoder().has_incomplete_tail());

    // Modes that keep LevelDB's tolerant tail for files, and the one that does not.
    for recovery in Recovery::ALL {
        let mut builder = LogDecoder::builder();
        builder.recovery(recovery);
        let mut reader = LogReader::open_at(&path, 0, &builder).await.unwrap();
        let mut n = 0;
        let mut failed = false;
        while let Some(record) = reader.next_record().await {
            match record {
                Ok(_) => n += 1,
                Err(_) => failed = true,
            }
        }
        assert_eq!(n, 2, "{recovery}");
        assert_eq!(
            failed,
            recovery == Recovery::AbsoluteConsistency,
            "{recovery}"
        );
    }

    // A `FramedRead` of the file, told it reads a file.
    let file = tokio::fs::File::open(&path).await.unwrap();
    let records: Vec<Bytes> = LogDecoder::builder()
        .input(LogInput::File)
        .framed_read(file)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(records.len(), 2);

    // A follower waits at the torn tail for the rest of the record.
    let mut tail = LogTailer::open(&path).await.unwrap();
    for _ in 0..2 {
        tail.next_record().await.unwrap().unwrap();
    }
    assert!(tail.caught_up().await.unwrap());
}

/// A tailer built over any reader with a stream decoder still takes its input's
/// end as where the writer is, not as a cut.
#[tokio::test]
async fn a_tailer_never_takes_its_input_end_for_a_cut() {
    let (log, _) = cut_log();
    let mut tail = LogTailer::new(std::io::Cursor::new(log.to_vec()), LogDecoder::new());
    assert_eq!(tail.decoder().input(), LogInput::File);
    for _ in 0..2 {
        tail.next_record().await.unwrap().unwrap();
    }
    assert!(tail.caught_up().await.unwrap());
}
