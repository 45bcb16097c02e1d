//! The store's tests, one module per behaviour (each `tests/NAME.rs`), built as one
//! test binary so CI links and optimises openraft's and walcodec's code once. Run one
//! file's tests with `cargo test --release -p walcodec-raft --test all -- NAME::`.

/// The full name of the test `$name` of the file that calls it, as the harness lists
/// it (`module::name`): for the crash test that runs one test of this binary as its
/// child process.
macro_rules! child_test_name {
    ($name:literal) => {
        format!(
            "{}::{}",
            module_path!()
                .split_once("::")
                .map_or("", |(_crate, module)| module),
            $name
        )
    };
}

// Helpers the files share, compiled once: the store's operations, and the core
// crate's simulated storage for power cuts.
#[path = "../../tests/power_support/mod.rs"]
mod power_support;
mod support;

#[path = "committed_order.rs"]
mod committed_order;
#[path = "crash.rs"]
mod crash;
#[path = "durability.rs"]
mod durability;
#[path = "model.rs"]
mod model;
#[path = "power_cut.rs"]
mod power_cut;
#[path = "shared.rs"]
mod shared;
#[path = "shared_crash.rs"]
mod shared_crash;
#[path = "shared_power_cut.rs"]
mod shared_power_cut;
#[path = "shared_read_race.rs"]
mod shared_read_race;
#[path = "shared_space.rs"]
mod shared_space;
#[path = "suite.rs"]
mod suite;
