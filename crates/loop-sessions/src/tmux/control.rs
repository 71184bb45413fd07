//! One persistent tmux control-mode client (`tmux -C`), so a delivery costs a few lines on
//! a pipe instead of a handful of `tmux` processes.
//!
//! The client attaches to a session with `ignore-size,no-output` (it never resizes a
//! window and is sent no pane output); commands are written to its stdin one per line and
//! each answer arrives as a `%begin … %end` (or `%error`) block on its stdout, read by a
//! reader thread. Notifications between blocks are ignored. When the session the client
//! is attached to ends, tmux ends the client: the runner notices and attaches a new one
//! on the next delivery.
//!
//! This module knows nothing about prompts: callers pass complete, already-quoted tmux
//! command lines that never contain payload text.

use std::io::{self, BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long attaching may take before the client is given up.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);

/// A block's lines: `Ok` for `%end`, `Err` for `%error`.
pub type Reply = Result<Vec<String>, Vec<String>>;

/// Why the control client could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("could not attach a control client to `{target}`: {message}")]
    Attach { target: String, message: String },
    #[error("the control client ended (its session or the server is gone)")]
    Exited,
    #[error("no answer within {after:?}")]
    TimedOut { after: Duration },
    #[error("could not write to the control client")]
    Write(#[source] io::Error),
}

/// A block as the reader thread saw it.
#[derive(Debug)]
struct Block {
    /// Whether this client sent the command (`1`), as opposed to the attach command
    /// given on the command line (`0`).
    from_client: bool,
    reply: Reply,
}

/// A running `tmux -C attach-session` process.
#[derive(Debug)]
pub struct ControlClient {
    child: Child,
    /// Commands go here; closing it ends the client.
    stdin: ChildStdin,
    /// Blocks from the reader thread, which holds the sender until the client's stdout
    /// ends.
    blocks: Receiver<Block>,
    /// The session it is attached to: when that session ends, tmux ends the client.
    session: String,
}

impl ControlClient {
    /// Starts `<tmux> -C attach-session -f ignore-size,no-output -t =<target>`. `tmux` is
    /// the executable with its server-selecting flags (and environment) already set.
    pub fn attach(mut command: Command, target: &str) -> Result<Self, ControlError> {
        let attach_error =
            |message: String| ControlError::Attach { target: target.to_owned(), message };
        command
            .args(["-C", "attach-session", "-f", "ignore-size,no-output", "-t"])
            .arg(format!("={target}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().map_err(|err| attach_error(err.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(attach_error("tmux started without pipes".into()));
        };
        let (sender, blocks) = mpsc::channel();
        std::thread::spawn(move || read_blocks(BufReader::new(stdout), &sender));
        let client = Self { child, stdin, blocks, session: target.to_owned() };
        match client.blocks.recv_timeout(ATTACH_TIMEOUT) {
            Ok(Block { reply: Ok(_), .. }) => Ok(client),
            Ok(Block { reply: Err(lines), .. }) => Err(attach_error(lines.join("; "))),
            Err(RecvTimeoutError::Timeout) => Err(attach_error("no answer".into())),
            Err(RecvTimeoutError::Disconnected) => Err(attach_error("tmux exited".into())),
        }
    }

    /// The session the client is attached to.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Whether the client process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends one command line and waits for its block.
    pub fn run(&mut self, command: &str, timeout: Duration) -> Result<Reply, ControlError> {
        let mut line = String::with_capacity(command.len() + 1);
        line.push_str(command);
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).map_err(|err| match err.kind() {
            io::ErrorKind::BrokenPipe => ControlError::Exited,
            _ => ControlError::Write(err),
        })?;
        self.stdin.flush().map_err(ControlError::Write)?;
        loop {
            match self.blocks.recv_timeout(timeout) {
                Ok(Block { from_client: true, reply }) => return Ok(reply),
                Ok(Block { from_client: false, .. }) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ControlError::TimedOut { after: timeout });
                }
                Err(RecvTimeoutError::Disconnected) => return Err(ControlError::Exited),
            }
        }
    }
}

impl Drop for ControlClient {
    fn drop(&mut self) {
        // Only this client is ended; the server and its sessions are untouched.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parses the client's stdout into blocks until it ends.
fn read_blocks(mut stdout: impl BufRead, sender: &mpsc::Sender<Block>) {
    let mut open: Option<(String, bool, Vec<String>)> = None;
    let mut raw = Vec::new();
    loop {
        raw.clear();
        match stdout.read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end_matches(['\n', '\r']);
        match open.take() {
            None => {
                if let Some(rest) = line.strip_prefix("%begin ") {
                    let from_client = rest.rsplit(' ').next() == Some("1");
                    open = Some((rest.to_owned(), from_client, Vec::new()));
                }
            }
            Some((tag, from_client, mut lines)) => {
                let reply = if line.strip_prefix("%end ") == Some(tag.as_str()) {
                    Ok(std::mem::take(&mut lines))
                } else if line.strip_prefix("%error ") == Some(tag.as_str()) {
                    Err(std::mem::take(&mut lines))
                } else {
                    lines.push(line.to_owned());
                    open = Some((tag, from_client, lines));
                    continue;
                };
                if sender.send(Block { from_client, reply }).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Block> {
        let (sender, receiver) = mpsc::channel();
        read_blocks(io::Cursor::new(text.as_bytes().to_vec()), &sender);
        drop(sender);
        receiver.iter().collect()
    }

    #[test]
    fn blocks_are_split_from_notifications_and_tagged_by_origin() {
        let blocks = parse(
            "%begin 1 10 0\n%end 1 10 0\n%session-changed $1 x\n%begin 1 11 1\n0\n1\n%end 1 11 1\n\
             %output %1 hi\n%begin 1 12 1\ncan't find session: y\n%error 1 12 1\n%exit\n",
        );
        assert_eq!(blocks.len(), 3);
        assert!(!blocks[0].from_client);
        assert_eq!(blocks[1].reply, Ok(vec!["0".to_owned(), "1".to_owned()]));
        assert!(blocks[2].from_client);
        assert_eq!(blocks[2].reply, Err(vec!["can't find session: y".to_owned()]));
    }

    #[test]
    fn an_output_line_that_looks_like_an_end_of_another_block_is_output() {
        let blocks = parse("%begin 1 11 1\n%end 9 9 1\n%end 1 11 1\n");
        assert_eq!(blocks[0].reply, Ok(vec!["%end 9 9 1".to_owned()]));
    }
}
