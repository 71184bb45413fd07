//! `the-loop sim`: prints its URL, serves, and exits cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

#[test]
fn sim_prints_its_url_serves_the_seeded_repository_and_exits_on_term() {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_the-loop"))
        .args(["sim", "--seed-repo", "octo/app"])
        .env_clear()
        .env("HOME", home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    stdout.read_line(&mut url).unwrap();
    let addr = url
        .trim()
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not a URL: {url:?}"))
        .to_owned();

    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(stream, "GET /_sim/world HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"octo/app\""), "the seeded repository exists: {answer}");

    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("simulated GitHub stopped"), "{stderr}");
}
