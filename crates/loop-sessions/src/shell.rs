//! Commands as a person pastes them into a POSIX shell: each word as is when it has only
//! safe characters, else single-quoted (what `the-loop demo` prints and the dashboard's
//! attach command show).

use std::ffi::OsString;

/// `word` as one shell word.
pub fn word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-=:@%+,".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `argv` as one shell command line.
pub fn line(argv: &[OsString]) -> String {
    argv.iter().map(|w| word(&w.to_string_lossy())).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_needed() {
        assert_eq!(word("/tmp/the-loop-demo-x/tmux.sock"), "/tmp/the-loop-demo-x/tmux.sock");
        assert_eq!(word("=loop-github-demo-app-1"), "=loop-github-demo-app-1");
        assert_eq!(word("/a dir/it's"), r"'/a dir/it'\''s'");
        assert_eq!(word(""), "''");
        assert_eq!(line(&["tmux".into(), "-S".into(), "/a b".into()]), "tmux -S '/a b'");
    }
}
