//! Reading one crate's text: tokens, then per module what it declares (`mod`), defines
//! (items), imports (`use`, named and glob) and refers to (`use` paths, `crate::`/`super::`
//! paths in code), and where a path leads. No build, no parser crate: a hand-written
//! tokenizer that drops comments, strings, characters, lifetimes and numbers.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The identifiers, `::` and punctuation of `text`; comments, strings, characters,
/// lifetimes and numbers are dropped.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&chars, i) {
            i = end;
        } else if c == '"' || (matches!(c, 'b' | 'c') && at(i + 1) == '"') {
            i += if c == '"' { 1 } else { 2 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            // A character (`'a'`, `'\n'`, `b'{'`) or a lifetime (`'a`).
            let start = if c == 'b' { i + 1 } else { i };
            if at(start + 1) == '\\' {
                i = start + 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(start + 2) == '\'' {
                i = start + 3;
            } else {
                i = start + 1;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
        } else if ident_char(c) {
            // `r#do` is the identifier `do`.
            if c == 'r' && at(i + 1) == '#' && ident_char(at(i + 2)) {
                i += 2;
            }
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c == ':' && at(i + 1) == ':' {
            out.push(Token::PathSep);
            i += 2;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

/// Where a raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at `i` ends, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..].iter().take(hashes).filter(|c| **c == '#').count() == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// A path as written, from the module it is written in.
pub(super) type Segments = Vec<String>;
/// A module's path from its crate root (`[]` is the root).
pub(super) type ModPath = Vec<String>;

/// A reference and where it was written, for the report.
#[derive(Debug, Clone)]
pub(super) struct Reference {
    pub(super) path: Segments,
    pub(super) file: String,
}

/// What one module's text says.
#[derive(Debug, Default)]
pub(super) struct Module {
    children: BTreeSet<String>,
    /// Items it defines at its own level (functions, types, traits, constants, macros).
    defines: BTreeSet<String>,
    /// `use a::b as c` → `c: [a, b]`.
    imports: BTreeMap<String, Segments>,
    /// `use a::b::*` → `[a, b]`.
    globs: Vec<Segments>,
    pub(super) references: Vec<Reference>,
}

/// One crate root's modules.
#[derive(Debug, Default)]
pub(super) struct Tree {
    pub(super) modules: BTreeMap<ModPath, Module>,
    /// The files read, relative to `src/`.
    pub(super) files: BTreeSet<String>,
}

impl Tree {
    /// The modules reachable from `root` through `mod` declarations; `read` gives a file
    /// of the crate's `src/` by its relative path.
    pub(super) fn load(root: &str, read: &dyn Fn(&str) -> Option<String>) -> Tree {
        let mut tree = Tree::default();
        let mut files = vec![(root.to_owned(), ModPath::new())];
        while let Some((file, path)) = files.pop() {
            let Some(text) = read(&file) else { continue };
            tree.files.insert(file.clone());
            // A `mod x;` in `a/b.rs` is `a/b/x.rs`; in a crate root or a `mod.rs`, beside it.
            let dir = if path.is_empty() || file == "mod.rs" || file.ends_with("/mod.rs") {
                file.rsplit_once('/').map_or(String::new(), |(dir, _)| format!("{dir}/"))
            } else {
                format!("{}/", file.trim_end_matches(".rs"))
            };
            for (inline, child) in tree.read_file(&file, &path, &text) {
                let rel = inline.iter().map(|m| format!("{m}/")).collect::<String>();
                let flat = format!("{dir}{rel}{child}.rs");
                let nested = format!("{dir}{rel}{child}/mod.rs");
                let at = [path.clone(), inline, vec![child]].concat();
                files.push((if read(&flat).is_some() { flat } else { nested }, at));
            }
        }
        tree
    }

    /// Reads one file of module `path` into the tree; returns its file modules to load,
    /// each with the inline modules it is declared in.
    fn read_file(&mut self, file: &str, path: &ModPath, text: &str) -> Vec<(ModPath, String)> {
        let tokens = tokens(text);
        let ident = |i: usize| match tokens.get(i) {
            Some(Token::Ident(s)) => Some(s.as_str()),
            _ => None,
        };
        let punct = |i: usize, c: char| tokens.get(i) == Some(&Token::Punct(c));
        let sep = |i: usize| tokens.get(i) == Some(&Token::PathSep);
        // The open braces: `Some(inline module path)` for a module's, `None` for others.
        let mut frames: Vec<Option<ModPath>> = Vec::new();
        let mut to_load = Vec::new();
        self.modules.entry(path.clone()).or_default();
        let mut i = 0;
        while i < tokens.len() {
            let inline =
                || -> ModPath { frames.iter().rev().find_map(Clone::clone).unwrap_or_default() };
            let here = || [path.clone(), inline()].concat();
            let at_module_level = frames.last().is_none_or(Option::is_some);
            match (&tokens[i], ident(i + 1)) {
                (Token::Punct('{'), _) => frames.push(None),
                (Token::Punct('}'), _) => {
                    frames.pop();
                }
                (Token::Ident(kw), Some(name)) if kw == "mod" => {
                    let (inline, here) = (inline(), here());
                    let module = self.modules.entry(here.clone()).or_default();
                    module.children.insert(name.to_owned());
                    if punct(i + 2, '{') {
                        frames.push(Some([inline, vec![name.to_owned()]].concat()));
                        self.modules.entry([here, vec![name.to_owned()]].concat()).or_default();
                        i += 3;
                        continue;
                    }
                    to_load.push((inline, name.to_owned()));
                    i += 2;
                    continue;
                }
                (Token::Ident(kw), _) if kw == "use" && !punct(i + 1, '<') => {
                    let mut leaves = Vec::new();
                    i = use_tree(&tokens, i + 1, Vec::new(), &mut leaves);
                    let module = self.modules.entry(here()).or_default();
                    for (segments, alias) in leaves {
                        if at_module_level {
                            module.note_import(&segments, alias);
                        }
                        module.references.push(Reference { path: segments, file: file.to_owned() });
                    }
                    continue;
                }
                // `const fn f` defines `f`, when `fn` comes round.
                (Token::Ident(kw), Some(name))
                    if at_module_level && is_item(kw) && !is_item(name) =>
                {
                    self.modules.entry(here()).or_default().defines.insert(name.to_owned());
                }
                (Token::Ident(kw), _) if kw == "macro_rules" && punct(i + 1, '!') => {
                    if let Some(name) = ident(i + 2) {
                        self.modules.entry(here()).or_default().defines.insert(name.to_owned());
                    }
                }
                (Token::Ident(start), _)
                    if matches!(start.as_str(), "crate" | "super" | "self")
                        && sep(i + 1)
                        && !(i > 0 && sep(i - 1)) =>
                {
                    let mut segments = vec![start.clone()];
                    let mut j = i + 1;
                    while sep(j) {
                        let Some(next) = ident(j + 1) else { break };
                        segments.push(next.to_owned());
                        j += 2;
                    }
                    let module = self.modules.entry(here()).or_default();
                    module.references.push(Reference { path: segments, file: file.to_owned() });
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        to_load
    }

    fn module(&self, path: &[String]) -> Option<&Module> {
        self.modules.get(path)
    }

    fn has_child(&self, module: &[String], name: &str) -> bool {
        self.module(module).is_some_and(|m| m.children.contains(name))
    }

    /// The module `segments`, written in module `from`, leads to: the one defining the
    /// item it names, or the module it names. `None` for another crate's path.
    pub(super) fn resolve(
        &self,
        from: &[String],
        segments: &[String],
        depth: usize,
    ) -> Option<ModPath> {
        let first = segments.first()?;
        let (mut at, mut i): (ModPath, usize) = match first.as_str() {
            "crate" => (Vec::new(), 1),
            "self" => (from.to_vec(), 1),
            "super" => {
                let mut at = from.to_vec();
                let mut i = 0;
                while segments.get(i).is_some_and(|s| s == "super") {
                    at.pop()?;
                    i += 1;
                }
                (at, i)
            }
            name if self.has_child(from, name) => (from.to_vec(), 0),
            name => {
                let imported = self.module(from)?.imports.get(name)?;
                if depth > 16 || imported.first().is_none_or(|f| f == name) {
                    return None;
                }
                (self.resolve(from, imported, depth + 1)?, 1)
            }
        };
        while let Some(segment) = segments.get(i) {
            if segment == "*" || segment == "self" {
                break;
            }
            if self.has_child(&at, segment) {
                at.push(segment.clone());
                i += 1;
                continue;
            }
            return Some(self.defining(&at, segment, depth).unwrap_or(at));
        }
        Some(at)
    }

    /// Where `name`, seen from module `at`, is defined: `at` itself, or where its import
    /// or a glob import leads. `None` when the text does not say.
    fn defining(&self, at: &[String], name: &str, depth: usize) -> Option<ModPath> {
        let module = self.module(at)?;
        if module.defines.contains(name) || depth > 16 {
            return Some(at.to_vec());
        }
        if let Some(imported) = module.imports.get(name) {
            return self.resolve(at, imported, depth + 1);
        }
        module.globs.iter().find_map(|glob| {
            let source = self.resolve(at, glob, depth + 1)?;
            (source != at && self.module(&source).is_some())
                .then(|| self.defining(&source, name, depth + 1))
                .flatten()
        })
    }
}

impl Module {
    fn note_import(&mut self, segments: &[String], alias: Option<String>) {
        match segments.last().map(String::as_str) {
            Some("*") => self.globs.push(segments[..segments.len() - 1].to_vec()),
            Some("self") => {
                let module = &segments[..segments.len() - 1];
                if let Some(name) = alias.or_else(|| module.last().cloned()) {
                    self.imports.insert(name, module.to_vec());
                }
            }
            Some(last) => {
                let name = alias.unwrap_or_else(|| last.to_owned());
                if name != "_" {
                    self.imports.insert(name, segments.to_vec());
                }
            }
            None => {}
        }
    }
}

/// Keywords that open an item whose name follows (`fn name`, `struct Name`, …).
fn is_item(word: &str) -> bool {
    matches!(word, "fn" | "struct" | "enum" | "union" | "trait" | "type" | "const" | "static")
}

/// Reads the use tree starting at `i` into its leaves (`(path, alias)`, a glob's path
/// ending in `*`); returns the index after the tree (and its `;`).
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    mut prefix: Segments,
    leaves: &mut Vec<(Segments, Option<String>)>,
) -> usize {
    if tokens.get(i) == Some(&Token::PathSep) {
        i += 1;
    }
    loop {
        match tokens.get(i) {
            Some(Token::Ident(name)) => {
                prefix.push(name.clone());
                i += 1;
                match tokens.get(i) {
                    Some(Token::PathSep) => i += 1,
                    Some(Token::Ident(kw)) if kw == "as" => {
                        let alias = match tokens.get(i + 1) {
                            Some(Token::Ident(alias)) => Some(alias.clone()),
                            _ => None,
                        };
                        leaves.push((prefix, alias));
                        return skip_semicolon(tokens, i + 2);
                    }
                    _ => {
                        leaves.push((prefix, None));
                        return skip_semicolon(tokens, i);
                    }
                }
            }
            Some(Token::Punct('*')) => {
                prefix.push("*".to_owned());
                leaves.push((prefix, None));
                return skip_semicolon(tokens, i + 1);
            }
            Some(Token::Punct('{')) => {
                i += 1;
                while let Some(token) = tokens.get(i) {
                    match token {
                        Token::Punct('}') => return skip_semicolon(tokens, i + 1),
                        Token::Punct(',') => i += 1,
                        // Past what it cannot read, so an odd tree ends the reading.
                        _ => i = use_tree(tokens, i, prefix.clone(), leaves).max(i + 1),
                    }
                }
                return i;
            }
            _ => return i,
        }
    }
}

/// Past a use tree's closing `;`, if it is next.
fn skip_semicolon(tokens: &[Token], i: usize) -> usize {
    if tokens.get(i) == Some(&Token::Punct(';')) { i + 1 } else { i }
}
