//! The documentation a user reads first stays usable: the README fits on a few
//! screens, its snippets paste as they are (no rustdoc hidden lines), no example
//! binds every interface, and every relative link of the README and docs/ leads to a
//! file that exists. (The snippets themselves compile as doctests: the README's in
//! walcodec-raft, docs/ in this crate.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown files a user reads: the README, docs/, and each crate's README.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    for crate_dir in ["raft", "archive"] {
        let readme = root().join(crate_dir).join("README.md");
        if readme.exists() {
            files.push(readme);
        }
    }
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The lines inside ```rust fences (any rust-tagged fence), with their line numbers.
fn rust_snippet_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut in_rust = false;
    let mut in_other = false;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(tag) = trimmed.strip_prefix("```") {
            if in_rust || in_other {
                in_rust = false;
                in_other = false;
            } else if tag.starts_with("rust") {
                in_rust = true;
            } else {
                in_other = true;
            }
            continue;
        }
        if in_rust {
            lines.push((number + 1, line));
        }
    }
    lines
}

#[test]
fn readme_fits_in_300_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines: move detail to docs/ and rustdoc"
    );
}

#[test]
fn snippets_have_no_hidden_lines() {
    for file in markdown_files() {
        let text = read(&file);
        for (number, line) in rust_snippet_lines(&text) {
            let trimmed = line.trim_start();
            assert!(
                !(trimmed == "#" || trimmed.starts_with("# ")),
                "{}:{number}: a rustdoc hidden line does not paste: {line}",
                file.display()
            );
        }
    }
}

#[test]
fn nothing_binds_every_interface() {
    let mut files = markdown_files();
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    for file in files {
        let text = read(&file);
        assert!(
            !text.contains("0.0.0.0"),
            "{} binds 0.0.0.0: examples listen on 127.0.0.1",
            file.display()
        );
    }
}

#[test]
fn relative_links_lead_to_files() {
    let mut checked = 0;
    for file in markdown_files() {
        let text = read(&file);
        let dir = file.parent().unwrap();
        for (start, _) in text.match_indices("](") {
            let rest = &text[start + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with('#') || target.contains(' ') {
                continue;
            }
            let path = target.split('#').next().unwrap();
            assert!(
                dir.join(path).exists(),
                "{}: the link {target} leads nowhere",
                file.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked > 10,
        "only {checked} links found: is the parser broken?"
    );
}
