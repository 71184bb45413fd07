//! `the-loop dashboard` through the real binary: refused when the control plane is
//! disabled (2) or the service is not running (1); with the service up it prints the
//! URL, which serves the page, and `--open` hands it to the opener on `PATH` (2 when
//! there is none).

use std::io::{Read as _, Write as _};
use std::process::{Child, Stdio};

use loop_sim::test_support::wait_for;

use crate::common::Cli;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A site whose config has the receiver on a free port and `service`.
fn site(service: &str) -> Cli {
    let mut cli = Cli::new();
    cli.write(
        ".the-loop/cli-config.yaml",
        &format!(
            "state:\n  root: {}\nwebhooks:\n  ghWebhook:\n    enabled: true\n    port: {}\nservice:\n{service}",
            cli.cwd().join("state").display(),
            free_port(),
        ),
    );
    cli.env("THE_LOOP_GH_WEBHOOK_SECRET", "dashboard-test");
    cli
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let _ = self.0.wait();
    }
}

#[test]
fn a_disabled_control_plane_or_a_stopped_service_is_said_plainly() {
    let cli = site("  enabled: false\n");
    cli.run(["dashboard"])
        .expect_code(2)
        .expect_stderr("disabled (`service.enabled: false`)")
        .expect_stderr("hint: set `service.enabled: true`");
    let port = free_port();
    let cli = site(&format!("  port: {port}\n"));
    cli.run(["dashboard"])
        .expect_code(1)
        .expect_stderr(&format!(
            "the service is not running: nothing answers at http://127.0.0.1:{port}/"
        ))
        .expect_stderr("hint: start it with `the-loop start`");
}

#[test]
fn with_the_service_up_it_prints_the_url_and_opens_it() {
    let port = free_port();
    let mut cli = site(&format!("  port: {port}\n"));
    let child = cli
        .command(["start", "--foreground"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the service starts");
    let _service = Running(child);
    let url = format!("http://127.0.0.1:{port}/");
    let printed = wait_for("the dashboard to be up", || {
        let run = cli.run(["dashboard"]);
        if run.code == Some(0) { Ok(run.stdout) } else { Err(run.stderr) }
    });
    assert_eq!(printed.trim(), url);

    // What it printed is the page.
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("<script type=\"module\" src=\"/assets/app.js\">"), "{page}");

    // `--open`: the first opener on PATH gets the URL.
    let bin = cli.cwd().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opened = cli.cwd().join("opened");
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, format!("#!/bin/sh\necho \"$@\" > {}\n", opened.display())).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&opener).status().unwrap();
    cli.env("PATH", &bin);
    cli.run(["dashboard", "--open"]).expect_code(0).expect_stdout(&url);
    assert_eq!(std::fs::read_to_string(&opened).unwrap().trim(), url);

    std::fs::remove_file(&opener).unwrap();
    cli.run(["dashboard", "--open"])
        .expect_code(2)
        .expect_stderr("neither `xdg-open` nor `open` is installed")
        .expect_stdout(&url);
}
