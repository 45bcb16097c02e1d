//! Which format a reading command reads a log in: `--dialect leveldb|rocksdb|auto`
//! and `--log-number N`, resolved once per input (`LogChoice`), then handed to every
//! decoder through `common::decoder_builder` and to the physical walk as
//! `FragmentRules`.
//!
//! | `--dialect` | reads                                                         |
//! |-------------|---------------------------------------------------------------|
//! | `auto`      | RocksDB's when the log starts with an intact recyclable fragment or compression-type record (`walcodec::fragment::sniff` on its first block), else LevelDB's |
//! | `leveldb`   | LevelDB's: 7-byte headers, types 1–4                          |
//! | `rocksdb`   | RocksDB's WAL: recyclable headers, old fragments end the log, type 9, metadata records |
//!
//! The log number that recyclable headers must carry, first found of:
//!
//! | source        | when                                                        |
//! |---------------|-------------------------------------------------------------|
//! | `--log-number`| given                                                       |
//! | the file name | `NNNNNN.log` (digits, then `.log`: RocksDB's `ParseFileName`, as `ldb dump_wal` takes it) |
//! | the first fragment | auto-detected RocksDB with a recyclable first fragment and no number in the name (said on stderr) |
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
use walcodec::fragment::{sniff, FragmentRules, Sniffed, LEGACY_HEADER_SIZE};
use walcodec::metadata::WalCompressionType;
use walcodec::{Corruption, CorruptionKind, Dialect, BLOCK_SIZE};

use crate::failure::Failure;
use crate::input::Input;

/// The flags every reading command takes.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct DialectArgs {
    /// The log's format: leveldb, rocksdb (RocksDB's WAL: recyclable headers, log
    /// numbers, compression and metadata records), or auto: rocksdb when the file
    /// starts with an intact recyclable fragment or compression-type record.
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
        // `sniff` found an intact type-9 record at offset 0: its payload follows the
        // 7-byte header.
        let compression = match start.get(LEGACY_HEADER_SIZE..) {
            Some(payload) if sniffed.compressed => WalCompressionType::parse(payload).ok(),
            _ => None,
        };
        let dialect = match args.dialect {
            DialectArg::Auto => sniffed.dialect,
            DialectArg::Leveldb => Dialect::LevelDb,
            DialectArg::Rocksdb => Dialect::RocksDb,
        };
        let (log_number, number_source) = match (args.log_number, log_number_of(path)) {
            (Some(n), _) => (n, NumberSource::Flag),
            (None, Some(n)) => (n, NumberSource::FileName),
            (None, None) => match sniffed.log_number {
                Some(n) if dialect == Dialect::RocksDb && args.dialect == DialectArg::Auto => {
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
            compression: compression.filter(|_| dialect == Dialect::RocksDb),
            name: input.name().to_string(),
            explicit_leveldb: args.dialect == DialectArg::Leveldb,
            hinted: Arc::new(AtomicBool::new(false)),
        };
        for note in choice.notes() {
            eprintln!("walcodec: {}: {note}", choice.name);
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
        if self.dialect != Dialect::RocksDb {
            return notes;
        }
        if self.number_source == NumberSource::FirstFragment {
            notes.push(format!(
                "RocksDB WAL read as log {} (from its first fragment: the file name has no NNNNNN.log number; --log-number N sets it)",
                self.log_number
            ));
        }
        if let Some(first) = self.sniffed.log_number {
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
            _ => "leveldb".to_string(),
        }
    }

    /// The dialect's name in output.
    pub(crate) fn dialect_name(&self) -> &'static str {
        match self.dialect {
            Dialect::RocksDb => "rocksdb",
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
/// separator), as RocksDB's `ParseFileName` reads a WAL's; `None` for any other name.
pub(crate) fn log_number_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
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
    }
}
