//! The replica's side of the replication protocol: arbitrary bytes as a primary's
//! stream into `Replica::sync_from`. It never panics, allocates within its bounds,
//! and writes nothing that did not verify: after the run every segment of the
//! replica decodes cleanly to its end, at a record boundary.
//!
//! The first byte picks the mode:
//! - 0: the input is the whole stream, hello included;
//! - 1: a valid hello and identity, then the input;
//! - 5: a valid hello, then an identity built from the input (its log id, last
//!   record, epoch count and epochs picked from the edges of their ranges: zero,
//!   u64::MAX, more epochs than a log keeps, numbers out of order), then records:
//!   a refused identity writes nothing (no `HISTORY`, no record), an accepted one
//!   is durable before the first record;
//! - 4: a valid hello, then messages built from the input (a tag byte, then each
//!   number picked from the edges of its range: 0, 1, a block's end, a segment
//!   number with no next one, u64::MAX, or raw bytes; data of whole records or
//!   garbage): every number a hostile primary can send lands on a bound. No
//!   segment numbered u64::MAX may ever appear;
//! - 2, 3: a stream built from the input, as a primary sends it: records (byte,
//!   shift pairs: sizes) split into segments 1 and 2, shipped in data messages of a
//!   size from the input, then damaged (offset, xor triples; a lone byte cuts). A
//!   second connection, undamaged, resumes from where the replica ended. Each
//!   replica segment must be a prefix of the one sent, at a record boundary, and,
//!   undamaged, whole after the second connection.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;
use walcodec::{
    Dialect, LogDecoder, LogDir, LogEncoder, LogPosition, Recovery, Replica,
    REPLICATION_PROTOCOL_VERSION,
};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

/// The primary's hello alone.
fn bare_hello() -> Vec<u8> {
    let mut m = b"WALCREPL".to_vec();
    m.extend_from_slice(&REPLICATION_PROTOCOL_VERSION.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&1u64.to_le_bytes());
    m.extend_from_slice(&0u64.to_le_bytes());
    m
}

/// An identity message: `log_id`, the last record vouched for, `count` as the
/// epoch count and then `epochs` (number, id, segment, offset).
fn identity(log_id: u128, last: Option<(u64, u64, u32)>, count: u32, epochs: &[[u64; 4]]) -> Vec<u8> {
    let mut m = vec![b'I'];
    m.extend_from_slice(&log_id.to_le_bytes());
    let (segment, offset, crc) = last.unwrap_or((0, 0, 0));
    m.push(u8::from(last.is_some()));
    m.extend_from_slice(&segment.to_le_bytes());
    m.extend_from_slice(&offset.to_le_bytes());
    m.extend_from_slice(&crc.to_le_bytes());
    m.extend_from_slice(&count.to_le_bytes());
    for epoch in epochs {
        for field in epoch {
            m.extend_from_slice(&field.to_le_bytes());
        }
    }
    m
}

/// The primary's hello and identity (a log with one epoch at segment 1's start).
fn hello() -> Vec<u8> {
    let mut m = bare_hello();
    m.extend_from_slice(&identity(7, None, 1, &[[1, 1, 1, 0]]));
    m
}

fn segment(m: &mut Vec<u8>, segment: u64, offset: u64) {
    m.push(b'S');
    m.extend_from_slice(&segment.to_le_bytes());
    m.extend_from_slice(&offset.to_le_bytes());
}

fn data(m: &mut Vec<u8>, bytes: &[u8], chunk: usize) {
    for piece in bytes.chunks(chunk) {
        m.push(b'D');
        m.extend_from_slice(&(piece.len() as u32).to_le_bytes());
        m.extend_from_slice(piece);
    }
}

fn sealed(m: &mut Vec<u8>, len: u64) {
    m.push(b'E');
    m.extend_from_slice(&len.to_le_bytes());
}

/// Bytes that differ from record to record.
fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    PATTERN.get_or_init(|| {
        (0..8 * 131 + (255 << 6))
            .map(|k| ((k * 7) ^ (k >> 8)) as u8)
            .collect()
    })
}

/// One connection: `stream` is what the primary sends; what the replica sends is
/// dropped.
async fn sync(replica: &mut Replica, stream: &[u8]) -> Result<LogPosition, walcodec::Error> {
    replica
        .sync_from(tokio::io::join(stream, tokio::io::sink()))
        .await
        .map(|synced| synced.end)
}

/// Every segment of the replica decodes cleanly to its end under
/// `AbsoluteConsistency`; returns each segment's number and bytes.
fn check_clean(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let listed = LogDir::list(dir).unwrap();
    listed.check().unwrap();
    let mut out = Vec::new();
    for s in listed.segments {
        let bytes = std::fs::read(&s.path).unwrap();
        let mut decoder = LogDecoder::builder()
            .dialect(Dialect::RocksDb)
            .log_number(s.number)
            .recovery(Recovery::AbsoluteConsistency)
            .build();
        let mut buffer = BytesMut::from(&bytes[..]);
        loop {
            match decoder.decode_eof(&mut buffer) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => panic!("segment {} holds what did not verify: {e}", s.number),
            }
        }
        out.push((s.number, bytes));
    }
    out
}

/// The logs of segments 1 and 2, and the record ends in each.
fn logs(sizes: &[u8], split: u8) -> [(Vec<u8>, Vec<u64>); 2] {
    let records: Vec<&[u8]> = sizes
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let len = (pair[0] as usize) << (pair[1] % 7);
            &pattern()[i * 131..i * 131 + len]
        })
        .collect();
    let split = (split as usize).min(records.len());
    let mut out: [(Vec<u8>, Vec<u64>); 2] = Default::default();
    for (part, (log, ends)) in [&records[..split], &records[split..]]
        .into_iter()
        .zip(out.iter_mut())
    {
        let mut encoder = LogEncoder::with_offset(0);
        let mut buf = BytesMut::new();
        ends.push(0);
        for record in part {
            ends.push(encoder.encode_record(record, &mut buf).end);
        }
        *log = buf.to_vec();
    }
    out
}

/// The stream a primary sends a replica ending at `from` (in segment 1 or 2).
fn ship(logs: &[(Vec<u8>, Vec<u64>); 2], from: LogPosition, chunk: usize) -> Vec<u8> {
    let mut m = hello();
    for (number, (log, _)) in [1u64, 2].into_iter().zip(logs) {
        if number < from.segment {
            continue;
        }
        let offset = if number == from.segment {
            from.offset
        } else {
            0
        };
        segment(&mut m, number, offset);
        data(&mut m, &log[offset as usize..], chunk);
        if number == 1 {
            sealed(&mut m, log.len() as u64);
        }
    }
    m
}

fn structured(dir: &Path, input: &[u8]) {
    let [split, chunk, rest @ ..] = input else {
        return;
    };
    let (sizes, damage) = rest.split_at(rest.len().min(16) & !1);
    let logs = logs(sizes, *split);
    let chunk = 1 + (*chunk as usize) * 257;
    let mut first = ship(&logs, LogPosition::new(1, 0), chunk);
    let damaged = !damage.is_empty();
    for step in damage.chunks(3) {
        if let [hi, lo, xor] = *step {
            let at = (usize::from(hi) << 8 | usize::from(lo)) % first.len();
            first[at] ^= xor.max(1);
        } else {
            let keep = usize::from(step[0]) * first.len() / 256;
            first.truncate(keep);
        }
    }
    runtime().block_on(async {
        let mut replica = Replica::open(dir).await.unwrap();
        let once = sync(&mut replica, &first).await;
        if !damaged {
            if let Err(e) = &once {
                panic!("an undamaged stream failed: {e}");
            }
        }
        let end = replica.end();
        if (1..=2).contains(&end.segment) {
            let second = ship(&logs, end, chunk);
            let again = sync(&mut replica, &second).await;
            if let Err(e) = again {
                panic!("resuming at {end} failed: {e}");
            }
        }
        replica.close().await.unwrap();
    });
    let copied = check_clean(dir);
    for (number, bytes) in &copied {
        let Some((log, ends)) = usize::try_from(*number)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| logs.get(i))
        else {
            // Only a damaged segment number names another segment.
            assert!(damaged);
            continue;
        };
        assert!(log.starts_with(bytes), "segment {number} is no prefix");
        assert!(
            ends.contains(&(bytes.len() as u64)),
            "segment {number} ends mid-record"
        );
    }
    if !damaged {
        let whole: Vec<(u64, Vec<u8>)> = [1u64, 2]
            .into_iter()
            .zip(logs.iter().map(|(log, _)| log.clone()))
            .collect();
        assert_eq!(copied, whole, "an undamaged stream was not copied whole");
    }
}

/// A number for a message field: the next input byte picks one of the edges, or
/// takes the next 8 bytes as is.
fn number(input: &mut &[u8]) -> u64 {
    const EDGES: [u64; 10] = [
        0,
        1,
        2,
        5,
        32_767,
        32_768,
        1 << 40,
        u64::MAX - 2,
        u64::MAX - 1,
        u64::MAX,
    ];
    let Some((&pick, rest)) = input.split_first() else {
        return 0;
    };
    *input = rest;
    match EDGES.get(usize::from(pick)) {
        Some(&edge) => edge,
        None if input.len() >= 8 => {
            let (raw, rest) = input.split_at(8);
            *input = rest;
            u64::from_le_bytes(raw.try_into().unwrap())
        }
        None => u64::from(pick),
    }
}

fn edges(dir: &Path, mut input: &[u8]) {
    let mut m = hello();
    let mut records = 0;
    while let Some((&op, rest)) = input.split_first() {
        input = rest;
        match op % 6 {
            0 => {
                let (s, o) = (number(&mut input), number(&mut input));
                segment(&mut m, s, o);
            }
            1 => {
                // Whole records, as a segment's start holds them.
                let mut encoder = LogEncoder::with_offset(0);
                let mut buf = BytesMut::new();
                let n = usize::from(input.first().copied().unwrap_or(1) % 4) + 1;
                for _ in 0..n {
                    let len = (records * 131) % 3000;
                    encoder.encode_record(&pattern()[..len], &mut buf);
                    records += 1;
                }
                data(&mut m, &buf, 1 << 20);
            }
            2 => {
                let len = usize::from(input.first().copied().unwrap_or(0)) * 37 + 1;
                data(&mut m, &pattern()[..len.min(pattern().len())], 1 << 20);
            }
            3 => sealed(&mut m, number(&mut input)),
            4 => m.push(b'H'),
            _ => {
                m.push(b'X');
                m.push(input.first().copied().unwrap_or(0) % 4);
                for _ in 0..4 {
                    m.extend_from_slice(&number(&mut input).to_le_bytes());
                }
            }
        }
    }
    runtime().block_on(async {
        let mut replica = Replica::open(dir).await.unwrap();
        let _ = sync(&mut replica, &m).await;
        let end = replica.end();
        assert_ne!(end.segment, u64::MAX);
        replica.close().await.unwrap();
    });
    let copied = check_clean(dir);
    assert!(copied.iter().all(|(number, _)| *number != u64::MAX));
    // Still a log directory.
    runtime().block_on(async {
        LogDir::open(dir).await.unwrap().close().await.unwrap();
    });
}

/// A hostile identity, then whole records: a refused identity leaves no trace.
fn identities(dir: &Path, mut input: &[u8]) {
    const COUNTS: [u32; 6] = [0, 1, 2, 1 << 16, (1 << 16) + 1, u32::MAX];
    let log_id = u128::from(number(&mut input)) | u128::from(number(&mut input)) << 64;
    let last = match input.split_first() {
        Some((&flag, rest)) => {
            input = rest;
            (flag & 1 == 1).then(|| (number(&mut input), number(&mut input), flag as u32))
        }
        None => None,
    };
    let count = match input.split_first() {
        Some((&pick, rest)) => {
            input = rest;
            COUNTS[usize::from(pick) % COUNTS.len()]
        }
        None => 1,
    };
    let mut epochs = Vec::new();
    while input.len() >= 4 && epochs.len() < 8 {
        epochs.push([
            number(&mut input),
            number(&mut input),
            number(&mut input),
            number(&mut input),
        ]);
    }
    let mut m = bare_hello();
    m.extend_from_slice(&identity(log_id, last, count, &epochs));
    segment(&mut m, 1, 0);
    let mut encoder = LogEncoder::with_offset(0);
    let mut buf = BytesMut::new();
    for i in 0..3 {
        encoder.encode_record(&pattern()[..i * 100], &mut buf);
    }
    data(&mut m, &buf, 1 << 20);
    runtime().block_on(async {
        let mut replica = Replica::open(dir).await.unwrap();
        let result = sync(&mut replica, &m).await;
        let end = replica.end();
        replica.close().await.unwrap();
        if result.is_err() && end.offset == 0 {
            // Refused in the handshake: nothing of it stands.
            assert!(!dir.join("HISTORY").exists(), "a refused identity was kept");
        } else {
            // Taken: the history was durable before the first record.
            assert!(dir.join("HISTORY").exists(), "records without a history");
            let (id, _) = LogDir::read_history(dir).unwrap().unwrap();
            assert_eq!(id.as_u128(), log_id);
        }
    });
    check_clean(dir);
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let root = if Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm")
    } else {
        tempfile::tempdir()
    };
    let root = root.unwrap();
    let dir = root.path().join("replica");
    match mode % 6 {
        0 | 1 => {
            let stream = if mode % 6 == 0 {
                rest.to_vec()
            } else {
                [hello(), rest.to_vec()].concat()
            };
            runtime().block_on(async {
                let mut replica = Replica::open(&dir).await.unwrap();
                let _ = sync(&mut replica, &stream).await;
                let end = replica.end();
                replica.close().await.unwrap();
                let copied = check_clean(&dir);
                let last = copied.last().unwrap();
                assert_eq!((last.0, last.1.len() as u64), (end.segment, end.offset));
            });
        }
        4 => edges(&dir, rest),
        5 => identities(&dir, rest),
        _ => structured(&dir, rest),
    }
});
