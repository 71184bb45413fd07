//! Which issues a pull request says it delivers.
//!
//! Three sources, most authoritative first (reference §2.4, seed 002): GitHub's own
//! `closingIssuesReferences`, the `issue-<n>` head-branch convention, and closing
//! keywords in the PR description in every form GitHub accepts (`Closes #N`,
//! `Fixes: owner/repo#N`, `Resolved GH-N`, a full issue URL), cross-repository included.
//! A qualified reference keeps the repository it names and takes the event's host; an
//! unqualified one is in the event's own repository.
//!
//! Pure text rules over strings and JSON values; deciding what to do with the refs is
//! [`crate::route`]'s job.

use serde_json::Value;

use crate::refs::{RepoRef, WorkItemRef};

/// The closing keywords GitHub accepts, matched case-insensitively on a word boundary.
const CLOSING_KEYWORDS: [&str; 9] =
    ["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"];

/// Resolves one `closingIssuesReferences` entry to a ref. Its repository is, first that
/// applies: `repository.nameWithOwner`, `repository.owner.login` + `repository.name`, an
/// `…/<owner>/<repo>/issues/<n>` address in `url`, the event's own repository. An entry
/// without an integer `number` is ignored.
pub fn closing_issue_reference(entry: &Value, own: &RepoRef) -> Option<WorkItemRef> {
    let number = entry.get("number")?.as_u64().filter(|n| *n > 0)?;
    let host = own.explicit_host();
    let repository = entry.get("repository");
    let named =
        repository.and_then(|r| r.get("nameWithOwner")).and_then(Value::as_str).and_then(|full| {
            let (owner, name) = full.split_once('/')?;
            RepoRef::new(host, owner, name).ok()
        });
    let parts = || {
        let owner = repository?.get("owner")?.get("login")?.as_str()?;
        let name = repository?.get("name")?.as_str()?;
        RepoRef::new(host, owner, name).ok()
    };
    let from_url = || {
        let url = entry.get("url")?.as_str()?;
        let (repo, _) = issue_url_coordinates(url, own)?;
        Some(repo)
    };
    let repo = named.or_else(parts).or_else(from_url).unwrap_or_else(|| own.clone());
    Some(repo.item(number))
}

/// The issue number named by the `issue-<n>` (or `issue/<n>`) head-branch convention:
/// case-insensitive, first match, no word boundary (`claude/github-issue-15-x` → 15).
pub fn branch_issue_number(branch: &str) -> Option<u64> {
    let lower = branch.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    lower.match_indices("issue").find_map(|(at, _)| {
        let rest = &bytes[at + 5..];
        let (sep, digits) = rest.split_first()?;
        if !matches!(sep, b'-' | b'/') {
            return None;
        }
        let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        std::str::from_utf8(&digits[..len]).ok()?.parse::<u64>().ok().filter(|n| *n > 0)
    })
}

/// Every issue a PR description closes by keyword, in text order, deduplicated. `own` is
/// the PR's repository: unqualified references land there, qualified ones keep their own
/// repository on `own`'s host.
pub fn closing_keyword_references(body: &str, own: &RepoRef) -> Vec<WorkItemRef> {
    // The keywords are ASCII, so ASCII lowering folds them and keeps every byte offset.
    let lower = body.to_ascii_lowercase();
    let mut refs: Vec<WorkItemRef> = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let starts_word = !body[..at].chars().next_back().is_some_and(is_word_char);
        let target = starts_word
            .then(|| {
                CLOSING_KEYWORDS
                    .iter()
                    .filter(|k| lower[at..].starts_with(*k))
                    .find_map(|k| separator_end(lower.as_bytes(), at + k.len()))
            })
            .flatten();
        if let Some(target) = target
            && let Some((item, len)) = closing_target(&body[target..], own)
        {
            if !refs.contains(&item) {
                refs.push(item);
            }
            at = target + len;
            continue;
        }
        at += body[at..].chars().next().map_or(1, char::len_utf8);
    }
    refs
}

/// After a keyword: optional whitespace, an optional `:`, then at least one whitespace
/// character (`\s*:?\s+`). Returns where the target starts.
fn separator_end(bytes: &[u8], at: usize) -> Option<usize> {
    let spaces = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_whitespace()).count();
    let before = spaces(at);
    let mut end = at + before;
    if bytes.get(end) == Some(&b':') {
        let after = spaces(end + 1);
        end += 1 + after;
        (after > 0).then_some(end)
    } else {
        (before > 0).then_some(end)
    }
}

/// One closing target, tried in order: an issue URL, `[owner/repo]#n`, `GH-n`. Returns
/// the ref and the length of text it covered.
fn closing_target(text: &str, own: &RepoRef) -> Option<(WorkItemRef, usize)> {
    if let Some(found) = url_target(text, own) {
        return Some(found);
    }
    if let Some(found) = hash_target(text, own) {
        return Some(found);
    }
    let rest = text.get(..3).filter(|p| p.eq_ignore_ascii_case("gh-"))?;
    let (number, len) = number_at(&text[rest.len()..])?;
    Some((own.item(number), rest.len() + len))
}

/// `http(s)://<host>/<owner>/<repo>/issues/<n>`.
fn url_target(text: &str, own: &RepoRef) -> Option<(WorkItemRef, usize)> {
    let end = text.find(|c: char| c.is_whitespace()).unwrap_or(text.len());
    let candidate = &text[..end];
    if !(candidate.starts_with("http://") || candidate.starts_with("https://")) {
        return None;
    }
    let (repo, number_start) = issue_url_coordinates(candidate, own)?;
    let (number, len) = number_at(&candidate[number_start..])?;
    Some((repo.item(number), number_start + len))
}

/// The repository of an `http(s)://host/owner/repo/issues/<n>` address, on `own`'s host,
/// and the offset where `<n>` starts.
fn issue_url_coordinates(url: &str, own: &RepoRef) -> Option<(RepoRef, usize)> {
    let scheme = if url.starts_with("https://") {
        "https://".len()
    } else if url.starts_with("http://") {
        "http://".len()
    } else {
        return None;
    };
    let mut offset = scheme;
    let mut parts = url[scheme..].splitn(5, '/');
    let host = parts.next()?;
    let owner = parts.next()?;
    let name = parts.next()?;
    let issues = parts.next()?;
    parts.next()?;
    if host.is_empty() || issues != "issues" || !is_name(owner) || !is_name(name) {
        return None;
    }
    offset += host.len() + owner.len() + name.len() + issues.len() + 4;
    let repo = RepoRef::new(own.explicit_host(), owner, name).ok()?;
    Some((repo, offset))
}

/// `#n` or `owner/repo#n` with owner and repo `[\w.-]+`.
fn hash_target(text: &str, own: &RepoRef) -> Option<(WorkItemRef, usize)> {
    let hash = text.bytes().take_while(|b| is_name_byte(*b) || *b == b'/').count();
    if text.as_bytes().get(hash) != Some(&b'#') {
        return None;
    }
    let prefix = &text[..hash];
    let repo = if prefix.is_empty() {
        own.clone()
    } else {
        let (owner, name) = prefix.split_once('/')?;
        if !is_name(owner) || !is_name(name) {
            return None;
        }
        RepoRef::new(own.explicit_host(), owner, name).ok()?
    };
    let (number, len) = number_at(&text[hash + 1..])?;
    Some((repo.item(number), hash + 1 + len))
}

/// Leading decimal digits not followed by a word character, as a positive number.
fn number_at(text: &str) -> Option<(u64, usize)> {
    let len = text.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || text[len..].chars().next().is_some_and(is_word_char) {
        return None;
    }
    let number = text[..len].parse::<u64>().ok().filter(|n| *n > 0)?;
    Some((number, len))
}

/// `[\w.-]+` over ASCII (GitHub owner and repository names are ASCII).
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_name_byte)
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Python's `\w`: a letter or digit of any script, or `_`.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn own() -> RepoRef {
        "octo/repo".parse().unwrap()
    }

    fn refs(body: &str) -> Vec<String> {
        closing_keyword_references(body, &own()).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_closing_keyword_form_github_accepts_links() {
        let cases = [
            ("Closes #15", "github:octo/repo#15"),
            ("close #15", "github:octo/repo#15"),
            ("closed #15", "github:octo/repo#15"),
            ("Fix #15", "github:octo/repo#15"),
            ("fixes #15", "github:octo/repo#15"),
            ("FIXED #15", "github:octo/repo#15"),
            ("resolve #15", "github:octo/repo#15"),
            ("Resolves #15", "github:octo/repo#15"),
            ("resolved #15", "github:octo/repo#15"),
            ("Fixes: #15", "github:octo/repo#15"),
            ("Closes octo/repo#15", "github:octo/repo#15"),
            ("Closes other/repo#15", "github:other/repo#15"),
            ("Resolved GH-15", "github:octo/repo#15"),
            ("fixes gh-15", "github:octo/repo#15"),
            ("fix https://github.com/octo/repo/issues/15", "github:octo/repo#15"),
            ("fix https://github.com/Other/Thing/issues/9", "github:Other/Thing#9"),
            ("This PR\n\ncloses\t#15.", "github:octo/repo#15"),
        ];
        for (body, expected) in cases {
            assert_eq!(refs(body), [expected], "{body:?}");
        }
    }

    #[test]
    fn near_misses_do_not_link() {
        for body in [
            "Closes#15",
            "Closes:#15",
            "Fixes https://github.com/o/r/pull/3",
            "closing #15",
            "Refs #15",
            "preclose #15",
            "Closes #15abc",
            "Closes #0",
            "Closes ../x#3",
        ] {
            assert_eq!(refs(body), Vec::<String>::new(), "{body:?}");
        }
    }

    #[test]
    fn several_keywords_link_in_text_order_without_repeats() {
        assert_eq!(
            refs("Fixes #2, closes other/x#1 and fixes #2 again"),
            ["github:octo/repo#2", "github:other/x#1"]
        );
    }

    #[test]
    fn qualified_references_take_the_events_host() {
        let own: RepoRef = "ghe.example.com/octo/repo".parse().unwrap();
        let found = closing_keyword_references("Closes https://github.com/a/b/issues/4", &own);
        assert_eq!(found[0].to_string(), "github:ghe.example.com/a/b#4");
    }

    #[test]
    fn branch_convention_has_no_word_boundary() {
        let cases = [
            ("claude/github-issue-15-x", Some(15)),
            ("feature/issue/15", Some(15)),
            ("ISSUE-15", Some(15)),
            ("tissue-15", Some(15)),
            ("issue-x-issue-7", Some(7)),
            ("issue15", None),
            ("issue-", None),
            ("issue-0", None),
            ("main", None),
        ];
        for (branch, expected) in cases {
            assert_eq!(branch_issue_number(branch), expected, "{branch}");
        }
    }

    #[test]
    fn closing_issue_references_in_every_shape() {
        let entries = [
            json!({"number": 15, "repository": {"nameWithOwner": "other/infra"}}),
            json!({"number": 20, "repository": {"owner": {"login": "other"}, "name": "tools"}}),
            json!({"number": 21, "url": "https://github.com/other/docs/issues/21"}),
            json!({"number": 22}),
            json!({"number": "23"}),
            json!({"number": 24, "repository": {"nameWithOwner": "no-slash"}}),
        ];
        let found: Vec<String> = entries
            .iter()
            .filter_map(|e| closing_issue_reference(e, &own()))
            .map(|r| r.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "github:other/infra#15",
                "github:other/tools#20",
                "github:other/docs#21",
                "github:octo/repo#22",
                "github:octo/repo#24",
            ]
        );
    }
}
