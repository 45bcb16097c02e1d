//! `LogCodec`: the encoder and decoder in one value, for `Framed` over a duplex stream.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::{Error, LogDecoder, LogEncoder};

/// A [`LogEncoder`] and a [`LogDecoder`] in one value, for
/// [`Framed`](tokio_util::codec::Framed): both directions of a socket carry a log.
///
/// Each direction keeps its own block offset.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use futures::{SinkExt, StreamExt};
/// use tokio_util::codec::Framed;
/// use walcodec::LogCodec;
///
/// let (a, b) = tokio::io::duplex(64 * 1024);
/// let mut left = Framed::new(a, LogCodec::new());
/// let mut right = Framed::new(b, LogCodec::new());
/// left.send(b"ping".as_slice()).await?;
/// assert_eq!(right.next().await.unwrap()?, &b"ping"[..]);
/// right.send(b"pong".as_slice()).await?;
/// assert_eq!(left.next().await.unwrap()?, &b"pong"[..]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct LogCodec {
    encoder: LogEncoder,
    decoder: LogDecoder,
}

impl LogCodec {
    /// A codec for a fresh log in each direction, with the default decoder.
    pub fn new() -> LogCodec {
        LogCodec::default()
    }

    /// A codec from a configured encoder and decoder.
    pub fn from_parts(encoder: LogEncoder, decoder: LogDecoder) -> LogCodec {
        LogCodec { encoder, decoder }
    }

    /// The encoding half.
    pub fn encoder(&self) -> &LogEncoder {
        &self.encoder
    }

    /// The decoding half.
    pub fn decoder(&self) -> &LogDecoder {
        &self.decoder
    }

    /// Splits the codec into its halves.
    pub fn into_parts(self) -> (LogEncoder, LogDecoder) {
        (self.encoder, self.decoder)
    }
}

impl Decoder for LogCodec {
    type Item = Bytes;
    type Error = Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, Error> {
        self.decoder.decode(src)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, Error> {
        self.decoder.decode_eof(src)
    }
}

impl Encoder<&[u8]> for LogCodec {
    type Error = Error;

    fn encode(&mut self, record: &[u8], dst: &mut BytesMut) -> Result<(), Error> {
        self.encoder.encode(record, dst)
    }
}
