//! Which format a reading command reads a log in: `--dialect leveldb|rocksdb|pebble|auto`
//! and `--log-number N`, resolved once per input (`LogChoice`), then handed to every
//! decoder through `common::decoder_builder` and to the physical walk as
//! `FragmentRules`.
//!
//! | `--dialect` | reads                                                         |
//! |-------------|---------------------------------------------------------------|
//! | `auto`      | `walcodec::detect::detect` on the first block: the header size (7, 11, 19) that makes the first fragment's checksum valid, or Pebble's EOF trailer; a WAL failover name `NNNNNN-KKK.log` is Pebble's. A file it cannot decide is said so on stderr and read as LevelDB's, the format's base; unless nothing in its first 32 blocks looks like a log (`looks_like_a_log`): then it is not a log, an error (exit 2) |
//! | `leveldb`   | LevelDB's: 7-byte headers, types 1–4                          |
//! | `rocksdb`   | RocksDB's WAL: recyclable headers, old fragments end the log, type 9, metadata records |
//! | `pebble`    | Pebble's WAL: recyclable and WAL-sync headers, the EOF trailer, Pebble's read-ahead for torn versus corrupt, Pebble's batch kinds |
//!
//! The log number that recyclable headers must carry, first found of:
//!
//! | source        | when                                                        |
//! |---------------|-------------------------------------------------------------|
//! | `--log-number`| given                                                       |
//! | the file name | `NNNNNN.log` (digits, then `.log`: RocksDB's `ParseFileName`, as `ldb dump_wal` takes it), or Pebble's failover segment `NNNNNN-KKK.log` |
//! | the first fragment | auto-detected RocksDB or Pebble with a recyclable first fragment (or an EOF trailer, which holds the number plus one) and no number in the name (said on stderr) |
//! | 0             | otherwise (as `ldb`: every recyclable fragment is then old)  |
//!
//! When the first fragment carries another number than the one chosen, stderr says
//! so: read that way, the whole file is an old log. A log read as LevelDB's (with
//! `--dialect leveldb`) that looks like a RocksDB WAL, by its start or by reports of
//! record types 5 to 9, gets a hint on stderr naming `--dialect rocksdb`.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::ValueEnum;
use walcodec::detect::{detect, Detected};
use walcodec::fragment::{
    header_size_of, sniff, FragmentRules, FragmentType, Sniffed, LEGACY_HEADER_SIZE,
};
use walcodec::metadata::WalCompressionType;
use walcodec::{Corruption, CorruptionKind, Dialect, BLOCK_SIZE};

use crate::failure::Failure;
use crate::input::Input;

/// The flags every reading command takes.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct DialectArgs {
    /// The log's format: leveldb, rocksdb (RocksDB's WAL: recyclable headers, log
    /// numbers, compression and metadata records), pebble (Pebble's WAL: recyclable
    /// and WAL-sync headers, the EOF trailer), or auto: by the header size that
    /// makes the first fragment's checksum valid.
    #[arg(long, value_enum, value_name = "DIALECT", default_value_t = DialectArg::Auto)]
    pub(crate) dialect: DialectArg,
    /// The log number recyclable (RocksDB) headers carry. Default: from a
    /// `NNNNNN.log` file name (as `ldb dump_wal`), else 0.
    #[arg(long, value_name = "N")]
    pub(crate) log_number: Option<u64>,
}

/// `--dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DialectArg {
    /// Tell by the log's first block.
    Auto,
    /// LevelDB's log format.
    Leveldb,
    /// RocksDB's WAL.
    Rocksdb,
    /// Pebble's WAL (CockroachDB).
    Pebble,
}

/// How much of an input whose first fragment no dialect reads is looked at to
/// tell a damaged log from something else: 32 blocks.
const NOT_A_LOG_PROBE_BYTES: usize = 32 * BLOCK_SIZE;

/// Whether `probe`, the start of an input whose first fragment is valid under no
/// dialect's header, may still be a log: a first header that could start a log (a
/// type that starts a record, a length within the block: a first record damaged,
/// or cut short by the input's end), fewer bytes than a header, a later block that
/// starts as a log's block does (a valid fragment, or zeros), or zeros to its end
/// from a sector boundary (space preallocated after a first write cut short).
/// Random bytes are none of these but about once in a hundred.
fn looks_like_a_log(probe: &[u8]) -> bool {
    const SECTOR: usize = 512;
    if probe.len() < LEGACY_HEADER_SIZE {
        return true;
    }
    let type_byte = probe[LEGACY_HEADER_SIZE - 1];
    let length = usize::from(u16::from_le_bytes([probe[4], probe[5]]));
    let plausible_start = [Dialect::LevelDb, Dialect::RocksDb, Dialect::Pebble]
        .into_iter()
        .any(|dialect| {
            let starts_a_record = matches!(
                FragmentType::from_u8(type_byte, dialect),
                Some(
                    FragmentType::Full
                        | FragmentType::First
                        | FragmentType::RecyclableFull
                        | FragmentType::RecyclableFirst
                        | FragmentType::WalSyncFull
                        | FragmentType::WalSyncFirst
                        | FragmentType::SetCompressionType
                )
            );
            starts_a_record && header_size_of(type_byte, dialect) + length <= BLOCK_SIZE
        });
    let later_block = probe
        .chunks(BLOCK_SIZE)
        .skip(1)
        .filter(|block| block.len() >= LEGACY_HEADER_SIZE)
        .any(|block| detect(block) != Detected::Undecided);
    let zeros_to_end =
        probe.len() >= SECTOR && probe[probe.len() - SECTOR..].iter().all(|&b| b == 0);
    plausible_start || later_block || zeros_to_end
}

/// Where the log number came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberSource {
    Flag,
    FileName,
    FirstFragment,
    Default,
}

impl fmt::Display for NumberSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NumberSource::Flag => "from --log-number",
            NumberSource::FileName => "from the file name",
            NumberSource::FirstFragment => "from the first fragment",
            NumberSource::Default => "the default: no number in the file name",
        })
    }
}

/// How one input is read, resolved from the flags, its name and its first block.
#[derive(Debug, Clone)]
pub(crate) struct LogChoice {
    pub(crate) dialect: Dialect,
    pub(crate) log_number: u64,
    pub(crate) number_source: NumberSource,
    /// What the first block says.
    pub(crate) sniffed: Sniffed,
    /// What `detect` made of the first block.
    pub(crate) detected: Detected,
    /// The compression its type-9 record at offset 0 gives (RocksDB only).
    pub(crate) compression: Option<WalCompressionType>,
    /// How messages name the input.
    name: String,
    /// Whether `--dialect leveldb` was given (the hint is for that case).
    explicit_leveldb: bool,
    /// Set once the hint was printed.
    hinted: Arc<AtomicBool>,
}

impl LogChoice {
    /// Resolves the flags for `input` (opened at `path`, not read yet): looks at its
    /// first block and its name, says on stderr what the user should know.
    pub(crate) fn resolve(
        input: &mut Input,
        path: &Path,
        args: &DialectArgs,
    ) -> Result<LogChoice, Failure> {
        let start = input.peek(BLOCK_SIZE)?;
        let sniffed = sniff(start);
        let detected = detect(start);
        // `sniff` found an intact type-9 record at offset 0: its payload follows the
        // 7-byte header.
        let compression = match start.get(LEGACY_HEADER_SIZE..) {
            Some(payload) if sniffed.compressed => WalCompressionType::parse(payload).ok(),
            _ => None,
        };
        let dialect = match args.dialect {
            DialectArg::Auto => match detected.dialect() {
                // Only Pebble's WAL failover writes `NNNNNN-KKK.log`.
                Some(Dialect::RocksDb) | Some(Dialect::LevelDb) if is_failover_name(path) => {
                    Dialect::Pebble
                }
                Some(dialect) => dialect,
                None => Dialect::LevelDb,
            },
            DialectArg::Leveldb => Dialect::LevelDb,
            DialectArg::Rocksdb => Dialect::RocksDb,
            DialectArg::Pebble => Dialect::Pebble,
        };
        let first_number = match dialect {
            Dialect::Pebble => detected.log_number(),
            _ => sniffed.log_number,
        };
        let (log_number, number_source) = match (args.log_number, log_number_of(path)) {
            (Some(n), _) => (n, NumberSource::Flag),
            (None, Some(n)) => (n, NumberSource::FileName),
            (None, None) => match first_number {
                Some(n) if dialect != Dialect::LevelDb && args.dialect == DialectArg::Auto => {
                    (u64::from(n), NumberSource::FirstFragment)
                }
                _ => (0, NumberSource::Default),
            },
        };
        let choice = LogChoice {
            dialect,
            log_number,
            number_source,
            sniffed,
            detected,
            compression: compression.filter(|_| dialect == Dialect::RocksDb),
            name: input.name().to_string(),
            explicit_leveldb: args.dialect == DialectArg::Leveldb,
            hinted: Arc::new(AtomicBool::new(false)),
        };
        for note in choice.notes() {
            eprintln!("walcodec: {}: {note}", choice.name);
        }
        if args.dialect == DialectArg::Auto && detected == Detected::Undecided {
            let probe = input.peek(NOT_A_LOG_PROBE_BYTES)?;
            if !looks_like_a_log(probe) {
                return Err(Failure::new(format!(
                    "{}: not a log: no block of its first {} bytes starts with a fragment valid under any dialect's header, nor does it start as a damaged or cut log does (--dialect leveldb|rocksdb|pebble reads it anyway, as a damaged log)",
                    choice.name,
                    probe.len()
                )));
            }
            eprintln!(
                "walcodec: {}: cannot tell the log's dialect: its first fragment is valid under no dialect's header (damaged, or not a log); read as LevelDB's, the format's base (--dialect leveldb|rocksdb|pebble sets it)",
                choice.name
            );
        }
        if choice.explicit_leveldb && sniffed.dialect == Dialect::RocksDb {
            choice.hint("it starts like one");
        }
        Ok(choice)
    }

    /// What stderr says about the log number: where a guessed one came from, and a
    /// first fragment of another log.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let engine = match self.dialect {
            Dialect::RocksDb => "RocksDB",
            Dialect::Pebble => "Pebble",
            _ => return notes,
        };
        if self.number_source == NumberSource::FirstFragment {
            notes.push(format!(
                "{engine} WAL read as log {} (from its first fragment: the file name has no NNNNNN.log number; --log-number N sets it)",
                self.log_number
            ));
        }
        let first_number = match self.dialect {
            Dialect::Pebble => self.detected.log_number(),
            _ => self.sniffed.log_number,
        };
        if let Some(first) = first_number {
            if first != self.log_number as u32 {
                notes.push(format!(
                    "its first fragment is of log {first}, not {} ({}): read as log {}, the whole file is left over from an older log and nothing is read (--log-number {first} reads it)",
                    self.log_number, self.number_source, self.log_number
                ));
            }
        }
        notes
    }

    /// The header rules of the physical walk.
    pub(crate) fn rules(&self) -> FragmentRules {
        FragmentRules::new(self.dialect).log_number(self.log_number)
    }

    /// One line for a summary: the dialect, and for RocksDB the log number and where
    /// it came from.
    pub(crate) fn describe(&self) -> String {
        match self.dialect {
            Dialect::RocksDb => {
                format!("rocksdb, log {} ({})", self.log_number, self.number_source)
            }
            Dialect::Pebble => {
                format!("pebble, log {} ({})", self.log_number, self.number_source)
            }
            _ => "leveldb".to_string(),
        }
    }

    /// The dialect's name in output.
    pub(crate) fn dialect_name(&self) -> &'static str {
        match self.dialect {
            Dialect::RocksDb => "rocksdb",
            Dialect::Pebble => "pebble",
            _ => "leveldb",
        }
    }

    /// Watches a report of a LevelDB read for the record types of RocksDB's WALs.
    pub(crate) fn watch(&self, corruption: &Corruption) {
        if let CorruptionKind::UnknownRecordType(t @ 5..=9) = corruption.kind() {
            if self.explicit_leveldb {
                let why = if t == 9 {
                    "it holds RocksDB's compression-type record (type 9)".to_string()
                } else {
                    format!("it holds RocksDB's recyclable record type {t}")
                };
                self.hint(&why);
            }
        }
    }

    /// Prints the hint (once) that the log looks like a RocksDB WAL, `why`.
    fn hint(&self, why: &str) {
        if self.hinted.swap(true, Ordering::Relaxed) {
            return;
        }
        let number = match self.sniffed.log_number {
            Some(n) => format!(" (and --log-number {n} unless the file is named {n:06}.log)"),
            // A compressed WAL whose first data fragment is legacy: no number needed.
            None if self.sniffed.compressed => String::new(),
            None => " (and --log-number N if its name is not NNNNNN.log)".to_string(),
        };
        eprintln!(
            "walcodec: {}: hint: this looks like a RocksDB WAL ({why}); read it with --dialect rocksdb{number}",
            self.name
        );
    }
}

/// The number in a `NNNNNN.log` file name (digits, then `.log`, after the last
/// separator), as RocksDB's `ParseFileName` reads a WAL's, or in Pebble's WAL
/// failover segment name `NNNNNN-KKK.log` (the WAL's number, then the segment's);
/// `None` for any other name.
pub(crate) fn log_number_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".log")?;
    let digits = match stem.split_once('-') {
        Some((number, segment)) if all_digits(segment) => number,
        Some(_) => return None,
        None => stem,
    };
    if !all_digits(digits) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `path` names a segment of a Pebble WAL written with failover:
/// `NNNNNN-KKK.log`.
pub(crate) fn is_failover_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    log_number_of(path).is_some() && name.contains('-')
}

fn all_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_numbers_come_from_nnnnnn_log_names() {
        let number = |name: &str| log_number_of(Path::new(name));
        assert_eq!(number("000014.log"), Some(14));
        assert_eq!(number("/db/wal/000010.log"), Some(10));
        assert_eq!(number("7.log"), Some(7));
        assert_eq!(number("18446744073709551615.log"), Some(u64::MAX));
        assert_eq!(number("18446744073709551616.log"), None);
        assert_eq!(number("000014.log.bak"), None);
        assert_eq!(number("x000014.log"), None);
        assert_eq!(number(".log"), None);
        assert_eq!(number("+14.log"), None);
        assert_eq!(number("MANIFEST-000005"), None);
        assert_eq!(number("-"), None);
        // Pebble's WAL failover segments: the WAL's number, then the segment's.
        assert_eq!(number("000012-001.log"), Some(12));
        assert_eq!(number("/wal/secondary/000012-000.log"), Some(12));
        assert_eq!(number("000012-.log"), None);
        assert_eq!(number("-001.log"), None);
        assert_eq!(number("000012-0x1.log"), None);
        assert!(is_failover_name(Path::new("000012-001.log")));
        assert!(!is_failover_name(Path::new("000012.log")));
    }
}
