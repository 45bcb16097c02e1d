// LevelDB 1.23's log reader and writer (db/log_reader.h, db/log_writer.h), which
// libleveldb-dev builds into libleveldb.a but does not install headers for.
//
// The classes are declared here with the members LevelDB 1.23 gives them, in the
// same order, so that objects made here have the layout the library's code expects.
// Only what the bench calls is declared. A LevelDB of another version may lay them
// out differently: build.rs checks for 1.23.
#ifndef WALCODEC_PEERS_LEVELDB_LOG_H_
#define WALCODEC_PEERS_LEVELDB_LOG_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "leveldb/env.h"
#include "leveldb/slice.h"
#include "leveldb/status.h"

namespace leveldb {
namespace log {

// db/log_format.h
enum RecordType {
  kZeroType = 0,
  kFullType = 1,
  kFirstType = 2,
  kMiddleType = 3,
  kLastType = 4
};
static const int kMaxRecordType = kLastType;

class Reader {
 public:
  class Reporter {
   public:
    virtual ~Reporter();
    virtual void Corruption(size_t bytes, const Status& status) = 0;
  };

  Reader(SequentialFile* file, Reporter* reporter, bool checksum,
         uint64_t initial_offset);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader();

  bool ReadRecord(Slice* record, std::string* scratch);
  uint64_t LastRecordOffset();

 private:
  SequentialFile* const file_;
  Reporter* const reporter_;
  bool const checksum_;
  char* const backing_store_;
  Slice buffer_;
  bool eof_;
  uint64_t last_record_offset_;
  uint64_t end_of_buffer_offset_;
  uint64_t const initial_offset_;
  bool resyncing_;
};

class Writer {
 public:
  explicit Writer(WritableFile* dest);
  Writer(WritableFile* dest, uint64_t dest_length);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer();

  Status AddRecord(const Slice& slice);

 private:
  WritableFile* dest_;
  int block_offset_;
  uint32_t type_crc_[kMaxRecordType + 1];
};

}  // namespace log
}  // namespace leveldb

#endif  // WALCODEC_PEERS_LEVELDB_LOG_H_
