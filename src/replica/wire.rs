//! The replication protocol's messages and their encoding (see the module docs of
//! [`replica`](super) for the protocol itself).

use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::Error;
use crate::log_id::LogId;
use crate::logdir::history::{Epoch, History, MAX_EPOCHS};
use crate::position::LogPosition;

/// The protocol version this build speaks, sent first by both ends.
pub const PROTOCOL_VERSION: u32 = 3;

/// The first bytes of each end's hello: not a log, not anything else.
pub(crate) const MAGIC: [u8; 8] = *b"WALCREPL";

/// Bytes of a hello: magic, version, flags (0), then a position.
pub(crate) const HELLO_LEN: usize = 8 + 4 + 4 + 16;

/// The most bytes one data message carries.
pub(crate) const MAX_DATA: usize = 1 << 20;

/// How long either end waits by default for the other (the directory's settings
/// start from it too, so it is defined below, with them).
pub(crate) use crate::logdir::ship::DEFAULT_REPLICA_TIMEOUT as DEFAULT_TIMEOUT;

/// How often an idle primary at most tells its replica it is still there.
const MAX_HEARTBEAT: Duration = Duration::from_millis(500);

/// How often an idle primary whose timeout is `timeout` sends a heartbeat: a
/// quarter of it, at most every 500 ms, so a replica with the same timeout hears
/// several before it gives up.
pub(crate) fn heartbeat(timeout: Duration) -> Duration {
    (timeout / 4).min(MAX_HEARTBEAT)
}

/// A hello: the version and a position (the replica's resume position; the
/// primary's durable end, for information).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) version: u32,
    /// Sent by the replica (flag bit 0), not by the primary.
    pub(crate) from_replica: bool,
    pub(crate) position: LogPosition,
}

impl Hello {
    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        let mut buf = &mut out[..];
        buf.put_slice(&MAGIC);
        buf.put_u32_le(self.version);
        buf.put_u32_le(u32::from(self.from_replica));
        buf.put_u64_le(self.position.segment);
        buf.put_u64_le(self.position.offset);
        out
    }

    /// Parses a hello; the version is checked by the caller (after it sent its own,
    /// so both ends see the mismatch).
    pub(crate) fn decode(bytes: &[u8; HELLO_LEN]) -> Result<Hello, Error> {
        let mut buf = &bytes[..];
        if buf[..8] == *b"WALCAUTH" {
            return Err(Error::ReplicaAuthentication {
                reason: "the peer requires a shared secret (set the same one on both ends)".into(),
            });
        }
        if buf[..8] != MAGIC {
            return Err(protocol(
                "the peer's hello is not a walcodec replication hello",
            ));
        }
        buf.advance(8);
        let version = buf.get_u32_le();
        let flags = buf.get_u32_le();
        let segment = buf.get_u64_le();
        let offset = buf.get_u64_le();
        Ok(Hello {
            version,
            from_replica: flags & 1 != 0,
            position: LogPosition::new(segment, offset),
        })
    }

    /// Checks the peer's version against ours, and that the peer plays the other
    /// part (two primaries or two replicas connected to each other fail).
    pub(crate) fn check(&self, expect_replica: bool) -> Result<(), Error> {
        if self.version != PROTOCOL_VERSION {
            return Err(Error::ReplicaVersion {
                ours: PROTOCOL_VERSION,
                theirs: self.version,
            });
        }
        match (self.from_replica, expect_replica) {
            (true, false) => Err(protocol("the peer is a replica, not a primary")),
            (false, true) => Err(protocol("the peer is a primary, not a replica")),
            _ => Ok(()),
        }
    }
}

/// Reads the peer's hello within `timeout`.
pub(crate) async fn read_hello<R: AsyncRead + Unpin>(
    conn: &mut R,
    timeout: Duration,
) -> Result<Hello, Error> {
    let mut bytes = [0u8; HELLO_LEN];
    match tokio::time::timeout(timeout, conn.read_exact(&mut bytes)).await {
        Err(_) => Err(protocol("no hello from the peer in time")),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(protocol("the connection ended in the handshake"))
        }
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(_)) => Hello::decode(&bytes),
    }
}

/// Why a primary refuses to go on, sent to the replica before it hangs up, so both
/// ends fail with the same error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    TooFarBehind {
        first_available: LogPosition,
    },
    Diverged {
        common: LogPosition,
        replica: LogPosition,
        primary: LogPosition,
    },
    AnotherLog {
        primary: LogId,
        replica: LogId,
    },
    Protocol,
}

impl Refusal {
    pub(crate) fn from_error(error: &Error) -> Option<Refusal> {
        match *error {
            Error::ReplicaTooFarBehind { first_available } => {
                Some(Refusal::TooFarBehind { first_available })
            }
            Error::ReplicaDiverged {
                common,
                replica,
                primary,
            } => Some(Refusal::Diverged {
                common,
                replica,
                primary,
            }),
            Error::ReplicaOfAnotherLog { primary, replica } => {
                Some(Refusal::AnotherLog { primary, replica })
            }
            Error::ReplicaProtocol { .. } => Some(Refusal::Protocol),
            _ => None,
        }
    }

    /// The error the replica reports for it.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Refusal::TooFarBehind { first_available } => {
                Error::ReplicaTooFarBehind { first_available }
            }
            Refusal::Diverged {
                common,
                replica,
                primary,
            } => Error::ReplicaDiverged {
                common,
                replica,
                primary,
            },
            Refusal::AnotherLog { primary, replica } => {
                Error::ReplicaOfAnotherLog { primary, replica }
            }
            Refusal::Protocol => protocol("the primary refused the replica's messages"),
        }
    }

    /// The refusal's code and its three 16-byte fields.
    fn fields(&self) -> (u8, [u128; 3]) {
        let p = |p: LogPosition| u128::from(p.segment) | u128::from(p.offset) << 64;
        match *self {
            Refusal::TooFarBehind { first_available } => (1, [p(first_available), 0, 0]),
            Refusal::Diverged {
                common,
                replica,
                primary,
            } => (2, [p(replica), p(primary), p(common)]),
            Refusal::Protocol => (3, [0; 3]),
            Refusal::AnotherLog { primary, replica } => {
                (4, [primary.as_u128(), replica.as_u128(), 0])
            }
        }
    }

    fn from_fields(code: u8, f: [u128; 3]) -> Result<Refusal, Error> {
        let p = |v: u128| LogPosition::new(v as u64, (v >> 64) as u64);
        Ok(match code {
            1 => Refusal::TooFarBehind {
                first_available: p(f[0]),
            },
            2 => Refusal::Diverged {
                replica: p(f[0]),
                primary: p(f[1]),
                common: p(f[2]),
            },
            3 => Refusal::Protocol,
            4 => Refusal::AnotherLog {
                primary: LogId::from_u128(f[0]),
                replica: LogId::from_u128(f[1]),
            },
            _ => return Err(protocol("a refusal of an unknown kind")),
        })
    }
}

/// What each end says of its copy of the log right after the hellos: its id, its
/// history, and the last record it holds (the replica: its own; the primary: its
/// checksum of the record ending where the replica's does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `None` (zero on the wire) for a replica that has none yet.
    pub(crate) log_id: Option<LogId>,
    /// The end of a record and the crc32c of its payload.
    pub(crate) last: Option<(LogPosition, u32)>,
    pub(crate) history: History,
}

/// Bytes of one epoch on the wire.
const EPOCH_LEN: usize = 32;

fn put_history(history: &History, out: &mut BytesMut) {
    out.put_u32_le(history.epochs.len() as u32);
    for e in &history.epochs {
        out.put_u64_le(e.number);
        out.put_u64_le(e.id);
        out.put_u64_le(e.start.segment);
        out.put_u64_le(e.start.offset);
    }
}

impl Identity {
    pub(crate) fn encode(&self) -> BytesMut {
        let mut out = BytesMut::with_capacity(64 + self.history.epochs.len() * EPOCH_LEN);
        out.put_u8(IDENTITY);
        out.put_u128_le(self.log_id.map_or(0, LogId::as_u128));
        let (flag, last, crc) = match self.last {
            Some((last, crc)) => (1, last, crc),
            None => (0, LogPosition::START, 0),
        };
        out.put_u8(flag);
        out.put_u64_le(last.segment);
        out.put_u64_le(last.offset);
        out.put_u32_le(crc);
        put_history(&self.history, &mut out);
        out
    }
}

/// Reads a history's epoch count and epochs: at most [`MAX_EPOCHS`], well formed
/// (numbers increasing, starts never decreasing), the memory they take growing
/// only as their bytes arrive.
async fn read_history<R: AsyncRead + Unpin>(conn: &mut R) -> Result<History, Error> {
    let mut count = [0u8; 4];
    read_exact(conn, &mut count).await?;
    let count = u32::from_le_bytes(count) as usize;
    if count > MAX_EPOCHS {
        return Err(protocol("a history of more epochs than a log keeps"));
    }
    let mut epochs = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let mut bytes = [0u8; EPOCH_LEN];
        read_exact(conn, &mut bytes).await?;
        let mut buf = &bytes[..];
        let (number, id) = (buf.get_u64_le(), buf.get_u64_le());
        let start = LogPosition::new(buf.get_u64_le(), buf.get_u64_le());
        epochs.push(Epoch { number, id, start });
    }
    let history = History { epochs };
    if !history.is_well_formed() {
        return Err(protocol("a history whose epochs are out of order"));
    }
    Ok(history)
}

/// Reads an identity's fields (after its tag).
async fn read_identity_body<R: AsyncRead + Unpin>(conn: &mut R) -> Result<Identity, Error> {
    let mut id = [0u8; 16];
    read_exact(conn, &mut id).await?;
    let id = u128::from_le_bytes(id);
    let mut flag = [0u8; 1];
    read_exact(conn, &mut flag).await?;
    let last = LogPosition::new(read_u64(conn).await?, read_u64(conn).await?);
    let mut crc = [0u8; 4];
    read_exact(conn, &mut crc).await?;
    let last = match flag[0] {
        0 => None,
        1 => Some((last, u32::from_le_bytes(crc))),
        _ => return Err(protocol("an identity with an unknown flag")),
    };
    let history = read_history(conn).await?;
    let log_id = (id != 0).then(|| LogId::from_u128(id));
    if log_id.is_none() != history.epochs.is_empty() {
        return Err(protocol(
            "an identity with a history but no log id, or the reverse",
        ));
    }
    Ok(Identity {
        log_id,
        last,
        history,
    })
}

/// Reads the replica's identity, its first message after the hellos.
pub(crate) async fn read_identity<R: AsyncRead + Unpin>(conn: &mut R) -> Result<Identity, Error> {
    let mut tag = [0u8; 1];
    read_exact(conn, &mut tag).await?;
    if tag[0] != IDENTITY {
        return Err(protocol("the replica's first message is not its identity"));
    }
    read_identity_body(conn).await
}

/// A message from the primary after its hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// The bytes that follow are of `segment`, from `offset` on.
    Segment { segment: u64, offset: u64 },
    /// The next bytes of the segment; `at_end` when they reach the primary's
    /// durable end as it was when they were sent (the replica then holds all the
    /// primary had: how it measures its lag).
    Data { bytes: BytesMut, at_end: bool },
    /// The segment is sealed at `len` bytes; the next one follows.
    Sealed { len: u64 },
    /// Nothing new; the primary is alive.
    Heartbeat,
    /// The primary refuses to go on.
    Refused(Refusal),
    /// The primary's identity (its answer to the replica's): the first message.
    Identity(Identity),
    /// The primary's history changed (a truncation started an epoch): the
    /// replica's follows before any later byte.
    History(History),
    /// The primary closed its log and sent all of it: a clean end.
    Goodbye,
}

const SEGMENT: u8 = b'S';
const DATA: u8 = b'D';
/// Data that reaches the primary's durable end: the same layout as [`DATA`].
const DATA_AT_END: u8 = b'F';
const SEALED: u8 = b'E';
const HEARTBEAT_TAG: u8 = b'H';
const REFUSED: u8 = b'X';
const IDENTITY: u8 = b'I';
const HISTORY: u8 = b'Y';
const GOODBYE: u8 = b'G';

/// Bytes of a data message's header: the tag and the length.
pub(crate) const DATA_HEADER_LEN: usize = 5;

/// Fills in the header of a data message whose bytes follow it in `message`
/// (1 to [`MAX_DATA`] of them), so it goes out in one write; `at_end` when they
/// reach the primary's durable end.
pub(crate) fn put_data_header(message: &mut [u8], at_end: bool) {
    let len = (message.len() - DATA_HEADER_LEN) as u32;
    message[0] = if at_end { DATA_AT_END } else { DATA };
    message[1..DATA_HEADER_LEN].copy_from_slice(&len.to_le_bytes());
}

/// Writes a message's header (and, but for data, all of it) into `out`; a data
/// message's bytes are written by the caller after it.
pub(crate) fn encode_header(message: &Message, out: &mut BytesMut) {
    match message {
        Message::Segment { segment, offset } => {
            out.put_u8(SEGMENT);
            out.put_u64_le(*segment);
            out.put_u64_le(*offset);
        }
        Message::Data { bytes, at_end } => {
            out.put_u8(if *at_end { DATA_AT_END } else { DATA });
            out.put_u32_le(bytes.len() as u32);
        }
        Message::Sealed { len } => {
            out.put_u8(SEALED);
            out.put_u64_le(*len);
        }
        Message::Heartbeat => out.put_u8(HEARTBEAT_TAG),
        Message::Refused(refusal) => {
            out.put_u8(REFUSED);
            let (code, fields) = refusal.fields();
            out.put_u8(code);
            for field in fields {
                out.put_u128_le(field);
            }
        }
        Message::Identity(identity) => out.extend_from_slice(&identity.encode()),
        Message::History(history) => {
            out.put_u8(HISTORY);
            put_history(history, out);
        }
        Message::Goodbye => out.put_u8(GOODBYE),
    }
}

/// The tag of the replica's only message after its identity.
const ACK: u8 = b'A';

/// Bytes of an acknowledgement: the tag and a position.
pub(crate) const ACK_LEN: usize = 1 + 16;

/// The replica's acknowledgement of its durable end.
pub(crate) fn encode_ack(end: LogPosition) -> [u8; ACK_LEN] {
    let mut out = [0u8; ACK_LEN];
    let mut buf = &mut out[..];
    buf.put_u8(ACK);
    buf.put_u64_le(end.segment);
    buf.put_u64_le(end.offset);
    out
}

/// Reads the replica's next acknowledgement; `Ok(None)` when the connection ended
/// between two. The caller checks the position against what it sent.
pub(crate) async fn read_ack<R: AsyncRead + Unpin>(
    conn: &mut R,
) -> Result<Option<LogPosition>, Error> {
    let mut tag = [0u8; 1];
    if conn.read(&mut tag).await? == 0 {
        return Ok(None);
    }
    if tag[0] != ACK {
        return Err(protocol("the replica sent a message of an unknown type"));
    }
    let segment = read_u64(conn).await?;
    let offset = read_u64(conn).await?;
    Ok(Some(LogPosition::new(segment, offset)))
}

/// Writes a whole message.
pub(crate) async fn write_message<W: AsyncWrite + Unpin>(
    conn: &mut W,
    message: &Message,
) -> std::io::Result<()> {
    let mut header = BytesMut::with_capacity(40);
    encode_header(message, &mut header);
    conn.write_all(&header).await?;
    if let Message::Data { bytes, .. } = message {
        conn.write_all(bytes).await?;
    }
    conn.flush().await
}

/// Reads the next message; `Ok(None)` when the connection ended between messages.
/// Never allocates more than [`MAX_DATA`] for one message.
pub(crate) async fn read_message<R: AsyncRead + Unpin>(
    conn: &mut R,
) -> Result<Option<Message>, Error> {
    let mut tag = [0u8; 1];
    if conn.read(&mut tag).await? == 0 {
        return Ok(None);
    }
    let message = match tag[0] {
        SEGMENT => {
            let segment = read_u64(conn).await?;
            let offset = read_u64(conn).await?;
            Message::Segment { segment, offset }
        }
        tag @ (DATA | DATA_AT_END) => {
            let mut len = [0u8; 4];
            read_exact(conn, &mut len).await?;
            let len = u32::from_le_bytes(len) as usize;
            if len == 0 || len > MAX_DATA {
                return Err(protocol("a data message of a size out of bounds"));
            }
            // Read into spare capacity: no zeroing of what is overwritten at once.
            let mut bytes = BytesMut::with_capacity(len);
            while bytes.len() < len {
                let left = len - bytes.len();
                let mut rest = (&mut bytes).limit(left);
                if conn.read_buf(&mut rest).await? == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
                }
            }
            Message::Data {
                bytes,
                at_end: tag == DATA_AT_END,
            }
        }
        SEALED => Message::Sealed {
            len: read_u64(conn).await?,
        },
        HEARTBEAT_TAG => Message::Heartbeat,
        REFUSED => {
            let mut code = [0u8; 1];
            read_exact(conn, &mut code).await?;
            let mut fields = [0u128; 3];
            for field in &mut fields {
                let mut bytes = [0u8; 16];
                read_exact(conn, &mut bytes).await?;
                *field = u128::from_le_bytes(bytes);
            }
            Message::Refused(Refusal::from_fields(code[0], fields)?)
        }
        IDENTITY => Message::Identity(read_identity_body(conn).await?),
        HISTORY => Message::History(read_history(conn).await?),
        GOODBYE => Message::Goodbye,
        _ => return Err(protocol("a message of an unknown type")),
    };
    Ok(Some(message))
}

async fn read_u64<R: AsyncRead + Unpin>(conn: &mut R) -> Result<u64, Error> {
    let mut bytes = [0u8; 8];
    read_exact(conn, &mut bytes).await?;
    Ok(u64::from_le_bytes(bytes))
}

/// `read_exact`, with a connection that ends inside a message as a cut: the
/// caller keeps what it verified before and asks again on a new connection.
async fn read_exact<R: AsyncRead + Unpin>(conn: &mut R, buf: &mut [u8]) -> Result<(), Error> {
    match conn.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A [`Error::ReplicaProtocol`] error.
pub(crate) fn protocol(reason: &'static str) -> Error {
    Error::ReplicaProtocol {
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_round_trip() {
        let messages = [
            Message::Segment {
                segment: 7,
                offset: 1234,
            },
            Message::Data {
                bytes: BytesMut::from(&b"abc"[..]),
                at_end: false,
            },
            Message::Data {
                bytes: BytesMut::from(&b"xyz"[..]),
                at_end: true,
            },
            Message::Sealed { len: 99 },
            Message::Heartbeat,
            Message::Refused(Refusal::TooFarBehind {
                first_available: LogPosition::new(4, 0),
            }),
            Message::Refused(Refusal::Diverged {
                common: LogPosition::new(2, 5),
                replica: LogPosition::new(4, 10),
                primary: LogPosition::new(3, 7),
            }),
            Message::Refused(Refusal::AnotherLog {
                primary: LogId::from_u128(u128::MAX),
                replica: LogId::from_u128(7),
            }),
            Message::Refused(Refusal::Protocol),
            Message::Identity(Identity {
                log_id: Some(LogId::from_u128(1 << 100)),
                last: Some((LogPosition::new(3, 9), 0xdead_beef)),
                history: History {
                    epochs: vec![
                        Epoch {
                            number: 1,
                            id: 5,
                            start: LogPosition::new(1, 0),
                        },
                        Epoch {
                            number: 4,
                            id: 6,
                            start: LogPosition::new(3, 2),
                        },
                    ],
                },
            }),
            Message::Identity(Identity {
                log_id: None,
                last: None,
                history: History::default(),
            }),
            Message::History(History {
                epochs: vec![Epoch {
                    number: 2,
                    id: u64::MAX,
                    start: LogPosition::new(u64::MAX, u64::MAX),
                }],
            }),
            Message::Goodbye,
        ];
        let mut wire = Vec::new();
        for message in &messages {
            write_message(&mut wire, message).await.unwrap();
        }
        let mut input = &wire[..];
        for message in &messages {
            assert_eq!(
                read_message(&mut input).await.unwrap().as_ref(),
                Some(message)
            );
        }
        assert_eq!(read_message(&mut input).await.unwrap(), None);
    }

    #[tokio::test]
    async fn acks_round_trip_and_other_messages_are_refused() {
        let mut wire = Vec::new();
        wire.extend_from_slice(&encode_ack(LogPosition::new(3, 77)));
        wire.extend_from_slice(&encode_ack(LogPosition::new(u64::MAX, u64::MAX)));
        let mut input = &wire[..];
        assert_eq!(
            read_ack(&mut input).await.unwrap(),
            Some(LogPosition::new(3, 77))
        );
        assert_eq!(
            read_ack(&mut input).await.unwrap(),
            Some(LogPosition::new(u64::MAX, u64::MAX))
        );
        assert_eq!(read_ack(&mut input).await.unwrap(), None);
        assert!(matches!(
            read_ack(&mut &b"H"[..]).await,
            Err(Error::ReplicaProtocol { .. })
        ));
        // Cut inside one: the connection ended, not a protocol error.
        assert!(matches!(
            read_ack(&mut &encode_ack(LogPosition::new(1, 2))[..9]).await,
            Err(Error::Io(_))
        ));
    }

    #[tokio::test]
    async fn histories_out_of_bounds_or_order_are_refused() {
        // More epochs than a log keeps: refused before any is read.
        let mut wire = vec![HISTORY];
        wire.extend_from_slice(&(MAX_EPOCHS as u32 + 1).to_le_bytes());
        assert!(matches!(
            read_message(&mut &wire[..]).await,
            Err(Error::ReplicaProtocol { .. })
        ));
        // Numbers that do not increase.
        let epoch = Epoch {
            number: 3,
            id: 1,
            start: LogPosition::new(1, 0),
        };
        let mut wire = BytesMut::new();
        encode_header(
            &Message::History(History {
                epochs: vec![epoch, epoch],
            }),
            &mut wire,
        );
        assert!(matches!(
            read_message(&mut &wire[..]).await,
            Err(Error::ReplicaProtocol { .. })
        ));
        // An id without a history.
        let mut wire = Identity {
            log_id: Some(LogId::from_u128(9)),
            last: None,
            history: History::default(),
        }
        .encode();
        assert!(matches!(
            read_identity(&mut &wire[..]).await,
            Err(Error::ReplicaProtocol { .. })
        ));
        // An unknown flag for the last record.
        wire[17] = 2;
        assert!(matches!(
            read_identity(&mut &wire[..]).await,
            Err(Error::ReplicaProtocol { .. })
        ));
    }

    #[tokio::test]
    async fn oversized_data_is_refused_before_allocating() {
        let mut wire = vec![DATA];
        wire.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            read_message(&mut &wire[..]).await,
            Err(Error::ReplicaProtocol { .. })
        ));
    }

    #[test]
    fn hello_round_trips_and_garbage_is_refused() {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            from_replica: true,
            position: LogPosition::new(3, 4),
        };
        assert!(hello.check(true).is_ok());
        assert!(matches!(
            hello.check(false),
            Err(Error::ReplicaProtocol { .. })
        ));
        assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
        assert!(matches!(
            Hello::decode(&[0xab; HELLO_LEN]),
            Err(Error::ReplicaProtocol { .. })
        ));
        let future = Hello {
            version: PROTOCOL_VERSION + 1,
            ..hello
        };
        assert!(matches!(
            Hello::decode(&future.encode()).unwrap().check(true),
            Err(Error::ReplicaVersion { theirs, .. }) if theirs == PROTOCOL_VERSION + 1
        ));
    }
}
