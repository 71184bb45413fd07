//! The prompt file of one delivery: private (0600), in the scratch directory, removed
//! when dropped — on success and on every failure path alike.
//!
//! The text is normalised before it is written: line endings become `\n` (tmux sends each
//! pasted `\n` as the carriage return a terminal sends inside a paste, so a `\r\n` would
//! arrive as two line breaks), and the bracketed-paste markers `ESC[200~` / `ESC[201~`
//! are removed, so a prompt can never end its own paste early and submit text of its
//! choosing. Everything else — quotes, `$(…)`, backticks, escape sequences — is kept
//! byte for byte.

use std::io::{self, Write};
use std::path::Path;

use tempfile::NamedTempFile;

/// A written prompt file; deleted on drop.
#[derive(Debug)]
pub struct PastePayload {
    file: NamedTempFile,
}

impl PastePayload {
    /// Writes the normalised `text` to a new private file in `dir`.
    pub fn write(dir: &Path, text: &str) -> io::Result<Self> {
        let mut file = tempfile::Builder::new().prefix("the-loop-evt-").tempfile_in(dir)?;
        if !is_plain_path(file.path()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "`{}` has characters tmux would interpret; choose a scratch directory of letters, digits, `/`, `.`, `_` and `-`",
                    dir.display()
                ),
            ));
        }
        file.write_all(normalise(text).as_bytes())?;
        file.flush()?;
        Ok(Self { file })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The path as a single-quoted tmux word (`write` refused any path that is not plain).
    pub fn quoted_path(&self) -> String {
        format!("'{}'", self.path().display())
    }
}

/// The text as it is pasted: `\n` line endings, no bracketed-paste markers.
pub fn normalise(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n").replace("\x1b[200~", "").replace("\x1b[201~", "")
}

/// Whether a path can be written inside a tmux single-quoted word and survive format
/// expansion unchanged (load-buffer expands `#{…}` in its path).
fn is_plain_path(path: &Path) -> bool {
    path.to_str().is_some_and(|path| {
        path.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-'))
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn line_endings_become_line_feeds_and_paste_markers_are_removed() {
        assert_eq!(normalise("a\r\nb\rc\n"), "a\nb\nc\n");
        assert_eq!(normalise("x\x1b[201~\ry\x1b[200~"), "x\ny");
        assert_eq!(normalise("\x1b[31m`$(q)`\"'\\"), "\x1b[31m`$(q)`\"'\\");
    }

    #[test]
    fn the_prompt_file_is_private_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let payload = PastePayload::write(dir.path(), "hello").unwrap();
        let path = payload.path().to_owned();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
        drop(payload);
        assert!(!path.exists());
    }

    #[test]
    fn a_scratch_directory_tmux_would_reinterpret_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("it's #{here}");
        std::fs::create_dir(&odd).unwrap();
        let err = PastePayload::write(&odd, "x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::read_dir(&odd).unwrap().count(), 0);
    }
}
