//! The slice of GitHub's GraphQL API the-loop uses, answered from the simulated world.
//!
//! A small parser reads a query document (one operation, fields with aliases, arguments
//! as literals or `$variables`, nested selections) and an evaluator resolves it against
//! `repository(owner:, name:)` → `pullRequest(number:)` / `issue(number:)` →
//! `closingIssuesReferences(first:)` → `nodes`/`totalCount`, and the scalar fields
//! `id`, `number`, `title`, `url`, `state`, `name`, `nameWithOwner`, `owner { login }`.
//! Unknown fields and missing objects answer like GitHub: an `errors` entry (with
//! `type: NOT_FOUND` for a missing object) and `null` data at that path.
//!
//! One mutation is served: `addReaction(input: {subjectId, content})`, which records the
//! reaction on whatever the node id names (issue, pull request, conversation comment,
//! review, inline comment) exactly as the REST endpoints do, by the token's user, so
//! tests read it back from [`World`] (`GET /_sim/world`).

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::shapes::Urls;
use crate::world::{Action, Item, Repo, World, node_id};

/// A field of a query: `alias: name(args) { selection }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub alias: String,
    pub name: String,
    pub args: Vec<(String, Arg)>,
    pub selection: Vec<Field>,
}

/// An argument value: a literal, an enum value, an input object or a `$variable`.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Int(i64),
    Str(String),
    Enum(String),
    Object(Vec<(String, Arg)>),
    Var(String),
}

/// Which root type a document's fields are selected on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Query,
    Mutation,
}

impl Operation {
    /// The schema's name for the root type (`Query`, `Mutation`).
    pub fn root_type(self) -> &'static str {
        match self {
            Self::Query => "Query",
            Self::Mutation => "Mutation",
        }
    }
}

/// A parsed document: one operation and its top-level fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub operation: Operation,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Var(String),
    Int(i64),
    Str(String),
    Punct(char),
}

fn tokenize(src: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == ',' {
            i += 1;
        } else if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if "{}():!=[]".contains(c) {
            tokens.push(Token::Punct(c));
            i += 1;
        } else if c == '"' {
            let start = i + 1;
            i = start;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            let raw: String = chars[start..i.min(chars.len())].iter().collect();
            tokens.push(Token::Str(raw.replace("\\\"", "\"")));
            i += 1;
        } else if c == '$' || c.is_alphabetic() || c == '_' {
            let start = if c == '$' { i + 1 } else { i };
            i = start;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            tokens.push(if c == '$' { Token::Var(word) } else { Token::Name(word) });
        } else if c.is_ascii_digit() || c == '-' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            tokens.push(Token::Int(text.parse().map_err(|_| format!("bad number `{text}`"))?));
        } else {
            return Err(format!("unexpected character `{c}`"));
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.next() {
            Some(Token::Punct(p)) if p == c => Ok(()),
            other => Err(format!("expected `{c}`, found {other:?}")),
        }
    }

    /// `query Name($a: T!, …) { … }`, `mutation Name(…) { … }` or a bare `{ … }`.
    fn document(&mut self) -> Result<Document, String> {
        let mut operation = Operation::Query;
        if let Some(Token::Name(word)) = self.peek() {
            operation = match word.as_str() {
                "query" => Operation::Query,
                "mutation" => Operation::Mutation,
                other => {
                    return Err(format!("only queries and mutations are supported, not `{other}`"));
                }
            };
            self.next();
            if let Some(Token::Name(_)) = self.peek() {
                self.next();
            }
            if self.peek() == Some(&Token::Punct('(')) {
                // Variable definitions: skipped, values come from `variables`.
                while !matches!(self.next(), Some(Token::Punct(')')) | None) {}
            }
        }
        Ok(Document { operation, fields: self.selection()? })
    }

    /// `name: value, …` up to `close` (the opening bracket already read).
    fn arguments(&mut self, close: char) -> Result<Vec<(String, Arg)>, String> {
        let mut args = Vec::new();
        loop {
            match self.next() {
                Some(Token::Punct(p)) if p == close => return Ok(args),
                Some(Token::Name(arg)) => {
                    self.expect(':')?;
                    let value = match self.next() {
                        Some(Token::Int(n)) => Arg::Int(n),
                        Some(Token::Str(s)) => Arg::Str(s),
                        Some(Token::Var(v)) => Arg::Var(v),
                        Some(Token::Name(value)) => Arg::Enum(value),
                        Some(Token::Punct('{')) => Arg::Object(self.arguments('}')?),
                        other => return Err(format!("unsupported argument value {other:?}")),
                    };
                    args.push((arg, value));
                }
                other => return Err(format!("expected an argument, found {other:?}")),
            }
        }
    }

    fn selection(&mut self) -> Result<Vec<Field>, String> {
        self.expect('{')?;
        let mut fields = Vec::new();
        loop {
            match self.next() {
                Some(Token::Punct('}')) => return Ok(fields),
                Some(Token::Name(first)) => {
                    let (alias, name) = if self.peek() == Some(&Token::Punct(':')) {
                        self.next();
                        match self.next() {
                            Some(Token::Name(name)) => (first, name),
                            other => return Err(format!("expected a field name, found {other:?}")),
                        }
                    } else {
                        (first.clone(), first)
                    };
                    let args = if self.peek() == Some(&Token::Punct('(')) {
                        self.next();
                        self.arguments(')')?
                    } else {
                        Vec::new()
                    };
                    let selection = if self.peek() == Some(&Token::Punct('{')) {
                        self.selection()?
                    } else {
                        Vec::new()
                    };
                    fields.push(Field { alias, name, args, selection });
                }
                other => return Err(format!("expected a field, found {other:?}")),
            }
        }
    }
}

/// Parses a document into its operation and top-level fields (the contract tests walk
/// them against GitHub's schema).
pub fn parse(query: &str) -> Result<Document, String> {
    tokenize(query).and_then(|tokens| Parser { tokens, at: 0 }.document())
}

/// Answers a GraphQL request body (`{"query": …, "variables": …}`) like GitHub would; a
/// mutation acts on `world` as `viewer` (the token's user) at `now`.
pub fn answer(
    world: &mut World,
    now: Timestamp,
    viewer: &str,
    urls: &Urls,
    request: &Value,
) -> Value {
    let Some(query) = request.get("query").and_then(Value::as_str) else {
        return json!({ "errors": [{ "message": "A query attribute must be specified and must be a string." }] });
    };
    let variables = request.get("variables").cloned().unwrap_or(Value::Null);
    let document = match parse(query) {
        Ok(document) => document,
        Err(reason) => {
            return json!({ "errors": [{ "message": format!("Parse error: {reason}") }] });
        }
    };
    let mut data = Map::new();
    let mut errors = Vec::new();
    for field in &document.fields {
        let value = match document.operation {
            Operation::Query => {
                let mut eval =
                    Eval { world: &*world, urls, variables: &variables, errors: Vec::new() };
                let value = eval.root(field);
                errors.append(&mut eval.errors);
                value
            }
            Operation::Mutation => {
                let mutation = Mutation { variables: &variables, viewer, now };
                match mutation.run(world, field) {
                    Ok(value) => value,
                    Err(error) => {
                        errors.push(error);
                        Value::Null
                    }
                }
            }
        };
        data.insert(field.alias.clone(), value);
    }
    let mut answer = json!({ "data": data });
    if !errors.is_empty() {
        answer["errors"] = Value::Array(errors);
    }
    answer
}

/// Resolves an argument against the request's variables.
fn resolve(arg: &Arg, variables: &Value) -> Option<Value> {
    match arg {
        Arg::Int(n) => Some(json!(n)),
        Arg::Str(s) | Arg::Enum(s) => Some(json!(s)),
        Arg::Var(v) => variables.get(v).cloned(),
        Arg::Object(fields) => Some(Value::Object(
            fields
                .iter()
                .filter_map(|(name, arg)| Some((name.clone(), resolve(arg, variables)?)))
                .collect(),
        )),
    }
}

/// The mutations the simulator serves.
struct Mutation<'a> {
    variables: &'a Value,
    viewer: &'a str,
    now: Timestamp,
}

impl Mutation<'_> {
    /// Runs one mutation field; `Err` is its GraphQL error (its data is then null).
    fn run(&self, world: &mut World, field: &Field) -> Result<Value, Value> {
        if field.name != "addReaction" {
            return Err(json!({
                "message": format!("Field '{}' doesn't exist on type 'Mutation'", field.name),
                "extensions": { "code": "undefinedField", "typeName": "Mutation", "fieldName": field.name }
            }));
        }
        let input = field
            .args
            .iter()
            .find(|(name, _)| name == "input")
            .and_then(|(_, arg)| resolve(arg, self.variables))
            .unwrap_or(Value::Null);
        let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
        let (Some(subject_id), Some(content)) = (text("subjectId"), text("content")) else {
            return Err(json!({
                "message": "Argument 'input' on Field 'addReaction' has an invalid value: subjectId and content are required.",
                "extensions": { "code": "argumentLiteralsIncompatible" }
            }));
        };
        let Some(rest) = rest_content(&content) else {
            return Err(json!({
                "message": format!("Argument 'content' on InputObject 'AddReactionInput' has an invalid value ({content}). Expected type 'ReactionContent!'."),
                "extensions": { "code": "argumentLiteralsIncompatible" }
            }));
        };
        let not_found = || {
            json!({
                "type": "NOT_FOUND",
                "path": [field.alias],
                "message": format!("Could not resolve to a node with the global id of '{subject_id}'"),
            })
        };
        let target = world.reaction_subject(&subject_id).ok_or_else(not_found)?;
        let action =
            Action::React { target, actor: self.viewer.to_owned(), content: rest.to_owned() };
        // A reaction causes no webhook, so nothing is lost by applying it here.
        let (outcome, _no_happenings) = world.apply(action, self.now).map_err(|_| not_found())?;
        let reaction_id = node_id("REA", outcome.id.unwrap_or_default());
        let mut out = Map::new();
        for sub in &field.selection {
            let value = match sub.name.as_str() {
                "clientMutationId" => text("clientMutationId").map_or(Value::Null, Value::from),
                "reaction" => {
                    pick(&sub.selection, &[("content", json!(content)), ("id", json!(reaction_id))])
                }
                "subject" => pick(&sub.selection, &[("id", json!(subject_id))]),
                _ => Value::Null,
            };
            out.insert(sub.alias.clone(), value);
        }
        Ok(Value::Object(out))
    }
}

/// An object of the `selection`'s fields, each from `known` (null when not known).
fn pick(selection: &[Field], known: &[(&str, Value)]) -> Value {
    Value::Object(
        selection
            .iter()
            .map(|f| {
                let value = known.iter().find(|(name, _)| *name == f.name).map(|(_, v)| v.clone());
                (f.alias.clone(), value.unwrap_or(Value::Null))
            })
            .collect(),
    )
}

/// The REST spelling of a GraphQL `ReactionContent`.
fn rest_content(content: &str) -> Option<&'static str> {
    Some(match content {
        "THUMBS_UP" => "+1",
        "THUMBS_DOWN" => "-1",
        "LAUGH" => "laugh",
        "CONFUSED" => "confused",
        "HEART" => "heart",
        "HOORAY" => "hooray",
        "ROCKET" => "rocket",
        "EYES" => "eyes",
        _ => return None,
    })
}

struct Eval<'a> {
    world: &'a World,
    urls: &'a Urls,
    variables: &'a Value,
    errors: Vec<Value>,
}

impl Eval<'_> {
    fn arg(&self, field: &Field, name: &str) -> Option<Value> {
        let (_, arg) = field.args.iter().find(|(n, _)| n == name)?;
        resolve(arg, self.variables)
    }

    fn unknown(&mut self, field: &Field, on: &str) -> Value {
        self.errors.push(json!({
            "message": format!("Field '{}' doesn't exist on type '{on}'", field.name),
            "extensions": { "code": "undefinedField", "typeName": on, "fieldName": field.name }
        }));
        Value::Null
    }

    fn not_found(&mut self, path: Vec<&str>, message: String) -> Value {
        self.errors.push(json!({ "type": "NOT_FOUND", "path": path, "message": message }));
        Value::Null
    }

    fn root(&mut self, field: &Field) -> Value {
        if field.name != "repository" {
            return self.unknown(field, "Query");
        }
        let owner = self
            .arg(field, "owner")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let name =
            self.arg(field, "name").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let Ok(repo) = self.world.repo(&format!("{owner}/{name}")) else {
            return self.not_found(
                vec![&field.alias],
                format!("Could not resolve to a Repository with the name '{owner}/{name}'."),
            );
        };
        let mut out = Map::new();
        for sub in &field.selection {
            let value = match sub.name.as_str() {
                "pullRequest" | "issue" => {
                    let number = self.arg(sub, "number").and_then(|v| v.as_u64()).unwrap_or(0);
                    let wants_pull = sub.name == "pullRequest";
                    match repo.items.get(&number).filter(|i| i.pull.is_some() == wants_pull) {
                        Some(item) => self.item(sub, repo, item),
                        None => {
                            let kind = if wants_pull { "PullRequest" } else { "Issue" };
                            self.not_found(
                                vec![&field.alias, &sub.alias],
                                format!(
                                    "Could not resolve to a{} {kind} with the number of {number}.",
                                    if wants_pull { "" } else { "n" }
                                ),
                            )
                        }
                    }
                }
                _ => self.repo_scalar(sub, repo),
            };
            out.insert(sub.alias.clone(), value);
        }
        Value::Object(out)
    }

    fn repo_scalar(&mut self, field: &Field, repo: &Repo) -> Value {
        match field.name.as_str() {
            "name" => json!(repo.name),
            "nameWithOwner" => json!(repo.full_name()),
            "id" => json!(node_id("R", repo.id)),
            "owner" => {
                let mut out = Map::new();
                for sub in &field.selection {
                    let value = match sub.name.as_str() {
                        "login" => json!(repo.owner),
                        _ => self.unknown(sub, "RepositoryOwner"),
                    };
                    out.insert(sub.alias.clone(), value);
                }
                Value::Object(out)
            }
            _ => self.unknown(field, "Repository"),
        }
    }

    fn item(&mut self, field: &Field, repo: &Repo, item: &Item) -> Value {
        let on = if item.pull.is_some() { "PullRequest" } else { "Issue" };
        let mut out = Map::new();
        for sub in &field.selection {
            let value = match sub.name.as_str() {
                "id" => json!(node_id(if item.pull.is_some() { "PR" } else { "I" }, item.id)),
                "number" => json!(item.number),
                "title" => json!(item.title),
                "state" => json!(match (&item.pull, item.open) {
                    (_, true) => "OPEN",
                    (Some(p), false) if p.merged_at.is_some() => "MERGED",
                    _ => "CLOSED",
                }),
                "url" => {
                    let kind = if item.pull.is_some() { "pull" } else { "issues" };
                    json!(format!("{}/{}/{kind}/{}", self.urls.web, repo.full_name(), item.number))
                }
                "repository" => {
                    let mut repo_out = Map::new();
                    for r in &sub.selection {
                        let v = self.repo_scalar(r, repo);
                        repo_out.insert(r.alias.clone(), v);
                    }
                    Value::Object(repo_out)
                }
                "closingIssuesReferences" if item.pull.is_some() => self.closing_refs(sub, item),
                _ => self.unknown(sub, on),
            };
            out.insert(sub.alias.clone(), value);
        }
        Value::Object(out)
    }

    fn closing_refs(&mut self, field: &Field, item: &Item) -> Value {
        let first = self.arg(field, "first").and_then(|v| v.as_u64()).unwrap_or(100) as usize;
        let world = self.world;
        let linked: Vec<(&Repo, &Item)> = item
            .pull
            .iter()
            .flat_map(|p| p.closes.iter())
            .filter_map(|(name, n)| {
                let linked_repo = world.repo(name).ok()?;
                Some((linked_repo, linked_repo.items.get(n)?))
            })
            .filter(|(_, i)| i.pull.is_none())
            .collect();
        let mut out = Map::new();
        for sub in &field.selection {
            let value = match sub.name.as_str() {
                "totalCount" => json!(linked.len()),
                "nodes" => Value::Array(
                    linked.iter().take(first).map(|(r, issue)| self.item(sub, r, issue)).collect(),
                ),
                _ => self.unknown(sub, "IssueConnection"),
            };
            out.insert(sub.alias.clone(), value);
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_aliases_arguments_and_nesting() {
        let tokens = tokenize("query Q($o: String!) { r0: repository(owner: $o, name: \"app\") { p1: pullRequest(number: 1) { id } } }").unwrap();
        let document = Parser { tokens, at: 0 }.document().unwrap();
        assert_eq!(document.operation, Operation::Query);
        let fields = document.fields;
        assert_eq!(fields[0].alias, "r0");
        assert_eq!(fields[0].args[0], ("owner".to_owned(), Arg::Var("o".to_owned())));
        assert_eq!(fields[0].selection[0].selection[0].name, "id");
    }

    #[test]
    fn unknown_mutations_unknown_subjects_and_garbage_are_refused_with_an_error() {
        let mut world = World::new(Timestamp::UNIX_EPOCH);
        let urls = Urls { api: "http://x".into(), web: "https://github.com".into() };
        let unknown_subject = "mutation { addReaction(input: {subjectId: \"IC_kwDOSim0000000001\", content: EYES}) { reaction { content } } }";
        for query in [
            "mutation { x }",
            "subscription { x }",
            "{ repository(owner: @) { id } }",
            unknown_subject,
        ] {
            let answer =
                answer(&mut world, Timestamp::UNIX_EPOCH, "me", &urls, &json!({ "query": query }));
            assert!(answer["errors"][0]["message"].is_string(), "{query}: {answer}");
        }
    }

    #[test]
    fn add_reaction_records_the_reaction_on_the_review_its_node_id_names() {
        let mut world = World::new(Timestamp::UNIX_EPOCH);
        let now = Timestamp::UNIX_EPOCH;
        let urls = Urls { api: "http://x".into(), web: "https://github.com".into() };
        world.apply(Action::CreateRepo { repo: "o/a".into() }, now).unwrap();
        let pr = Action::OpenPullRequest {
            repo: "o/a".into(),
            author: "ann".into(),
            title: "t".into(),
            body: String::new(),
            head_ref: "b".into(),
            labels: Vec::new(),
        };
        let number = world.apply(pr, now).unwrap().0.number.unwrap();
        let review = Action::Review {
            repo: "o/a".into(),
            number,
            author: "ann".into(),
            state: crate::world::ReviewState::Commented,
            body: "looks fine".into(),
            comments: Vec::new(),
        };
        let subject = world.apply(review, now).unwrap().0.node_id.unwrap();
        let request = json!({
            "query": "mutation M($s: ID!, $c: ReactionContent!) { addReaction(input: {subjectId: $s, content: $c}) { reaction { content } subject { id } } }",
            "variables": { "s": subject, "c": "HOORAY" },
        });
        let answer = answer(&mut world, now, "me", &urls, &request);
        assert_eq!(
            answer,
            json!({ "data": { "addReaction": {
            "reaction": { "content": "HOORAY" }, "subject": { "id": subject } } } })
        );
        let item = world.item("o/a", number).unwrap();
        let reactions = &item.pull.as_ref().unwrap().reviews[0].reactions;
        assert_eq!((reactions[0].user.as_str(), reactions[0].content.as_str()), ("me", "hooray"));
    }
}
