//! Feature `serde`: the plain-data types round-trip through serde_json (and one
//! binary format), and a `LogPosition` is the string `000007:1234` in JSON.

use std::fmt::Debug;

use bytes::BytesMut;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::codec::Decoder;
use walcodec::{
    scan_log, AsyncLogWriter, Corruption, Dialect, LogDecoder, LogDir, LogEncoder, LogPosition,
    Position, Recovery,
};

/// Serializes to JSON and to postcard, reads both back, and returns the JSON.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) -> String {
    let json = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, value, "through {json}");
    let binary = postcard::to_stdvec(value).unwrap();
    let back: T = postcard::from_bytes(&binary).unwrap();
    assert_eq!(&back, value, "through postcard");
    json
}

#[test]
fn log_position_is_a_string_in_json_and_a_pair_in_binary() {
    let position = LogPosition::new(7, 1234);
    assert_eq!(round_trip(&position), r#""000007:1234""#);
    assert_eq!(round_trip(&LogPosition::START), r#""000000:0""#);
    assert_eq!(
        round_trip(&LogPosition::new(1_234_567, u64::MAX)),
        format!("\"1234567:{}\"", u64::MAX)
    );
    // Two varints in postcard: no text in a binary format.
    assert_eq!(postcard::to_stdvec(&position).unwrap(), [7, 0xd2, 0x09]);

    // Inside a service's own state.
    #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Checkpoint {
        applied: LogPosition,
    }
    let state = Checkpoint { applied: position };
    assert_eq!(round_trip(&state), r#"{"applied":"000007:1234"}"#);
}

#[test]
fn bad_log_position_strings_are_errors() {
    for bad in [r#""7""#, r#""a:1""#, r#""1:2:3""#, "7", "[7,1234]"] {
        let error = serde_json::from_str::<LogPosition>(bad).unwrap_err();
        assert!(
            error.to_string().contains("position") || error.is_data(),
            "{bad}: {error}"
        );
    }
}

#[test]
fn modes_and_dialects_use_their_display_names() {
    for mode in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        assert_eq!(round_trip(&mode), format!("\"{mode}\""));
    }
    assert_eq!(round_trip(&Dialect::LevelDb), r#""leveldb""#);
    assert_eq!(round_trip(&Dialect::RocksDb), r#""rocksdb""#);
    assert_eq!(
        round_trip(&walcodec::fragment::FragmentType::Full),
        r#""full""#
    );
    assert_eq!(
        round_trip(&Position { start: 7, end: 20 }),
        r#"{"start":7,"end":20}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_of_a_real_writer_and_decoder_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = AsyncLogWriter::create(&path).await.unwrap();
    for i in 0..50u32 {
        writer.append(&i.to_le_bytes()).await.unwrap();
    }
    let stats = writer.stats();
    writer.close().await.unwrap();
    assert_eq!(stats.records, 50);
    let json = round_trip(&stats);
    assert!(json.contains(r#""records":50"#), "{json}");
    assert!(json.contains(r#""max_sync_latency":{"secs":"#), "{json}");

    let mut decoder = LogDecoder::new();
    let mut buf = BytesMut::from(&std::fs::read(&path).unwrap()[..]);
    while decoder.decode_eof(&mut buf).unwrap().is_some() {}
    let decoded = decoder.stats();
    assert_eq!(decoded.records, 50);
    round_trip(&decoded);

    // Fields added later default: an older state file still reads.
    let old: walcodec::WriterStats = serde_json::from_str(r#"{"records":3}"#).unwrap();
    assert_eq!(old.records, 3);

    round_trip(&scan_log(&path).await.unwrap());
}

#[tokio::test]
async fn corruption_reports_and_listings_round_trip() {
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"one record", &mut log);
    log[8] ^= 1;
    let reports = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Corruption>::new()));
    let sink = reports.clone();
    let mut decoder = LogDecoder::builder()
        .recovery(Recovery::SkipCorrupted)
        .on_corruption(move |c| sink.lock().unwrap().push(c.clone()))
        .build();
    while decoder.decode_eof(&mut log).unwrap().is_some() {}
    let reports = reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 1);
    let json = round_trip(&reports[0]);
    assert!(json.contains(r#""kind":"checksum_mismatch""#), "{json}");

    let dir = tempfile::tempdir().unwrap();
    let logdir = LogDir::open(dir.path()).await.unwrap();
    logdir.append(b"x").await.unwrap();
    logdir.close().await.unwrap();
    let listing = LogDir::list(dir.path()).unwrap();
    assert_eq!(listing.segments.len(), 1);
    round_trip(&listing);
}
