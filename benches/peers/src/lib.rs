//! Nothing here: this crate holds only benches and tests (see Cargo.toml).
