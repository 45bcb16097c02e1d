#!/bin/sh
# Streams a 1 GiB record through AsyncLogWriter::append_stream, LogWriter's
# RecordWriter and LogReader::next_record_reader, with the counting allocator of
# tests/streaming_memory.rs, and prints the heap peaks (each must stay under 1 MiB
# above its baseline). Needs about 2 GiB of free space in the temp directory.
set -e
cd "$(dirname "$0")/.."
cargo test --release --test streaming_memory -- --ignored --nocapture a_1_gib_record
