//! `walcodec-archive`: archive a log directory to object storage, list and check
//! the archive, restore it to any point.
//!
//! ```text
//! walcodec-archive --store s3://bucket/app/log push /var/lib/app/log
//! walcodec-archive --store s3://bucket/app/log ls
//! walcodec-archive --store s3://bucket/app/log verify
//! walcodec-archive --store s3://bucket/app/log restore /tmp/log --until 000042:1000
//! ```
//!
//! Store options come from the environment: every `AWS_*`, `GOOGLE_*` and
//! `AZURE_*` variable, lowercased (`AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, ...), as
//! [`object_store::parse_url_opts`] takes them.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use walcodec::LogPosition;
use walcodec_archive::{store_from_url, Archive, Archiver, RestoreOptions};

#[derive(Parser)]
#[command(
    name = "walcodec-archive",
    version,
    about = "Archive a walcodec log directory to object storage; restore it to any point"
)]
struct Cli {
    /// The archive: an object store URL and prefix (s3://bucket/prefix,
    /// file:///path, memory:///prefix).
    #[arg(long, short = 's', env = "WALCODEC_ARCHIVE_STORE")]
    store: String,
    /// No progress bars.
    #[arg(long, short = 'q')]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Upload the segments of DIR not archived yet: all but its last while a
    /// writer has it open; the last too (as the active prefix) when none has.
    Push {
        /// The log directory.
        dir: std::path::PathBuf,
    },
    /// List the archive's segments.
    Ls,
    /// Read every archived object and check it (size, CRC-32C, every fragment's
    /// CRC); exit 1 naming each one found wrong.
    Verify,
    /// Rebuild the log in DIR (empty or new), up to POS if given.
    Restore {
        /// The directory to restore into.
        dir: std::path::PathBuf,
        /// Restore the records that end at or before this position (SEGMENT:OFFSET).
        #[arg(long)]
        until: Option<LogPosition>,
    },
}

fn store_options() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(key, _)| {
            key.starts_with("AWS_") || key.starts_with("GOOGLE_") || key.starts_with("AZURE_")
        })
        .map(|(key, value)| (key.to_ascii_lowercase(), value))
        .collect()
}

fn bar(quiet: bool, total: u64, what: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("walcodec-archive: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, walcodec_archive::ArchiveError> {
    let (store, prefix) = store_from_url(&cli.store, store_options())?;
    match cli.command {
        Command::Push { dir } => {
            let listed = walcodec::LogDir::list(&dir)?;
            let total: u64 = listed.segments.iter().map(|s| s.len).sum();
            let progress = bar(cli.quiet, total, "push");
            let archiver = Archiver::new(store, prefix).on_progress({
                let progress = progress.clone();
                move |bytes| progress.inc(bytes)
            });
            let pushed = archiver.push_dir(&dir).await?;
            progress.finish_and_clear();
            println!(
                "pushed {} segments ({} bytes); archived up to {}",
                pushed.segments, pushed.bytes, pushed.archived_end
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Ls => {
            let archive = Archive::open(store, prefix).await?;
            let manifest = archive.manifest();
            println!(
                "dialect {}, started at segment {}, segments from {}",
                manifest.dialect, manifest.start, manifest.deleted_before
            );
            for segment in archive.segments() {
                println!(
                    "{:06}.log  {:>12} bytes  {:>10} records  crc32c {:08x}",
                    segment.number, segment.size, segment.records, segment.crc32c
                );
            }
            if let Some(active) = manifest.active {
                println!(
                    "{:06}.log  {:>12} bytes  {:>10} records  crc32c {:08x}  (active, prefix)",
                    active.number, active.size, active.records, active.crc32c
                );
            }
            println!("end {}", archive.end());
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify => {
            let archive = Archive::open(store, prefix).await?;
            let total: u64 = archive.segments().iter().map(|s| s.size).sum::<u64>()
                + archive.manifest().active.map_or(0, |a| a.size);
            let progress = bar(cli.quiet, total, "verify");
            let report = archive
                .verify_with_progress(|bytes| progress.inc(bytes))
                .await?;
            progress.finish_and_clear();
            for problem in &report.problems {
                println!("BAD {problem}");
            }
            println!(
                "{} objects good ({} bytes), {} bad",
                report.good,
                report.bytes,
                report.problems.len()
            );
            Ok(if report.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Restore { dir, until } => {
            let archive = Archive::open(Arc::clone(&store), prefix.clone()).await?;
            let total: u64 = archive
                .segments()
                .iter()
                .filter(|s| until.is_none_or(|u| s.number <= u.segment))
                .map(|s| s.size)
                .sum();
            let progress = bar(cli.quiet, total, "restore");
            let options = RestoreOptions::new().until(until).on_progress({
                let progress = progress.clone();
                move |bytes| progress.inc(bytes)
            });
            let restored = walcodec_archive::restore_with(store, prefix, &dir, options).await?;
            progress.finish_and_clear();
            println!(
                "restored {} segments ({} bytes, {} records) up to {}",
                restored.segments, restored.bytes, restored.records, restored.end
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
