//! The walker that turns a YAML node tree into typed config values.
//!
//! Every config struct says, in one place, which keys it has and what each defaults to
//! (see `schema/`); this module supplies the means: a [`Block`] hands out the keys of
//! one mapping, records every problem it meets (with its key path and line) and falls
//! back to the default, and reports the keys nobody asked for as unknown — unless
//! `inert.rs` lists them as accepted but not implemented. So one pass over a file finds
//! every problem at once, and the defaults are written exactly once.
//!
//! It must not print, read files or decide policy beyond a value's own shape.

use std::fmt;
use std::path::PathBuf;

use saphyr::{MarkedYamlOwned as Node, ScalarOwned as Scalar, YamlDataOwned as Data};
use serde::Serialize;

use super::inert::{self, Shape};
use crate::{Login, RepoRef, WorkItemRef};

/// What kind of problem a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// The text is not YAML.
    Syntax,
    /// A value of the wrong YAML type (a string where a boolean belongs, …).
    WrongType,
    /// A value of the right type outside its enum, range or grammar.
    BadValue,
    /// A required key is absent.
    MissingKey,
    /// A key the schema does not have.
    UnknownKey,
    /// A key an older version had; `the-loop config migrate` moves it.
    RemovedKey,
    /// A `version` older than the oldest this build reads.
    StaleVersion,
    /// A key of the reference schema this version accepts but does not act on yet.
    NotImplemented,
    /// A valid setting that is probably not what the operator wants.
    Advice,
}

/// One finding about a config file: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Dotted key path, e.g. `routing.control.keywords.start` or `polling.sources[0].repos[1]`.
    pub path: String,
    /// 1-based line in the file, when the problem has a place in it.
    pub line: Option<usize>,
    pub kind: ProblemKind,
    /// What is wrong, e.g. `expected one of never|always|labeled, got "sometimes"`.
    pub message: String,
}

impl crate::Hint for Problem {
    /// The next step for a problem of this kind, printed once however many there are.
    fn hint(&self) -> Option<String> {
        match self.kind {
            ProblemKind::UnknownKey => Some(
                "check the spelling: `the-loop config show` lists the keys in effect, \
                 docs/configuration.md every accepted key"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// Problems found so far: errors refuse the file, warnings are reported and accepted.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    pub errors: Vec<Problem>,
    pub warnings: Vec<Problem>,
}

impl Diagnostics {
    pub fn error(&mut self, path: &str, line: Option<usize>, kind: ProblemKind, message: String) {
        self.errors.push(Problem { path: path.to_owned(), line, kind, message });
    }

    pub fn warning(&mut self, path: &str, line: Option<usize>, kind: ProblemKind, message: String) {
        self.warnings.push(Problem { path: path.to_owned(), line, kind, message });
    }
}

/// Keys the reference dropped without a replacement: warned about, never refused.
const OBSOLETE: &[(&str, &str)] =
    &[("routing.runner", "sessions always run in tmux; delete the key")];

/// The line a node starts on (1-based), if it came from a file.
pub(crate) fn line_of(node: &Node) -> Option<usize> {
    let line = node.span.start.line();
    (line > 0).then_some(line)
}

/// `key` appended to the dotted `path`.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// A value read from one node. `read` reports its own problems (at `path`) and returns
/// `None` when the node cannot yield a value; the caller then keeps the default.
pub(crate) trait Value: Sized {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self>;
}

/// A config struct read from one mapping through a [`Block`].
pub(crate) trait Section: Sized {
    fn read(block: &mut Block<'_, '_>) -> Self;
}

/// The keys of one mapping, handed out one by one; what is left over is unknown.
pub(crate) struct Block<'n, 'd> {
    path: String,
    entries: Vec<Entry<'n>>,
    diags: &'d mut Diagnostics,
    /// Every key the section asked for, to suggest one for a misspelling.
    known: Vec<String>,
    /// Under a not-implemented key whose warning is given: keys are only checked against
    /// the list, and none warns again.
    inert: bool,
}

struct Entry<'n> {
    key: &'n str,
    key_line: Option<usize>,
    value: &'n Node,
    taken: bool,
}

impl<'n, 'd> Block<'n, 'd> {
    /// A block over `node` (absent or null: no keys, so every field takes its default).
    pub fn new(node: Option<&'n Node>, path: String, diags: &'d mut Diagnostics) -> Self {
        let mut entries = Vec::new();
        match node.map(|n| (n, &n.data)) {
            None | Some((_, Data::Value(Scalar::Null))) => {}
            Some((_, Data::Mapping(map))) => {
                for (key, value) in map {
                    match &key.data {
                        Data::Value(Scalar::String(name)) => entries.push(Entry {
                            key: name,
                            key_line: line_of(key),
                            value,
                            taken: false,
                        }),
                        _ => diags.error(
                            &path,
                            line_of(key),
                            ProblemKind::WrongType,
                            format!("keys must be strings, got {}", describe(key)),
                        ),
                    }
                }
            }
            Some((node, _)) => diags.error(
                &path,
                line_of(node),
                ProblemKind::WrongType,
                format!("expected a mapping, got {}", describe(node)),
            ),
        }
        Self { path, entries, diags, known: Vec::new(), inert: false }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn diags(&mut self) -> &mut Diagnostics {
        self.diags
    }

    /// The node under `key`, marked as known. A null value counts as absent.
    pub fn take(&mut self, key: &str) -> Option<&'n Node> {
        self.known.push(key.to_owned());
        let entry = self.entries.iter_mut().find(|e| e.key == key)?;
        entry.taken = true;
        let (value, line) = (entry.value, entry.key_line);
        let path = join(&self.path, key);
        if inert::shape(&path) == Some(Shape::Leaf) {
            not_implemented(self.diags, &path, line);
        }
        match value.data {
            Data::Value(Scalar::Null) => None,
            _ => Some(value),
        }
    }

    /// The value under `key`, or `default()` when it is absent or invalid.
    pub fn field<T: Value>(&mut self, key: &str, default: impl FnOnce() -> T) -> T {
        self.field_by(key, default, T::read)
    }

    /// Like [`Block::field`], read by `read` instead of the type's own rule.
    pub fn field_by<T>(
        &mut self,
        key: &str,
        default: impl FnOnce() -> T,
        read: impl FnOnce(&Node, &str, &mut Diagnostics) -> Option<T>,
    ) -> T {
        let Some(node) = self.take(key) else { return default() };
        read(node, &join(&self.path, key), self.diags).unwrap_or_else(default)
    }

    /// A required value; its absence is an error and yields `fallback`.
    pub fn required<T: Value>(&mut self, key: &str, fallback: impl FnOnce() -> T) -> T {
        match self.take(key) {
            Some(node) => T::read(node, &join(&self.path, key), self.diags),
            None => {
                self.diags.error(
                    &join(&self.path, key),
                    None,
                    ProblemKind::MissingKey,
                    "required key is missing".to_owned(),
                );
                None
            }
        }
        .unwrap_or_else(fallback)
    }

    /// The nested struct under `key` (all defaults when absent).
    pub fn section<T: Section>(&mut self, key: &str) -> T {
        let node = self.take(key);
        read_section(node, join(&self.path, key), self.diags)
    }

    /// Reports every key nobody took: obsolete or not implemented (a warning), or unknown
    /// (an error).
    pub fn finish(self) {
        let Self { path: here, entries, diags, known, inert } = self;
        for entry in entries.iter().filter(|e| !e.taken) {
            let path = join(&here, entry.key);
            if let Some((_, advice)) = OBSOLETE.iter().find(|(key, _)| *key == path) {
                diags.warning(
                    &path,
                    entry.key_line,
                    ProblemKind::RemovedKey,
                    format!("removed key, ignored: {advice}"),
                );
            } else if let Some(shape) = inert::shape(&path) {
                if !inert {
                    not_implemented(diags, &path, entry.key_line);
                }
                check_inert(entry.value, path, shape, diags);
            } else {
                let listed = inert::keys_under(&here).map(|key| -> &str { key });
                let candidates = known.iter().map(String::as_str).chain(listed);
                let message = match closest(entry.key, candidates) {
                    Some(known) => format!("unknown key; did you mean `{known}`?"),
                    None => "unknown key".to_owned(),
                };
                diags.error(&path, entry.key_line, ProblemKind::UnknownKey, message);
            }
        }
    }
}

/// The one warning a key not implemented yet gets, where it appears in the file.
fn not_implemented(diags: &mut Diagnostics, path: &str, line: Option<usize>) {
    diags.warning(
        path,
        line,
        ProblemKind::NotImplemented,
        "accepted, not implemented yet: this version does not act on it".to_owned(),
    );
}

/// Checks the keys under a not-implemented key against the list; no value is read.
fn check_inert(node: &Node, path: String, shape: Shape, diags: &mut Diagnostics) {
    match (shape, &node.data) {
        (Shape::Leaf, _) | (Shape::List, Data::Value(Scalar::Null)) => {}
        (Shape::Mapping, _) => {
            Block { inert: true, ..Block::new(Some(node), path, diags) }.finish()
        }
        (Shape::List, Data::Sequence(items)) => {
            for (i, item) in items.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                if let Some(shape) = inert::shape(&item_path) {
                    check_inert(item, item_path, shape, diags);
                }
            }
        }
        (Shape::List, _) => wrong_type(node, &path, diags, "a list"),
    }
}

/// The known key an unknown one most likely misspells: at most two edits away (one for
/// keys of up to four characters), ignoring case; the first of equally close ones.
fn closest<'k>(unknown: &str, known: impl Iterator<Item = &'k str>) -> Option<&'k str> {
    let limit = if unknown.chars().count() <= 4 { 1 } else { 2 };
    known
        .map(|key| (edit_distance(&unknown.to_lowercase(), &key.to_lowercase()), key))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, key)| key)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// Reads a [`Section`] from `node` and reports its unknown keys.
pub(crate) fn read_section<T: Section>(
    node: Option<&Node>,
    path: String,
    diags: &mut Diagnostics,
) -> T {
    let mut block = Block::new(node, path, diags);
    let value = T::read(&mut block);
    block.finish();
    value
}

/// A short description of a node for "expected X, got Y" messages.
pub(crate) fn describe(node: &Node) -> String {
    match &node.data {
        Data::Value(Scalar::Null) => "null".to_owned(),
        Data::Value(Scalar::Boolean(b)) => format!("boolean {b}"),
        Data::Value(Scalar::Integer(i)) => format!("number {i}"),
        Data::Value(Scalar::FloatingPoint(f)) => format!("number {f}"),
        Data::Value(Scalar::String(s)) => format!("string {s:?}"),
        Data::Sequence(_) => "a list".to_owned(),
        Data::Mapping(_) => "a mapping".to_owned(),
        Data::Tagged(tag, _) => format!("a value tagged {tag}"),
        Data::Alias(_) | Data::Representation(..) | Data::BadValue => {
            "an unreadable value".to_owned()
        }
    }
}

/// Reports a value of the wrong YAML type.
pub(crate) fn wrong_type(node: &Node, path: &str, diags: &mut Diagnostics, expected: &str) {
    diags.error(
        path,
        line_of(node),
        ProblemKind::WrongType,
        format!("expected {expected}, got {}", describe(node)),
    );
}

/// Reports a value outside its enum, range or grammar.
pub(crate) fn bad_value(node: &Node, path: &str, diags: &mut Diagnostics, message: String) {
    diags.error(path, line_of(node), ProblemKind::BadValue, message);
}

/// The node's text if it is a string.
pub(crate) fn string<'n>(node: &'n Node, path: &str, diags: &mut Diagnostics) -> Option<&'n str> {
    match &node.data {
        Data::Value(Scalar::String(s)) => Some(s),
        _ => {
            wrong_type(node, path, diags, "a string");
            None
        }
    }
}

/// An integer of at least `min`.
pub(crate) fn integer_at_least<T: TryFrom<i64>>(
    min: i64,
) -> impl FnOnce(&Node, &str, &mut Diagnostics) -> Option<T> {
    move |node, path, diags| match node.data {
        Data::Value(Scalar::Integer(i)) if i >= min => match T::try_from(i) {
            Ok(v) => Some(v),
            Err(_) => {
                bad_value(node, path, diags, format!("{i} is too large"));
                None
            }
        },
        Data::Value(Scalar::Integer(i)) => {
            bad_value(node, path, diags, format!("expected an integer ≥ {min}, got {i}"));
            None
        }
        _ => {
            wrong_type(node, path, diags, &format!("an integer ≥ {min}"));
            None
        }
    }
}

/// The largest decimal number a config accepts. The decimal keys are seconds, which the
/// service turns into a `Duration` without checking again; a billion seconds (31 years)
/// fits one with room to spare and is far beyond any sensible wait.
pub(crate) const MAX_NUMBER: f64 = 1e9;

/// A number (integer or decimal) of at least `min` and at most [`MAX_NUMBER`].
pub(crate) fn number_at_least(
    min: f64,
) -> impl FnOnce(&Node, &str, &mut Diagnostics) -> Option<f64> {
    move |node, path, diags| {
        #[allow(clippy::cast_precision_loss)] // config numbers are small; precision is moot
        let value = match node.data {
            Data::Value(Scalar::Integer(i)) => i as f64,
            Data::Value(Scalar::FloatingPoint(f)) => f.into_inner(),
            _ => {
                wrong_type(node, path, diags, &format!("a number ≥ {min}"));
                return None;
            }
        };
        if value > MAX_NUMBER {
            let message = format!("expected a number ≤ {MAX_NUMBER}, got {value:e}");
            bad_value(node, path, diags, message);
            None
        } else if value >= min && value.is_finite() {
            Some(value)
        } else {
            bad_value(node, path, diags, format!("expected a number ≥ {min}, got {value}"));
            None
        }
    }
}

/// A path that may be left empty: `""` means "not set" (derive it from `state.root`).
pub(crate) fn optional_path(
    node: &Node,
    path: &str,
    diags: &mut Diagnostics,
) -> Option<Option<PathBuf>> {
    let text = string(node, path, diags)?;
    Some((!text.is_empty()).then(|| PathBuf::from(text)))
}

impl Value for bool {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        match node.data {
            Data::Value(Scalar::Boolean(b)) => Some(b),
            _ => {
                wrong_type(node, path, diags, "true or false");
                None
            }
        }
    }
}

impl Value for String {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        string(node, path, diags).map(str::to_owned)
    }
}

impl Value for PathBuf {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        match string(node, path, diags)? {
            "" => {
                bad_value(node, path, diags, "expected a path, got an empty string".to_owned());
                None
            }
            text => Some(PathBuf::from(text)),
        }
    }
}

impl Value for u16 {
    /// A TCP port, 1–65535.
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        match node.data {
            Data::Value(Scalar::Integer(i)) => match u16::try_from(i) {
                Ok(port) if port > 0 => Some(port),
                _ => {
                    bad_value(node, path, diags, format!("expected a port 1–65535, got {i}"));
                    None
                }
            },
            _ => {
                wrong_type(node, path, diags, "a port 1–65535");
                None
            }
        }
    }
}

impl<T: Value> Value for Vec<T> {
    /// A list; each bad item is reported at `path[i]` and left out.
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        match &node.data {
            Data::Sequence(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| T::read(item, &format!("{path}[{i}]"), diags))
                    .collect(),
            ),
            _ => {
                wrong_type(node, path, diags, "a list");
                None
            }
        }
    }
}

/// Values with a `FromStr` grammar of their own, read from a string.
macro_rules! parsed_value {
    ($($ty:ty),+) => {$(
        impl Value for $ty {
            fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
                let text = string(node, path, diags)?;
                match text.parse() {
                    Ok(value) => Some(value),
                    Err(err) => {
                        bad_value(node, path, diags, err.to_string());
                        None
                    }
                }
            }
        }
    )+};
}

parsed_value!(RepoRef, Login);

impl Value for WorkItemRef {
    /// A ref (`github:owner/repo#N`) or the item's web address
    /// (`https://host/owner/repo/issues/N` or `…/pull/N`), normalised to a ref.
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        let text = string(node, path, diags)?;
        let parsed = match web_address_ref(text) {
            Some(candidate) => candidate.parse(),
            None => text.parse(),
        };
        match parsed {
            Ok(item) => Some(item),
            Err(err) => {
                bad_value(node, path, diags, err.to_string());
                None
            }
        }
    }
}

/// `https://host/owner/repo/issues/N` (or `/pull/N`) spelled as a ref, if it is one.
fn web_address_ref(text: &str) -> Option<String> {
    let rest = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"))?;
    let parts: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    match parts.as_slice() {
        [host, owner, repo, "issues" | "pull", number] => {
            Some(format!("github:{host}/{owner}/{repo}#{number}"))
        }
        _ => None,
    }
}

/// Declares a config enum spelled as fixed strings in the file: its variants, its text,
/// its default, its `Serialize` (the text) and its [`Value`] rule (one of the texts).
macro_rules! config_enum {
    (
        $(#[$meta:meta])*
        $name:ident (default $default:ident) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every spelling the file accepts, in order.
            pub const TEXTS: &[&str] = &[$($text),+];

            /// How the file spells this value.
            pub fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $text ),+ }
            }

            fn from_text(text: &str) -> Option<Self> {
                match text { $( $text => Some(Self::$variant), )+ _ => None }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl $crate::config::read::Value for $name {
            fn read(
                node: &::saphyr::MarkedYamlOwned,
                path: &str,
                diags: &mut $crate::config::read::Diagnostics,
            ) -> Option<Self> {
                $crate::config::read::one_of(node, path, diags, Self::TEXTS, Self::from_text)
            }
        }
    };
}

pub(crate) use config_enum;

/// Reads a string that must be one of `texts`.
pub(crate) fn one_of<T>(
    node: &Node,
    path: &str,
    diags: &mut Diagnostics,
    texts: &[&str],
    from_text: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    let expected = format!("one of {}", texts.join("|"));
    let Data::Value(Scalar::String(text)) = &node.data else {
        wrong_type(node, path, diags, &expected);
        return None;
    };
    let value = from_text(text);
    if value.is_none() {
        bad_value(node, path, diags, format!("expected {expected}, got {text:?}"));
    }
    value
}
