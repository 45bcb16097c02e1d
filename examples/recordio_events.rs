//! Streams JSON events as Mesos RecordIO over HTTP/1.1, the way Mesos' scheduler API
//! streams events to a subscribed framework, and reads them back with
//! `FramedRead<_, RecordIoCodec>`.
//!
//! The server answers a `SUBSCRIBE` POST with `Content-Type: application/recordio`,
//! `Message-Content-Type: application/json` and a body that runs until the connection
//! closes; the client skips the response head, decodes every event, checks it against
//! what the server was meant to send, and prints a count and the throughput.
//!
//! ```text
//! cargo run --release --example recordio_events [-- EVENTS]
//! ```

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::FramedRead;
use walcodec::RecordIoCodec;

const DEFAULT_EVENTS: u64 = 200_000;
/// A bound on an HTTP head, so a peer cannot make either side buffer without end.
const MAX_HEAD_BYTES: u64 = 16 * 1024;
const MAX_REQUEST_BODY_BYTES: usize = 64 * 1024;
const HEARTBEAT_EVERY: u64 = 1000;

/// Event `seq` of the stream, as Mesos' v1 scheduler API would word it.
fn event(seq: u64) -> Bytes {
    let json = if seq == 0 {
        r#"{"type":"SUBSCRIBED","subscribed":{"framework_id":{"value":"walcodec-demo"},"heartbeat_interval_seconds":15}}"#.to_owned()
    } else if seq % HEARTBEAT_EVERY == 0 {
        r#"{"type":"HEARTBEAT"}"#.to_owned()
    } else {
        let state = ["TASK_STAGING", "TASK_RUNNING", "TASK_FINISHED"][(seq % 3) as usize];
        format!(
            r#"{{"type":"UPDATE","update":{{"status":{{"task_id":{{"value":"task-{}"}},"state":"{state}","uuid":"{seq:016x}"}}}}}}"#,
            seq % 977
        )
    };
    Bytes::from(json)
}

/// Reads an HTTP head (request or status line, then headers) up to its blank line.
async fn read_head<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut budget = MAX_HEAD_BYTES;
    loop {
        let mut line = String::new();
        let n = (&mut *reader).take(budget).read_line(&mut line).await?;
        budget -= n as u64;
        if !line.ends_with("\r\n") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "http head cut short or too long",
            ));
        }
        line.truncate(line.len() - 2);
        if line.is_empty() {
            return Ok(lines);
        }
        lines.push(line);
    }
}

fn header<'a>(head: &'a [String], name: &str) -> Option<&'a str> {
    head.iter().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Accepts one subscriber and streams `events` events to it.
async fn serve(listener: TcpListener, events: u64) -> io::Result<()> {
    let (socket, _) = listener.accept().await?;
    socket.set_nodelay(true)?;
    let (read, mut write) = socket.into_split();
    let mut reader = BufReader::new(read);

    let head = read_head(&mut reader).await?;
    if !head[0].starts_with("POST /api/v1/scheduler ") {
        return Err(invalid(format!("unexpected request {:?}", head[0])));
    }
    let body_len: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .filter(|&n| n <= MAX_REQUEST_BODY_BYTES)
        .ok_or_else(|| invalid("missing or too large content-length".to_owned()))?;
    let mut body = vec![0; body_len];
    reader.read_exact(&mut body).await?;
    if !body.starts_with(br#"{"type":"SUBSCRIBE""#) {
        return Err(invalid("not a SUBSCRIBE call".to_owned()));
    }

    write
        .write_all(
            b"HTTP/1.1 200 OK\r\n\
              Content-Type: application/recordio\r\n\
              Message-Content-Type: application/json\r\n\
              Mesos-Stream-Id: 7d5e7a3c-walcodec-demo\r\n\
              Connection: close\r\n\
              \r\n",
        )
        .await?;
    let mut sink = RecordIoCodec::builder().new_write(write);
    for seq in 0..events {
        // `feed` buffers; FramedWrite writes out whenever its buffer fills.
        sink.feed(&event(seq)[..]).await.map_err(io::Error::other)?;
    }
    // Flushes and shuts the write half down: the end of the body.
    sink.close().await.map_err(io::Error::other)?;
    Ok(())
}

/// Subscribes, then reads and checks every event. Returns (events, payload bytes).
async fn subscribe(addr: SocketAddr, events: u64) -> io::Result<(u64, u64)> {
    let socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;
    let (read, mut write) = socket.into_split();

    let call =
        r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"demo","name":"walcodec"}}}"#;
    let request = format!(
        "POST /api/v1/scheduler HTTP/1.1\r\n\
         Host: {addr}\r\n\
         Content-Type: application/json\r\n\
         Accept: application/recordio\r\n\
         Content-Length: {}\r\n\
         \r\n\
         {call}",
        call.len()
    );
    write.write_all(request.as_bytes()).await?;

    let mut reader = BufReader::new(read);
    let head = read_head(&mut reader).await?;
    if !head[0].starts_with("HTTP/1.1 200") {
        return Err(invalid(format!("unexpected status {:?}", head[0])));
    }
    for (name, want) in [
        ("content-type", "application/recordio"),
        ("message-content-type", "application/json"),
    ] {
        if header(&head, name) != Some(want) {
            return Err(invalid(format!("{name} is not {want}")));
        }
    }

    // What the BufReader read past the head is handed to FramedRead with the rest.
    let mut frames = FramedRead::new(reader, RecordIoCodec::new());
    let (mut seen, mut bytes) = (0u64, 0u64);
    while let Some(record) = frames.next().await {
        let record = record.map_err(io::Error::other)?;
        if record != event(seen) {
            return Err(invalid(format!("event {seen} differs: {record:?}")));
        }
        bytes += record.len() as u64;
        seen += 1;
    }
    if seen != events {
        return Err(invalid(format!("{seen} events received, {events} sent")));
    }
    Ok((seen, bytes))
}

#[tokio::main]
async fn main() -> io::Result<()> {
    let events = match std::env::args().nth(1) {
        Some(n) => n
            .parse()
            .map_err(|_| invalid(format!("not an event count: {n}")))?,
        None => DEFAULT_EVENTS,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(serve(listener, events));

    let started = Instant::now();
    let (count, bytes) = subscribe(addr, events).await?;
    let elapsed = started.elapsed();
    server.await.map_err(io::Error::other)??;

    let secs = elapsed.as_secs_f64();
    println!(
        "received {count} events ({:.1} MiB of JSON) from {addr} in {:.1} ms: \
         {:.0} events/s, {:.1} MiB/s",
        bytes as f64 / (1 << 20) as f64,
        secs * 1e3,
        count as f64 / secs,
        bytes as f64 / (1 << 20) as f64 / secs,
    );
    Ok(())
}
