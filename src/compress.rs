//! RocksDB's WAL compression, writer side: each record is one zstd frame, taken from
//! the compressor in chunks of at most one block's payload (feature `zstd`).
//!
//! RocksDB resets the context per record, hands it the whole record with
//! `ZSTD_e_end` (so the frame header declares the content size) and turns the frame
//! checksum on; level and everything else are zstd's defaults
//! (`util/compression.h`, `ZSTDStreamingCompress`).

use zstd::zstd_safe::{self, CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};

use crate::format::BLOCK_SIZE;

/// Compresses one record at a time into chunks, as RocksDB's `StreamingCompress`.
pub(crate) struct RecordCompressor {
    context: CCtx<'static>,
    /// One chunk of output: `BLOCK_SIZE - header_size` bytes, as RocksDB's
    /// `compressed_buffer_`.
    chunk: Box<[u8]>,
    /// How much of the record the context has taken.
    input_pos: usize,
}

impl RecordCompressor {
    /// A compressor whose chunks fill one fragment after a header of `header_size`.
    pub(crate) fn new(header_size: usize) -> RecordCompressor {
        let mut context = CCtx::create();
        // Setting a valid parameter on a fresh context cannot fail.
        let _ = context.set_parameter(CParameter::ChecksumFlag(true));
        RecordCompressor {
            context,
            chunk: vec![0; BLOCK_SIZE - header_size].into_boxed_slice(),
            input_pos: 0,
        }
    }

    /// Starts a new record (a new frame).
    pub(crate) fn start(&mut self) {
        // Only the session: the checksum flag stays.
        let _ = self.context.reset(ResetDirective::SessionOnly);
        self.input_pos = 0;
    }

    /// The next chunk of the frame for `record` (the record given to
    /// [`start`](Self::start)): its length in [`chunk`](Self::chunk), and how many
    /// bytes zstd still has to flush after it (0 when the frame is complete). An empty
    /// record gives no frame at all, as in RocksDB.
    pub(crate) fn next_chunk(&mut self, record: &[u8]) -> (usize, usize) {
        if record.is_empty() {
            return (0, 0);
        }
        let mut input = InBuffer::around(record);
        input.set_pos(self.input_pos.min(record.len()));
        let mut output = OutBuffer::around(&mut self.chunk[..]);
        let pending = self
            .context
            .compress_stream2(
                &mut output,
                &mut input,
                zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_end,
            )
            // zstd fails only on invalid parameters (ours are fixed and valid) or
            // when it cannot allocate, where Rust aborts anyway.
            .unwrap_or_else(|code| {
                panic!(
                    "zstd compression failed: {}",
                    zstd_safe::get_error_name(code)
                )
            });
        let written = output.pos();
        self.input_pos = input.pos();
        (written, pending)
    }

    /// The chunk written by the last [`next_chunk`](Self::next_chunk).
    pub(crate) fn chunk(&self) -> &[u8] {
        &self.chunk
    }
}

impl Clone for RecordCompressor {
    /// A fresh context: contexts are reset per record, so a clone compresses the same.
    fn clone(&self) -> Self {
        let mut context = CCtx::create();
        let _ = context.set_parameter(CParameter::ChecksumFlag(true));
        RecordCompressor {
            context,
            chunk: vec![0; self.chunk.len()].into_boxed_slice(),
            input_pos: 0,
        }
    }
}

impl std::fmt::Debug for RecordCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCompressor")
            .field("chunk_len", &self.chunk.len())
            .finish_non_exhaustive()
    }
}
