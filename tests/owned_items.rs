//! The codecs take owned records (`Bytes`, `BytesMut`, `Vec<u8>`) through their item
//! type parameter, and write exactly the bytes the slice form writes.

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt, TryStreamExt};
use tokio_util::codec::{Encoder, Framed, FramedRead, FramedWrite};
use walcodec::{LogCodec, LogDecoder, LogEncoder, RecordIoCodec};

const RECORDS: [&[u8]; 4] = [b"one", b"", &[7u8; 40_000], b"four"];

fn by_slices() -> BytesMut {
    let mut expected = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in RECORDS {
        encoder.encode_record(record, &mut expected);
    }
    expected
}

#[test]
fn owned_items_encode_the_bytes_slices_do() {
    let expected = by_slices();
    let mut bytes = BytesMut::new();
    let mut encoder = LogEncoder::<Bytes>::new();
    let mut vec = BytesMut::new();
    let mut vec_encoder = LogEncoder::<Vec<u8>>::new();
    let mut bytes_mut = BytesMut::new();
    let mut bytes_mut_encoder = LogEncoder::<BytesMut>::new();
    for record in RECORDS {
        encoder
            .encode(Bytes::copy_from_slice(record), &mut bytes)
            .unwrap();
        vec_encoder.encode(record.to_vec(), &mut vec).unwrap();
        bytes_mut_encoder
            .encode(BytesMut::from(record), &mut bytes_mut)
            .unwrap();
    }
    assert_eq!(bytes, expected);
    assert_eq!(vec, expected);
    assert_eq!(bytes_mut, expected);
    // A change of item type keeps the place in the log.
    let mut tail = BytesMut::new();
    let mut slices = encoder.with_items::<[u8]>();
    assert_eq!(slices.offset(), expected.len() as u64);
    slices.encode_record(b"after", &mut tail);
    assert_eq!(slices.offset(), (expected.len() + tail.len()) as u64);
}

#[tokio::test]
async fn a_log_copied_by_forward_reads_back_the_same() {
    let src = by_slices();
    let mut dst = Vec::new();
    FramedRead::new(&src[..], LogDecoder::new())
        .forward(FramedWrite::new(&mut dst, LogEncoder::new()))
        .await
        .unwrap();
    assert_eq!(dst, src);
    let back: Vec<Bytes> = FramedRead::new(&dst[..], LogDecoder::new())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(back, RECORDS);
}

#[tokio::test]
async fn a_tcp_relay_passes_records_between_two_clients() {
    use tokio::net::{TcpListener, TcpStream};

    // The relay: whatever the first connection sends goes to the second.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let relay = tokio::spawn(async move {
        let (a, _) = listener.accept().await.unwrap();
        let (b, _) = listener.accept().await.unwrap();
        let from: Framed<TcpStream, LogCodec> = Framed::new(a, LogCodec::new());
        let to = Framed::new(b, LogCodec::new());
        from.forward(to).await
    });
    let mut sender = Framed::new(TcpStream::connect(addr).await.unwrap(), LogCodec::new());
    // Only reads: naming the codec (slices, the default) picks its sink's items.
    let mut receiver: Framed<TcpStream, LogCodec> =
        Framed::new(TcpStream::connect(addr).await.unwrap(), LogCodec::new());
    for record in RECORDS {
        sender.feed(record).await.unwrap();
    }
    sender.close().await.unwrap();
    let mut got = Vec::new();
    while let Some(record) = receiver.next().await {
        got.push(record.unwrap());
    }
    assert_eq!(got, RECORDS);
    relay.await.unwrap().unwrap();
    receiver.close().await.unwrap();
}

#[tokio::test]
async fn recordio_takes_owned_items_too() {
    let mut wire = Vec::new();
    let mut sink = RecordIoCodec::builder().new_write(&mut wire);
    sink.send(Bytes::from_static(b"hello")).await.unwrap();
    sink.send(Bytes::new()).await.unwrap();
    sink.close().await.unwrap();
    drop(sink);
    assert_eq!(wire, b"5\nhello0\n");
    let mut vec_codec = RecordIoCodec::<Vec<u8>>::default();
    let mut out = BytesMut::new();
    vec_codec.encode(b"hello".to_vec(), &mut out).unwrap();
    assert_eq!(&out[..], b"5\nhello");
}
