//! Builds the LevelDB C++ peer of the file benches (benches/file.rs) when Debian's
//! `libleveldb-dev` 1.23 is installed: a small C interface (cpp/leveldb_log.cc) to
//! LevelDB's internal `log::Reader` and `log::Writer`, linked with `libleveldb.a`.
//! Without it the benches run without that peer (`cfg(leveldb_cpp)` unset).

use std::path::Path;

const LIB_DIRS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib",
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(leveldb_cpp)");
    println!("cargo::rerun-if-changed=cpp/leveldb_log.h");
    println!("cargo::rerun-if-changed=cpp/leveldb_log.cc");
    let Some(dir) = LIB_DIRS
        .iter()
        .find(|dir| Path::new(dir).join("libleveldb.a").exists())
    else {
        println!("cargo::warning=libleveldb.a not found (apt-get install libleveldb-dev): no LevelDB C++ peer");
        return;
    };
    // The header copies 1.23's class layouts; another version could differ.
    if !Path::new(dir).join("libleveldb.so.1.23.0").exists() {
        println!("cargo::warning=LevelDB is not 1.23: no LevelDB C++ peer");
        return;
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .file("cpp/leveldb_log.cc")
        .compile("walcodec_peer_leveldb");
    println!("cargo::rustc-link-search=native={dir}");
    println!("cargo::rustc-link-lib=static=leveldb");
    println!("cargo::rustc-link-lib=dylib=stdc++");
    println!("cargo::rustc-cfg=leveldb_cpp");
}
