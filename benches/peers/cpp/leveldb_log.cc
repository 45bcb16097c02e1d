// A C interface to LevelDB 1.23's own log reader and writer, for the file benches:
// what LevelDB does when it recovers a log (DB::Open) and when it appends to one.
#include "leveldb_log.h"

#include <cstdio>

namespace {

// Counts what the reader drops; the bench logs are clean, so it stays at zero.
class CountingReporter : public leveldb::log::Reader::Reporter {
 public:
  void Corruption(size_t bytes, const leveldb::Status&) override {
    dropped += bytes;
  }
  uint64_t dropped = 0;
};

struct PeerWriter {
  leveldb::WritableFile* file;
  leveldb::log::Writer* writer;
};

}  // namespace

extern "C" {

// Reads every record of the log at `path` with checksums on, as DB::Open does.
// Returns the number of records (their payload bytes in *bytes), or -1 if the file
// cannot be opened or anything was dropped.
int64_t walcodec_peer_leveldb_read(const char* path, uint64_t* bytes) {
  leveldb::SequentialFile* file = nullptr;
  if (!leveldb::Env::Default()->NewSequentialFile(path, &file).ok()) {
    return -1;
  }
  CountingReporter reporter;
  int64_t records = 0;
  uint64_t total = 0;
  {
    leveldb::log::Reader reader(file, &reporter, true, 0);
    leveldb::Slice record;
    std::string scratch;
    while (reader.ReadRecord(&record, &scratch)) {
      records++;
      total += record.size();
    }
  }
  delete file;
  *bytes = total;
  return reporter.dropped == 0 ? records : -1;
}

// Creates the log at `path` for appending with LevelDB's writer (no sync).
void* walcodec_peer_leveldb_writer_create(const char* path) {
  leveldb::WritableFile* file = nullptr;
  if (!leveldb::Env::Default()->NewWritableFile(path, &file).ok()) {
    return nullptr;
  }
  return new PeerWriter{file, new leveldb::log::Writer(file)};
}

// Appends one record; returns 0 on success.
int walcodec_peer_leveldb_writer_add(void* peer, const char* data, size_t len) {
  auto* w = static_cast<PeerWriter*>(peer);
  return w->writer->AddRecord(leveldb::Slice(data, len)).ok() ? 0 : -1;
}

// Flushes (no sync), closes and frees the writer; returns 0 on success.
int walcodec_peer_leveldb_writer_close(void* peer) {
  auto* w = static_cast<PeerWriter*>(peer);
  delete w->writer;
  bool ok = w->file->Close().ok();
  delete w->file;
  delete w;
  return ok ? 0 : -1;
}

}  // extern "C"
