//! The archive's integration tests, one binary: each file of tests/ is a module.
//! The crash test runs this binary again as its child process.

mod support;

mod archiving;
mod bucket_retention;
mod cli;
mod closed_dirs;
mod concurrent;
mod corruption;
mod crash;
mod faults;
mod overlap;
mod reading;
mod restore_points;
mod retention_hold;
