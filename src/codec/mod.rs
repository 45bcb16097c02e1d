//! The `tokio_util::codec` types, one file each: the encoder, the combined codec, the
//! framed-I/O helpers, the record-level reader and writer adapters, and Mesos RecordIO.
//!
//! The decoder (`crate::decoder`) sits below this layer: it is the one piece every reader
//! of the crate shares, so it has a folder of its own.

pub(crate) mod encoder;
pub(crate) mod framed;
pub(crate) mod log_codec;
pub(crate) mod record_decoder;
pub(crate) mod record_writer;
pub mod recordio;
