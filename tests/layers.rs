//! The source keeps its layers (docs/architecture.md): every module imports only from
//! its own layer or the ones below, by path, never through `lib.rs`'s re-exports, and no
//! imports form a circle. Read from the source itself, so a new upward import fails here
//! with the file that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom up. A module may import from its own layer and those before it.
/// `error` (the crate's `Error`) sits above the codecs: it wraps their `CodecError`.
const LAYERS: &[&str] = &[
    "names", "position", "log_id", "zeros", "observe", "format", "decoder", "codec", "error",
    "read_at", "open", "reader", "inspect", "writer", "logdir", "replica",
];

/// The layer of a source file (its path below `src/`).
fn layer_of(path: &str) -> String {
    if path == "format/zeros.rs" {
        return "zeros".into();
    }
    let top = path.split('/').next().unwrap();
    top.strip_suffix(".rs").unwrap_or(top).to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code without its unit tests (which may use any layer) and comments.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::name` path in `code`: the module it names, and whether it names an
/// item at the root (an uppercase name: a re-export of `lib.rs`).
fn crate_paths(code: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let root_item = name.starts_with(|c: char| c.is_uppercase());
        let module = if name == "logdir" && rest[name.len()..].starts_with("::replica") {
            "replica".to_string()
        } else if name == "format" && rest[name.len()..].starts_with("::zeros") {
            "zeros".to_string()
        } else {
            name
        };
        found.push((module, root_item));
    }
    found
}

#[test]
fn no_module_imports_a_higher_layer_or_through_lib_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, l)| (*l, i)).collect();
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        // Unit tests in files of their own (`#[cfg(test)] mod tests;`) may use any layer,
        // as inline ones do.
        if rel == "lib.rs"
            || rel.starts_with("bin/")
            || rel.ends_with("/tests.rs")
            || rel.ends_with("_tests.rs")
        {
            continue;
        }
        let layer = layer_of(&rel);
        let Some(&own) = rank.get(layer.as_str()) else {
            problems.push(format!("{rel}: layer `{layer}` is not in LAYERS"));
            continue;
        };
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for (module, root_item) in crate_paths(&code) {
            if root_item {
                problems.push(format!("{rel}: imports `crate::{module}` through lib.rs"));
                continue;
            }
            if module == layer {
                continue;
            }
            match rank.get(module.as_str()) {
                Some(&theirs) if theirs > own => problems.push(format!(
                    "{rel}: layer `{layer}` imports higher layer `{module}`"
                )),
                Some(_) => {
                    edges
                        .entry((layer.clone(), module))
                        .or_default()
                        .insert(rel.clone());
                }
                None => problems.push(format!("{rel}: imports unknown module `crate::{module}`")),
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
    // The stack is really used: the checks above saw the imports they judge.
    assert!(
        edges.contains_key(&("logdir".into(), "writer".into())),
        "{edges:?}"
    );
    assert!(
        edges.contains_key(&("codec".into(), "decoder".into())),
        "{edges:?}"
    );
}

#[test]
fn the_checker_sees_an_upward_import() {
    let code = code_of("use crate::logdir::LogDir;\n// use crate::writer::X;\nfn f() { crate::Error::Closed; }\n#[cfg(test)]\nmod tests { use crate::logdir::X; }");
    assert_eq!(
        crate_paths(&code),
        vec![("logdir".to_string(), false), ("Error".to_string(), true)]
    );
    assert_eq!(layer_of("replica/copy.rs"), "replica");
    assert_eq!(layer_of("format/zeros.rs"), "zeros");
    assert_eq!(layer_of("observe.rs"), "observe");
}
