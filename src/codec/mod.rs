//! The `tokio_util::codec` types, one file each: the encoder, the combined codec, the
//! framed-I/O helpers, the record-level decoder adapter, and Mesos RecordIO. Their errors
//! are small: the log codecs' [`CodecError`](crate::CodecError) (one type for both
//! directions, so a decoder's stream forwards into an encoder's sink), RecordIO's
//! [`RecordIoError`](crate::RecordIoError). `LogWriter`, which stops for good on a failed
//! write, sits with the writers (`crate::writer`).
//!
//! The decoder (`crate::decoder`) sits below this layer: it is the one piece every reader
//! of the crate shares, so it has a folder of its own.

pub(crate) mod encoder;
pub(crate) mod framed;
pub(crate) mod log_codec;
pub(crate) mod record_decoder;
pub mod recordio;
