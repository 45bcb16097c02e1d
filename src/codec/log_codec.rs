//! `LogCodec`: the encoder and decoder in one value, for `Framed` over a duplex stream.

use std::fmt;

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::codec::encoder::LogEncoder;
use crate::decoder::error::CodecError;
use crate::decoder::LogDecoder;

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
/// left.flush().await?;
/// left.close().await?;
/// # Ok(())
/// # }
/// ```
///
/// The item type of the sink side is the parameter `T`, as for [`LogEncoder`]:
/// `LogCodec` (= `LogCodec<[u8]>`) takes `&[u8]`, `LogCodec<Bytes>` takes the
/// [`Bytes`] its own stream yields, and [`LogCodec::new`] infers which from use. So a
/// relay, records read from one socket written to another (or an echo, back to the
/// same one), is a plain `forward`:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use futures::{SinkExt, StreamExt};
/// use tokio::net::{TcpListener, TcpStream};
/// use tokio_util::codec::Framed;
/// use walcodec::LogCodec;
///
/// let listener = TcpListener::bind("127.0.0.1:0").await?;
/// let addr = listener.local_addr()?;
/// // The echo server: what comes in goes back out.
/// let server = tokio::spawn(async move {
///     let (socket, _) = listener.accept().await?;
///     let (sink, stream) = Framed::new(socket, LogCodec::new()).split();
///     stream.forward(sink).await
/// });
///
/// let mut client = Framed::new(TcpStream::connect(addr).await?, LogCodec::new());
/// client.send(b"ping".as_slice()).await?;
/// assert_eq!(client.next().await.unwrap()?, &b"ping"[..]);
/// client.close().await?;
/// server.await.unwrap()?;
/// # Ok(())
/// # }
/// ```
pub struct LogCodec<T: ?Sized = [u8]> {
    encoder: LogEncoder<T>,
    decoder: LogDecoder,
}

impl<T: ?Sized> fmt::Debug for LogCodec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogCodec")
            .field("encoder", &self.encoder)
            .field("decoder", &self.decoder)
            .finish()
    }
}

impl<T: ?Sized> Default for LogCodec<T> {
    fn default() -> Self {
        LogCodec {
            encoder: LogEncoder::default(),
            decoder: LogDecoder::default(),
        }
    }
}

impl<T: ?Sized> LogCodec<T> {
    /// A codec for a fresh log in each direction, with the default decoder. The
    /// item type is inferred from how the sink is used.
    pub fn new() -> Self {
        LogCodec::default()
    }

    /// A codec from a configured encoder and decoder.
    pub fn from_parts(encoder: LogEncoder<T>, decoder: LogDecoder) -> Self {
        LogCodec { encoder, decoder }
    }

    /// The encoding half.
    pub fn encoder(&self) -> &LogEncoder<T> {
        &self.encoder
    }

    /// The decoding half.
    pub fn decoder(&self) -> &LogDecoder {
        &self.decoder
    }

    /// Splits the codec into its halves.
    pub fn into_parts(self) -> (LogEncoder<T>, LogDecoder) {
        (self.encoder, self.decoder)
    }
}

impl<T: ?Sized> Decoder for LogCodec<T> {
    type Item = Bytes;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        self.decoder.decode(src)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        self.decoder.decode_eof(src)
    }
}

/// Whatever items the encoding half takes (see [`LogEncoder`]).
impl<I, T: ?Sized> Encoder<I> for LogCodec<T>
where
    LogEncoder<T>: Encoder<I, Error = CodecError>,
{
    type Error = CodecError;

    fn encode(&mut self, record: I, dst: &mut BytesMut) -> Result<(), CodecError> {
        self.encoder.encode(record, dst)
    }
}
