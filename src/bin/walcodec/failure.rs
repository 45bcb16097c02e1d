//! How a command fails and what it found: the exit status, the one-line error, and
//! how messages name an input. A leaf: every other module of the tool may use it.

use std::fmt;
use std::io;
use std::path::Path;

/// The path that names stdin on the command line.
pub(crate) const STDIN: &str = "-";

/// How messages name the input at `path`: stdin for `-`, else the path.
pub(crate) fn input_name(path: &Path) -> String {
    if path == Path::new(STDIN) {
        "stdin".to_string()
    } else {
        path.display().to_string()
    }
}

/// What a command found in a log; maps to the exit status documented in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Status {
    /// Nothing wrong.
    Clean,
    /// The tail is torn, nothing else is wrong.
    TornTail,
    /// Something was dropped.
    Corrupt,
}

impl Status {
    /// The exit status of a usage or I/O error.
    pub(crate) const ERROR_CODE: u8 = 2;

    pub(crate) fn code(self) -> u8 {
        match self {
            Status::Clean => 0,
            Status::Corrupt => 1,
            Status::TornTail => 3,
        }
    }

    /// The status of a read that made `corruptions` reports and saw (or not) a torn
    /// tail: corruption outranks a torn tail.
    pub(crate) fn judge(corruptions: u64, torn_tail: bool) -> Status {
        if corruptions > 0 {
            Status::Corrupt
        } else if torn_tail {
            Status::TornTail
        } else {
            Status::Clean
        }
    }
}

/// An error that stops a command: printed as one line, exit status 2.
#[derive(Debug)]
pub(crate) struct Failure {
    message: String,
    broken_pipe: bool,
}

impl Failure {
    pub(crate) fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            broken_pipe: false,
        }
    }

    /// An I/O error on `path` (`-` is stdin).
    pub(crate) fn io(path: &Path, error: io::Error) -> Failure {
        Failure::named(&input_name(path), error)
    }

    /// An I/O error on the input or output that messages call `name`.
    pub(crate) fn named(name: &str, error: io::Error) -> Failure {
        Failure::new(format!("{name}: {}", io_message(&error)))
    }

    /// An error of the library while reading or writing `path`.
    pub(crate) fn log(path: &Path, error: walcodec::Error) -> Failure {
        match error {
            walcodec::Error::Io(e) => Failure::io(path, e),
            other => Failure::new(format!("{}: {other}", path.display())),
        }
    }

    /// Whether this is stdout's reader going away, which ends a command quietly.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        self.broken_pipe
    }
}

/// Errors writing to stdout (the only I/O without a path).
impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Failure {
        Failure {
            broken_pipe: error.kind() == io::ErrorKind::BrokenPipe,
            message: format!("stdout: {}", io_message(&error)),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The error text without Rust's " (os error N)" suffix, which users do not need.
pub(crate) fn io_message(error: &io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}
