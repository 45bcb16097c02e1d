//! The `walcodec-archive` command line: push, ls, verify, restore, against local
//! files and the S3 server.

use std::process::{Command, Output};

use walcodec::Dialect;

use crate::support::{fill, open_log, read_all, Rng, S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};

fn tool(store: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_walcodec-archive"));
    command.args(["--quiet", "--store", store]).args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

async fn round_trip(store: &str, env: &[(&str, &str)], corrupt: Option<&std::path::Path>) {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::Pebble, 16 * 1024).await;
    let mut rng = Rng(12);
    let written = fill(&log, &mut rng, 0, 50, 3000).await;
    log.close().await.unwrap();
    let dir_arg = dir.path().to_str().unwrap();

    let pushed = tool(store, &["push", dir_arg], env);
    assert!(pushed.status.success(), "{}", text(&pushed));
    assert!(text(&pushed).contains("pushed"), "{}", text(&pushed));
    // Again: nothing new.
    let again = tool(store, &["push", dir_arg], env);
    assert!(
        text(&again).contains("pushed 0 segments"),
        "{}",
        text(&again)
    );

    let listed = tool(store, &["ls"], env);
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(
        text(&listed).contains("dialect pebble"),
        "{}",
        text(&listed)
    );
    assert!(text(&listed).contains("000001.log"), "{}", text(&listed));

    let verified = tool(store, &["verify"], env);
    assert!(verified.status.success(), "{}", text(&verified));
    assert!(text(&verified).contains(" 0 bad"), "{}", text(&verified));

    // Up to a record in the middle.
    let until = written[20].1;
    let copy = tempfile::tempdir().unwrap();
    let target = copy.path().join("restored");
    let restored = tool(
        store,
        &[
            "restore",
            target.to_str().unwrap(),
            "--until",
            &until.to_string(),
        ],
        env,
    );
    assert!(restored.status.success(), "{}", text(&restored));
    let records = read_all(&target).await;
    assert_eq!(records.len(), 21);
    assert_eq!(records.last().unwrap().1, until);

    if let Some(object) = corrupt {
        let mut bytes = std::fs::read(object).unwrap();
        bytes[50] ^= 1;
        std::fs::write(object, bytes).unwrap();
        let verified = tool(store, &["verify"], env);
        assert_eq!(verified.status.code(), Some(1), "{}", text(&verified));
        assert!(
            text(&verified).contains("000001.log"),
            "{}",
            text(&verified)
        );
        let target = copy.path().join("refused");
        let refused = tool(store, &["restore", target.to_str().unwrap()], env);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
        assert!(
            text(&refused).contains("corrupt archived object"),
            "{}",
            text(&refused)
        );
        assert!(text(&refused).contains("000001.log"), "{}", text(&refused));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_ls_verify_restore_with_files() {
    let store_dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/", store_dir.path().display());
    let object = store_dir.path().join("segments/000001.log");
    round_trip(&url, &[], Some(&object)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_ls_verify_restore_with_s3() {
    let server = S3Server::start().await;
    let env = [
        ("AWS_ENDPOINT", server.endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
    ];
    round_trip(&format!("s3://{BUCKET}/cli/log"), &env, None).await;
}

#[test]
fn a_bad_url_is_a_clear_error() {
    let out = tool("nosuch://x/y", &["ls"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("object store URL"), "{}", text(&out));
}
