//! Mesos RecordIO codec: framing, chunking, strictness, bounds and errors.

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt, TryStreamExt};
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder, FramedRead};
use walcodec::recordio::MAX_LENGTH_DIGITS;
use walcodec::{RecordIoCodec, RecordIoError};

fn encode(records: &[&[u8]]) -> Vec<u8> {
    let mut codec = RecordIoCodec::new();
    let mut out = BytesMut::new();
    for record in records {
        codec.encode(*record, &mut out).unwrap();
    }
    out.to_vec()
}

/// Feeds `input` to `codec` in chunks of the given sizes (cycled), the way
/// `FramedRead` does: `decode` until it wants more, then `decode_eof` at the end.
fn decode_chunked(
    codec: &mut RecordIoCodec,
    input: &[u8],
    sizes: &[usize],
) -> (Vec<Bytes>, Option<RecordIoError>) {
    let mut buf = BytesMut::new();
    let mut records = Vec::new();
    let mut pos = 0;
    for &size in sizes.iter().cycle() {
        if pos == input.len() {
            break;
        }
        let n = size.max(1).min(input.len() - pos);
        buf.extend_from_slice(&input[pos..pos + n]);
        pos += n;
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => break,
                Err(e) => return (records, Some(e)),
            }
        }
    }
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => return (records, None),
            Err(e) => return (records, Some(e)),
        }
    }
}

fn decode_all(codec: &mut RecordIoCodec, input: &[u8]) -> (Vec<Bytes>, Option<RecordIoError>) {
    decode_chunked(codec, input, &[input.len().max(1)])
}

fn strict() -> RecordIoCodec {
    RecordIoCodec::new()
}

fn lenient() -> RecordIoCodec {
    RecordIoCodec::builder().lenient(true).new_codec()
}

/// A stream with records of 0, 1, 2 and 3-digit lengths, empty ones between.
fn mixed_records() -> Vec<Vec<u8>> {
    vec![
        b"hello".to_vec(),
        Vec::new(),
        (0..=255u8).collect(),
        b"\n5\n".to_vec(),
        Vec::new(),
        vec![b'x'; 10],
        b"{\"type\":\"HEARTBEAT\"}".to_vec(),
    ]
}

fn as_slices(records: &[Vec<u8>]) -> Vec<&[u8]> {
    records.iter().map(Vec::as_slice).collect()
}

#[test]
fn encodes_decimal_length_newline_then_bytes() {
    assert_eq!(
        encode(&[b"hello", b"", b"hello world"]),
        b"5\nhello0\n11\nhello world"
    );
    let mut codec = RecordIoCodec::new();
    let mut from_bytes = BytesMut::new();
    let owned = Bytes::from_static(b"hello world");
    codec.encode(&owned[..], &mut from_bytes).unwrap();
    assert_eq!(&from_bytes[..], b"11\nhello world");
}

#[test]
fn encoder_writes_records_above_the_decoder_limit() {
    let mut codec = RecordIoCodec::builder().max_record_bytes(4).new_codec();
    let mut out = BytesMut::new();
    codec.encode(&b"too long"[..], &mut out).unwrap();
    assert_eq!(&out[..], b"8\ntoo long");
}

#[test]
fn every_split_point_of_a_multi_record_stream() {
    let records = mixed_records();
    let wire = encode(&as_slices(&records));
    for split in 0..=wire.len() {
        for codec in [strict(), lenient()] {
            let mut codec = codec;
            let sizes = [split, wire.len()];
            let (got, err) = decode_chunked(&mut codec, &wire, &sizes);
            assert!(err.is_none(), "split at {split}: {err:?}");
            assert_eq!(got, records, "split at {split}");
            assert_eq!(codec.offset(), wire.len() as u64);
        }
    }
}

#[test]
fn every_pair_of_split_points() {
    let records: Vec<Vec<u8>> = vec![b"abc".to_vec(), Vec::new(), vec![7; 12], b"z".to_vec()];
    let wire = encode(&as_slices(&records));
    for first in 1..wire.len() {
        for second in first..wire.len() {
            let mut codec = strict();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for piece in [&wire[..first], &wire[first..second], &wire[second..]] {
                buf.extend_from_slice(piece);
                while let Some(record) = codec.decode(&mut buf).unwrap() {
                    got.push(record);
                }
            }
            assert!(codec.decode_eof(&mut buf).unwrap().is_none());
            assert_eq!(got, records, "splits at {first} and {second}");
        }
    }
}

#[test]
fn one_byte_feeds() {
    let records = mixed_records();
    let wire = encode(&as_slices(&records));
    for mut codec in [strict(), lenient()] {
        let (got, err) = decode_chunked(&mut codec, &wire, &[1]);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, records);
    }
}

#[test]
fn zero_length_records_yield_empty_bytes() {
    let (got, err) = decode_all(&mut strict(), b"0\n0\n3\nabc0\n");
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, [&b""[..], b"", b"abc", b""]);

    // A lone zero-length record, completed by its header alone.
    let mut codec = strict();
    let mut buf = BytesMut::from(&b"0\n"[..]);
    assert_eq!(codec.decode(&mut buf).unwrap(), Some(Bytes::new()));
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
}

#[test]
fn leading_zeros_within_twenty_digits_are_a_length() {
    let (got, err) = decode_all(&mut strict(), b"003\nabc00000000000000000002\nxy");
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, [&b"abc"[..], b"xy"]);
}

#[test]
fn max_u64_length_is_rejected_by_the_size_limit_not_overflow() {
    let (got, err) = decode_all(&mut strict(), b"2\nok18446744073709551615\n");
    assert_eq!(got, [&b"ok"[..]]);
    match err {
        Some(RecordIoError::RecordTooLarge {
            offset,
            header,
            len,
            max,
        }) => {
            assert_eq!(offset, 4);
            assert_eq!(header, "18446744073709551615\\n");
            assert_eq!(len, u64::MAX);
            assert_eq!(max, RecordIoCodec::DEFAULT_MAX_RECORD_BYTES);
        }
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
}

#[test]
fn length_past_u64_max_overflows() {
    for input in [
        &b"18446744073709551616\n"[..],
        b"99999999999999999999\n",
        // Detected at the 20th digit, without waiting for a newline.
        b"18446744073709551616",
    ] {
        let mut codec = strict();
        let mut buf = BytesMut::from(input);
        match codec.decode(&mut buf) {
            Err(RecordIoError::Overflow { offset: 0, header }) => {
                assert_eq!(header.as_bytes(), &input[..20]);
            }
            other => panic!("{input:?}: expected Overflow, got {other:?}"),
        }
    }
}

#[test]
fn signs_hex_and_spaces_are_rejected_in_both_modes() {
    for (input, byte, header) in [
        (&b"-1\n"[..], b'-', "-"),
        (b"+5\nhello", b'+', "+"),
        (b"0x10\n", b'x', "0x"),
        (b" 12\n", b' ', " "),
        (b"12 \n", b' ', "12 "),
        (b"1_0\n", b'_', "1_"),
        (b"\xff\n", 0xff, "\\xff"),
    ] {
        for mut codec in [strict(), lenient()] {
            let mut buf = BytesMut::from(input);
            match codec.decode(&mut buf) {
                Err(RecordIoError::NonDigit {
                    offset: 0,
                    byte: b,
                    header: h,
                }) => {
                    assert_eq!(b, byte, "{input:?}");
                    assert_eq!(h, header, "{input:?}");
                }
                other => panic!("{input:?}: expected NonDigit, got {other:?}"),
            }
        }
    }
}

#[test]
fn carriage_return_is_an_error_when_strict_and_accepted_when_lenient() {
    let wire = b"5\r\nhello3\r\nabc";
    match decode_all(&mut strict(), wire) {
        (
            got,
            Some(RecordIoError::NonDigit {
                offset: 0, byte, ..
            }),
        ) => {
            assert!(got.is_empty());
            assert_eq!(byte, b'\r');
        }
        other => panic!("expected NonDigit, got {other:?}"),
    }
    let (got, err) = decode_all(&mut lenient(), wire);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(got, [&b"hello"[..], b"abc"]);
}

#[test]
fn carriage_return_at_eof_is_a_cut_header_when_lenient() {
    // Strict: the `\r` is wrong as soon as it is seen.
    let mut codec = strict();
    let mut buf = BytesMut::from(&b"5\r"[..]);
    assert!(matches!(
        codec.decode(&mut buf),
        Err(RecordIoError::NonDigit { byte: b'\r', .. })
    ));

    // Lenient: a `\n` may still come; at EOF the header is cut.
    let mut codec = lenient();
    let mut buf = BytesMut::from(&b"5\r"[..]);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    match codec.decode_eof(&mut buf) {
        Err(RecordIoError::UnexpectedEof {
            offset: 0,
            header,
            body_received: 0,
            body_len: None,
        }) => assert_eq!(header, "5\\r"),
        other => panic!("expected UnexpectedEof, got {other:?}"),
    }
}

#[test]
fn lenient_carriage_return_must_be_followed_by_newline() {
    for input in [&b"5\rx"[..], b"5\r5\n", b"\r\r\n"] {
        match decode_all(&mut lenient(), input) {
            (_, Some(RecordIoError::NonDigit { byte: b'\r', .. })) => {}
            other => panic!("{input:?}: expected NonDigit, got {other:?}"),
        }
    }
}

#[test]
fn empty_header_is_an_error_when_strict() {
    match decode_all(&mut strict(), b"3\nabc\n3\nxyz") {
        (got, Some(RecordIoError::EmptyHeader { offset, header })) => {
            assert_eq!(got, [&b"abc"[..]]);
            assert_eq!(offset, 5);
            assert_eq!(header, "\\n");
        }
        other => panic!("expected EmptyHeader, got {other:?}"),
    }
}

#[test]
fn lenient_skips_empty_lines_between_records() {
    let wire = b"\n\r\n3\nabc\n\n\r\n0\n3\r\nxyz\r\n\n";
    for sizes in [&[wire.len()][..], &[1], &[2, 3]] {
        let (got, err) = decode_chunked(&mut lenient(), wire, sizes);
        assert!(err.is_none(), "{sizes:?}: {err:?}");
        assert_eq!(got, [&b"abc"[..], b"", b"xyz"], "{sizes:?}");
    }
}

#[test]
fn lenient_errors_point_at_the_header_after_skipped_lines() {
    match decode_all(&mut lenient(), b"1\na\n\r\n-1\n") {
        (_, Some(e @ RecordIoError::NonDigit { .. })) => assert_eq!(e.offset(), Some(6)),
        other => panic!("expected NonDigit, got {other:?}"),
    }
}

#[test]
fn lenient_empty_lines_are_consumed_as_they_come() {
    let mut codec = lenient();
    let mut buf = BytesMut::new();
    for _ in 0..64 {
        buf.extend_from_slice(&[b'\n'; 16 * 1024]);
        buf.extend_from_slice(b"\r\n");
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(buf.is_empty(), "empty lines left buffered: {}", buf.len());
    }
    buf.extend_from_slice(b"2\nok");
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap(), &b"ok"[..]);
    assert_eq!(codec.offset(), 64 * (16 * 1024 + 2) + 4);
}

#[test]
fn header_longer_than_twenty_digits_without_newline_fails_fast() {
    for mut codec in [strict(), lenient()] {
        let mut buf = BytesMut::new();
        for i in 0..MAX_LENGTH_DIGITS {
            buf.extend_from_slice(b"1");
            assert_eq!(codec.decode(&mut buf).unwrap(), None, "digit {i}");
        }
        buf.extend_from_slice(b"1");
        match codec.decode(&mut buf) {
            Err(RecordIoError::TooManyDigits { offset: 0, header }) => {
                assert_eq!(header, "1".repeat(21));
            }
            other => panic!("expected TooManyDigits, got {other:?}"),
        }
    }
    // With a newline after them the verdict is the same.
    assert!(matches!(
        decode_all(&mut strict(), b"000000000000000000001\nx").1,
        Some(RecordIoError::TooManyDigits { .. })
    ));
}

#[tokio::test]
async fn endless_digits_end_the_stream_instead_of_buffering() {
    // Twenty 1s still fit in a u64; the 21st digit is one too many.
    let mut frames = FramedRead::new(tokio::io::repeat(b'1'), RecordIoCodec::new());
    assert!(matches!(
        frames.next().await,
        Some(Err(RecordIoError::TooManyDigits { offset: 0, .. }))
    ));
    // Twenty 7s do not.
    let mut frames = FramedRead::new(tokio::io::repeat(b'7'), RecordIoCodec::new());
    assert!(matches!(
        frames.next().await,
        Some(Err(RecordIoError::Overflow { offset: 0, .. }))
    ));
    let mut frames = FramedRead::new(tokio::io::repeat(b'\n'), RecordIoCodec::new());
    assert!(matches!(
        frames.next().await,
        Some(Err(RecordIoError::EmptyHeader { offset: 0, .. }))
    ));
}

#[test]
fn partial_header_at_eof_is_unexpected_eof() {
    match decode_all(&mut strict(), b"3\nabc12") {
        (
            got,
            Some(RecordIoError::UnexpectedEof {
                offset,
                header,
                body_received,
                body_len,
            }),
        ) => {
            assert_eq!(got, [&b"abc"[..]]);
            assert_eq!((offset, header.as_str()), (5, "12"));
            assert_eq!((body_received, body_len), (0, None));
        }
        other => panic!("expected UnexpectedEof, got {other:?}"),
    }
}

#[test]
fn partial_body_at_eof_is_unexpected_eof() {
    for input in [&b"3\nabc5\nhe"[..], b"3\nabc5\n"] {
        match decode_chunked(&mut strict(), input, &[1]) {
            (
                got,
                Some(RecordIoError::UnexpectedEof {
                    offset,
                    header,
                    body_received,
                    body_len,
                }),
            ) => {
                assert_eq!(got, [&b"abc"[..]]);
                assert_eq!((offset, header.as_str()), (5, "5\\n"));
                assert_eq!(body_received, input.len() as u64 - 7);
                assert_eq!(body_len, Some(5));
            }
            other => panic!("{input:?}: expected UnexpectedEof, got {other:?}"),
        }
    }
}

#[test]
fn empty_stream_and_clean_end_are_not_errors() {
    let mut codec = strict();
    assert!(codec.decode_eof(&mut BytesMut::new()).unwrap().is_none());
    let (got, err) = decode_all(&mut strict(), b"1\na");
    assert!(err.is_none());
    assert_eq!(got, [&b"a"[..]]);
}

#[test]
fn record_too_large_is_refused_before_reserving() {
    let mut codec = RecordIoCodec::builder().max_record_bytes(16).new_codec();
    let mut buf = BytesMut::from(&b"16\n"[..]);
    buf.extend_from_slice(&[b'a'; 16]);
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap().len(), 16);

    let mut buf = BytesMut::with_capacity(8);
    buf.extend_from_slice(b"17\n");
    let capacity = buf.capacity();
    match codec.decode(&mut buf) {
        Err(RecordIoError::RecordTooLarge {
            offset,
            len: 17,
            max: 16,
            ..
        }) => assert_eq!(offset, 19),
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    assert_eq!(
        buf.capacity(),
        capacity,
        "memory reserved for a refused record"
    );
}

#[cfg(target_pointer_width = "64")]
#[test]
fn a_huge_limit_does_not_reserve_what_the_header_announces() {
    let mut codec = RecordIoCodec::builder()
        .max_record_bytes(usize::MAX)
        .new_codec();
    let mut buf = BytesMut::from(&b"18446744073709551615\nabc"[..]);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    assert!(
        buf.capacity() <= 2 * RecordIoCodec::DEFAULT_MAX_RECORD_BYTES,
        "reserved {} bytes",
        buf.capacity()
    );
    match codec.decode_eof(&mut buf) {
        Err(RecordIoError::UnexpectedEof {
            body_received: 3,
            body_len: Some(u64::MAX),
            ..
        }) => {}
        other => panic!("expected UnexpectedEof, got {other:?}"),
    }
}

#[test]
fn large_body_is_read_into_place_and_not_copied() {
    const LEN: usize = 1 << 20;
    let body: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    let mut codec = strict();
    let mut buf = BytesMut::new();
    buf.extend_from_slice(format!("{LEN}\n").as_bytes());
    buf.extend_from_slice(&body[..1000]);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);

    // The decoder made room for the whole body: the rest lands where it belongs.
    assert!(buf.capacity() >= LEN, "capacity {}", buf.capacity());
    let start = buf.as_ptr();
    buf.extend_from_slice(&body[1000..]);
    assert_eq!(buf.as_ptr(), start, "body bytes were moved");

    let record = codec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(record.as_ptr(), start, "record is a copy, not a view");
    assert_eq!(record, body);
}

#[test]
fn decoding_after_an_error_returns_nothing_and_drains() {
    let mut codec = strict();
    let mut buf = BytesMut::from(&b"-1\n3\nabc"[..]);
    assert!(codec.decode(&mut buf).is_err());
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    assert!(buf.is_empty());
    buf.extend_from_slice(b"3\nabc");
    assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
    assert!(buf.is_empty());
}

#[tokio::test]
async fn an_error_ends_the_framed_stream() {
    let mut wire = b"3\nabc0x3\n".to_vec();
    // Well-formed records after the bad header, more than one read's worth.
    for _ in 0..4000 {
        wire.extend_from_slice(b"3\nxyz");
    }
    let mut frames = FramedRead::new(&wire[..], RecordIoCodec::new());
    assert_eq!(frames.next().await.unwrap().unwrap(), &b"abc"[..]);
    let err = frames.next().await.unwrap().unwrap_err();
    assert_eq!(err.offset(), Some(5));
    // Polled on, the stream reads the source to its end but yields nothing from it.
    for _ in 0..3 {
        assert!(frames.next().await.is_none());
    }
    assert_eq!(frames.decoder().offset(), wire.len() as u64);
}

#[test]
fn error_messages_are_lowercase_with_offset_and_header() {
    let cases: [(&[u8], &str); 6] = [
        (b"\n", "empty record header at offset 0: \"\\n\""),
        (b"-1\n", "non-digit byte '-' in record header at offset 0: \"-\""),
        (
            b"111111111111111111111",
            "record header at offset 0 has more than 20 digits: \"111111111111111111111\"",
        ),
        (
            b"99999999999999999999",
            "record length at offset 0 overflows u64: \"99999999999999999999\"",
        ),
        (
            b"9999999999\n",
            "record at offset 0 is larger than the limit (9999999999 > 8388608 bytes): \"9999999999\\n\"",
        ),
        (
            b"4\nab",
            "unexpected eof in record at offset 0: header \"4\\n\", 2 of 4 body bytes",
        ),
    ];
    for (input, message) in cases {
        let (_, err) = decode_all(&mut strict(), input);
        let text = err.expect("an error").to_string();
        assert_eq!(text, message);
        assert!(!text.ends_with('.'));
    }
    let (_, err) = decode_all(&mut strict(), b"12");
    assert_eq!(
        err.unwrap().to_string(),
        "unexpected eof in record at offset 0: header \"12\", header incomplete"
    );
}

#[test]
fn offset_counts_consumed_bytes() {
    let mut codec = strict();
    let mut buf = BytesMut::from(&b"3\nabc10\n01234"[..]);
    codec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(codec.offset(), 5);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    assert_eq!(codec.offset(), 8, "header consumed, body awaited");
}

#[tokio::test]
async fn builder_read_write_and_framed_round_trip() {
    let builder = {
        let mut b = RecordIoCodec::builder();
        b.max_record_bytes(1024);
        b
    };
    let mut wire = Vec::new();
    let mut sink = builder.new_write(&mut wire);
    sink.send(&b"one"[..]).await.unwrap();
    sink.send(&b""[..]).await.unwrap();
    // One item type: closing needs no annotation.
    sink.close().await.unwrap();
    drop(sink);
    let got: Vec<Bytes> = builder.new_read(&wire[..]).try_collect().await.unwrap();
    assert_eq!(got, [&b"one"[..], b""]);

    let (a, b) = tokio::io::duplex(64);
    let mut left = builder.new_framed(a);
    let mut right = builder.new_framed(b);
    let writer = tokio::spawn(async move {
        for i in 0..100u32 {
            left.send(i.to_string().as_bytes()).await.unwrap();
        }
    });
    for i in 0..100u32 {
        assert_eq!(right.next().await.unwrap().unwrap(), i.to_string());
    }
    writer.await.unwrap();
    assert!(right.next().await.is_none());
}

#[tokio::test]
async fn io_errors_pass_through() {
    let reader = tokio_test::io::Builder::new()
        .read(b"3\nab")
        .read_error(std::io::Error::other("boom"))
        .build();
    let mut frames = FramedRead::new(reader, RecordIoCodec::new());
    match frames.next().await {
        Some(Err(RecordIoError::Io(e))) => assert_eq!(e.to_string(), "boom"),
        other => panic!("expected Io, got {other:?}"),
    }
}

// ---- property tests ----------------------------------------------------------------

/// How a whole-buffer reader classifies a stream's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Empty,
    NonDigit,
    TooManyDigits,
    Overflow,
    TooLarge,
    Eof,
}

fn verdict(e: &RecordIoError) -> (Verdict, u64) {
    let v = match e {
        RecordIoError::EmptyHeader { .. } => Verdict::Empty,
        RecordIoError::NonDigit { .. } => Verdict::NonDigit,
        RecordIoError::TooManyDigits { .. } => Verdict::TooManyDigits,
        RecordIoError::Overflow { .. } => Verdict::Overflow,
        RecordIoError::RecordTooLarge { .. } => Verdict::TooLarge,
        RecordIoError::UnexpectedEof { .. } => Verdict::Eof,
        other => panic!("unexpected error {other:?}"),
    };
    (v, e.offset().unwrap())
}

/// The naive reference: whole input at once, lines split on `\n`, lengths parsed by
/// `str::parse`. Where the streaming decoder fails fast, the verdict is the one for
/// the earliest bad byte, which is what this computes from the complete line.
fn oracle(input: &[u8], max: u64, lenient: bool) -> (Vec<Vec<u8>>, Option<(Verdict, u64)>) {
    let mut records = Vec::new();
    let mut pos = 0;
    loop {
        if lenient {
            loop {
                if input[pos..].starts_with(b"\n") {
                    pos += 1;
                } else if input[pos..].starts_with(b"\r\n") {
                    pos += 2;
                } else {
                    break;
                }
            }
        }
        if pos == input.len() {
            return (records, None);
        }
        let at = pos as u64;
        let rest = &input[pos..];
        let newline = rest.iter().position(|&b| b == b'\n');
        let line = &rest[..newline.unwrap_or(rest.len())];
        let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
        let text = |n: usize| std::str::from_utf8(&line[..n]).unwrap();
        if digits >= 20 && text(20).parse::<u64>().is_err() {
            return (records, Some((Verdict::Overflow, at)));
        }
        if digits > 20 {
            return (records, Some((Verdict::TooManyDigits, at)));
        }
        match (&line[digits..], newline) {
            ([], Some(_)) if digits == 0 => return (records, Some((Verdict::Empty, at))),
            ([], Some(_)) => {}
            ([b'\r'], Some(_)) if lenient => {}
            ([], None) => return (records, Some((Verdict::Eof, at))),
            ([b'\r'], None) if lenient && rest.len() == digits + 1 => {
                return (records, Some((Verdict::Eof, at)))
            }
            _ => return (records, Some((Verdict::NonDigit, at))),
        }
        let len: u64 = text(digits).parse().unwrap();
        if len > max {
            return (records, Some((Verdict::TooLarge, at)));
        }
        let body = &rest[newline.unwrap() + 1..];
        if (body.len() as u64) < len {
            return (records, Some((Verdict::Eof, at)));
        }
        records.push(body[..len as usize].to_vec());
        pos = input.len() - body.len() + len as usize;
    }
}

/// Pieces of a stream, mostly well-formed, with the troubles peers send.
fn segment() -> impl Strategy<Value = Vec<u8>> {
    let record = proptest::collection::vec(any::<u8>(), 0..40).prop_map(|body| {
        let mut out = format!("{}\n", body.len()).into_bytes();
        out.extend_from_slice(&body);
        out
    });
    let junk = proptest::collection::vec(
        proptest::sample::select(b"0123456789\r\n-+x ".to_vec()),
        1..6,
    );
    let long_digits =
        proptest::collection::vec(proptest::sample::select(b"0123456789".to_vec()), 18..23);
    prop_oneof![
        12 => record,
        2 => Just(b"\n".to_vec()),
        2 => Just(b"\r\n".to_vec()),
        1 => Just(b"3\r\nabc".to_vec()),
        1 => junk,
        1 => long_digits,
        1 => Just(b"18446744073709551615\n".to_vec()),
        1 => Just(b"18446744073709551616\n".to_vec()),
        1 => Just(b"99\nshort".to_vec()),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn streaming_decoder_matches_the_whole_buffer_oracle(
        segments in proptest::collection::vec(segment(), 0..12),
        sizes in proptest::collection::vec(1usize..24, 1..8),
        lenient_mode: bool,
        max in prop_oneof![Just(RecordIoCodec::DEFAULT_MAX_RECORD_BYTES), 0usize..50],
    ) {
        let input = segments.concat();
        let mut codec = RecordIoCodec::builder()
            .lenient(lenient_mode)
            .max_record_bytes(max)
            .new_codec();
        let (records, err) = decode_chunked(&mut codec, &input, &sizes);
        let (expected, expected_err) = oracle(&input, max as u64, lenient_mode);
        prop_assert_eq!(records, expected);
        prop_assert_eq!(err.as_ref().map(verdict), expected_err);
    }

    #[test]
    fn round_trip_through_random_read_chunks(
        records in proptest::collection::vec(
            prop_oneof![
                3 => proptest::collection::vec(any::<u8>(), 0..200),
                1 => proptest::collection::vec(any::<u8>(), 0..5000),
            ],
            0..16,
        ),
        sizes in proptest::collection::vec(1usize..700, 1..16),
        lenient_mode: bool,
    ) {
        let wire = encode(&as_slices(&records));
        let mut mock = tokio_test::io::Builder::new();
        let mut pos = 0;
        for &size in sizes.iter().cycle() {
            if pos == wire.len() {
                break;
            }
            let n = size.min(wire.len() - pos);
            mock.read(&wire[pos..pos + n]);
            pos += n;
        }
        let reader = mock.build();
        let got: Vec<Bytes> = runtime().block_on(async {
            RecordIoCodec::builder()
                .lenient(lenient_mode)
                .new_read(reader)
                .try_collect()
                .await
        }).unwrap();
        prop_assert_eq!(got, records);
    }

    #[test]
    fn lenient_decoder_reads_records_with_empty_lines_between(
        records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..30), 0..10),
        blank in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![Just(&b"\n"[..]), Just(&b"\r\n"[..])], 0..3),
            10,
        ),
        crlf in proptest::collection::vec(any::<bool>(), 10),
        sizes in proptest::collection::vec(1usize..16, 1..8),
    ) {
        let mut wire = Vec::new();
        for (i, record) in records.iter().enumerate() {
            wire.extend(blank[i].concat());
            wire.extend_from_slice(record.len().to_string().as_bytes());
            wire.extend_from_slice(if crlf[i] { b"\r\n" } else { b"\n" });
            wire.extend_from_slice(record);
        }
        let (got, err) = decode_chunked(&mut lenient(), &wire, &sizes);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(got, records);
    }

    #[test]
    fn arbitrary_bytes_decode_alike_whole_byte_by_byte_and_by_oracle(
        text in "[0-9]{0,4}",
        tail in proptest::collection::vec(any::<u8>(), 0..64),
        lenient_mode: bool,
    ) {
        let mut input = text.into_bytes();
        input.extend_from_slice(&tail);
        let codec = || RecordIoCodec::builder().lenient(lenient_mode).new_codec();
        let whole = decode_all(&mut codec(), &input);
        let byte_by_byte = decode_chunked(&mut codec(), &input, &[1]);
        let (expected, expected_err) = oracle(&input, RecordIoCodec::DEFAULT_MAX_RECORD_BYTES as u64, lenient_mode);
        prop_assert_eq!(&whole.0, &expected);
        prop_assert_eq!(&byte_by_byte.0, &expected);
        prop_assert_eq!(whole.1.as_ref().map(verdict), expected_err);
        prop_assert_eq!(byte_by_byte.1.as_ref().map(verdict), expected_err);
    }
}
