//! YAML → [`Loop`]: parse a loop file and refuse, listing every finding at once, what the
//! runtime could not walk honestly — an unknown hook or parameter, an edge to a node
//! nobody declared, a duplicate id, a node both required and skippable, a skippable node
//! with no `on: skipped` edge, a skip set naming a node that cannot be skipped, a node
//! naming a slash command the-loop does not ship ([`crate::slash`]).

use std::collections::BTreeSet;

use saphyr::{LoadableYamlNode, Scalar, Yaml};

use super::model::{Actor, Artifact, Edge, Hook, HookCall, Loop, Node, Params, SessionUse};

/// The attempts a node allows before it escalates, when it declares none.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// A loop file the compiler refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("loop `{name}` does not compile: {}", problems.join("; "))]
pub struct CompileError {
    /// The loop's `name`, or `?` when the file has none.
    pub name: String,
    pub problems: Vec<String>,
}

/// What compiled, with the warnings the compiler had (a duplicate `(from, on)` edge).
#[derive(Debug, Clone)]
pub struct Compiled {
    pub graph: Loop,
    pub warnings: Vec<String>,
}

/// Compiles one loop file.
pub fn compile(text: &str) -> Result<Compiled, CompileError> {
    let mut problems = Vec::new();
    let docs = Yaml::load_from_str(text).map_err(|err| CompileError {
        name: "?".to_owned(),
        problems: vec![format!("not YAML: {err}")],
    })?;
    let Some(doc) = docs.first().filter(|doc| doc.is_mapping()) else {
        return Err(CompileError {
            name: "?".to_owned(),
            problems: vec!["the file is not a mapping".to_owned()],
        });
    };
    let name = string(doc, "name").unwrap_or_default();
    for key in keys(doc) {
        if !["version", "name", "start", "skipSets", "nodes", "edges"].contains(&key.as_str()) {
            problems.push(format!("unknown key `{key}`"));
        }
    }
    match doc.as_mapping_get("version").and_then(Yaml::as_integer) {
        Some(1) => {}
        other => problems.push(format!("`version` must be 1, got {other:?}")),
    }
    if name.is_empty() {
        problems.push("`name` is missing".to_owned());
    }

    let mut nodes = Vec::new();
    let mut ids = BTreeSet::new();
    for (at, raw) in sequence(doc, "nodes").iter().enumerate() {
        let Some(node) = node(raw, at, &mut problems) else { continue };
        if !ids.insert(node.id.clone()) {
            problems.push(format!("duplicate node id `{}`", node.id));
        }
        nodes.push(node);
    }
    if nodes.is_empty() {
        problems.push("`nodes` declares no node".to_owned());
    }

    let start = string(doc, "start").unwrap_or_default();
    if !ids.contains(&start) {
        problems.push(format!("`start` names no declared node (`{start}`)"));
    }

    let (edges, warnings) = edges(doc, &ids, &mut problems);
    for node in nodes.iter().filter(|n| n.skippable) {
        if !edges.iter().any(|e| e.from == node.id && e.on == "skipped") {
            problems.push(format!("node `{}` is skippable but has no `on: skipped` edge", node.id));
        }
    }

    let mut skip_sets = Vec::new();
    if let Some(sets) = doc.as_mapping_get("skipSets").and_then(Yaml::as_mapping) {
        for (set, members) in sets {
            let set = set.as_str().unwrap_or_default().to_owned();
            let mut list = Vec::new();
            for member in members.as_vec().map(Vec::as_slice).unwrap_or_default() {
                let member = member.as_str().unwrap_or_default().to_owned();
                match nodes.iter().find(|n| n.id == member) {
                    None => problems.push(format!("skip set `{set}` names no node `{member}`")),
                    Some(n) if !n.skippable || n.opt_in => problems.push(format!(
                        "skip set `{set}` names `{member}`, which is not skippable (or is opt-in)"
                    )),
                    Some(_) => list.push(member),
                }
            }
            skip_sets.push((set, list));
        }
    }

    if problems.is_empty() {
        Ok(Compiled { graph: Loop { name, start, skip_sets, nodes, edges }, warnings })
    } else {
        Err(CompileError { name: if name.is_empty() { "?".to_owned() } else { name }, problems })
    }
}

const NODE_KEYS: &[&str] = &[
    "id",
    "phase",
    "actor",
    "produces",
    "command",
    "stage",
    "session",
    "required",
    "optional",
    "skippable",
    "optIn",
    "description",
    "maxAttempts",
    "entry",
    "exit",
    "terminal",
];

fn node(raw: &Yaml, at: usize, problems: &mut Vec<String>) -> Option<Node> {
    let Some(id) = string(raw, "id").filter(|id| !id.is_empty()) else {
        problems.push(format!("nodes[{at}] has no `id`"));
        return None;
    };
    let here = |what: String| format!("node `{id}`: {what}");
    for key in keys(raw) {
        if !NODE_KEYS.contains(&key.as_str()) {
            problems.push(here(format!("unknown key `{key}`")));
        }
    }
    let actor = match string(raw, "actor").as_deref() {
        Some("agent") => Actor::Agent,
        Some("human") => Actor::Human,
        Some("code") => Actor::Code,
        other => {
            problems.push(here(format!("actor must be agent|human|code, got {other:?}")));
            Actor::Agent
        }
    };
    let session = match string(raw, "session").as_deref() {
        None | Some("new") => SessionUse::New,
        Some("inherit") => SessionUse::Inherit,
        Some(other) => {
            problems.push(here(format!("session must be new|inherit, got `{other}`")));
            SessionUse::New
        }
    };
    let flag = |key: &str| raw.as_mapping_get(key).and_then(Yaml::as_bool).unwrap_or(false);
    let (required, opt_in) = (flag("required"), flag("optIn"));
    let skippable = flag("skippable") || opt_in;
    if required && flag("skippable") {
        problems.push(here("`required` and `skippable` contradict each other".to_owned()));
    }
    if required && opt_in {
        problems.push(here("`required` and `optIn` contradict each other".to_owned()));
    }
    let mut produces = Vec::new();
    for name in sequence(raw, "produces") {
        match name.as_str().map(artifact) {
            Some(Some(artifact)) => produces.push(artifact),
            _ => problems.push(here(format!("`produces` entry {name:?} has an empty alternative"))),
        }
    }
    let max_attempts = match raw.as_mapping_get("maxAttempts") {
        None => DEFAULT_MAX_ATTEMPTS,
        Some(value) => match value.as_integer().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if n > 0 => n,
            _ => {
                problems.push(here("`maxAttempts` must be a positive integer".to_owned()));
                DEFAULT_MAX_ATTEMPTS
            }
        },
    };
    let command = string(raw, "command");
    if let Some(name) = command.as_deref().filter(|name| crate::slash::shipped(name).is_none()) {
        let known: Vec<&str> = crate::slash::SHIPPED.iter().map(|c| c.name).collect();
        problems.push(here(format!(
            "command `{name}` is not one the-loop ships (it ships {})",
            known.join(", ")
        )));
    }
    let entry = chain(raw, "entry", &id, problems);
    let exit = chain(raw, "exit", &id, problems);
    Some(Node {
        phase: string(raw, "phase").filter(|p| !p.is_empty()),
        actor,
        produces,
        command,
        session,
        required,
        optional: flag("optional"),
        skippable,
        opt_in,
        description: string(raw, "description"),
        max_attempts,
        entry,
        exit,
        terminal: flag("terminal"),
        id,
    })
}

fn chain(raw: &Yaml, key: &str, id: &str, problems: &mut Vec<String>) -> Vec<HookCall> {
    let mut calls = Vec::new();
    for item in sequence(raw, key) {
        let (name, with) = match item {
            Yaml::Value(Scalar::String(name)) => (name.to_string(), None),
            Yaml::Mapping(_) => {
                (string(item, "hook").unwrap_or_default(), item.as_mapping_get("with"))
            }
            _ => {
                problems.push(format!("node `{id}`: {key} entry {item:?} is not a hook"));
                continue;
            }
        };
        let Some(hook) = Hook::from_name(&name) else {
            problems.push(format!("node `{id}`: unknown hook `{name}` in {key}"));
            continue;
        };
        let here = format!("node `{id}`: {name}");
        calls.push(HookCall {
            hook,
            with: with.map(|w| params(w, &here, problems)).unwrap_or_default(),
        });
    }
    calls
}

fn params(with: &Yaml, here: &str, problems: &mut Vec<String>) -> Params {
    let mut params = Params::default();
    let Some(map) = with.as_mapping() else {
        problems.push(format!("{here}: `with` is not a mapping"));
        return params;
    };
    let strings = |value: &Yaml| -> Vec<String> {
        value
            .as_vec()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    for (key, value) in map {
        match key.as_str().unwrap_or_default() {
            "locked" => params.locked = value.as_bool().unwrap_or(false),
            "sections" => params.sections = strings(value),
            "checkmarks" => match value.as_str() {
                Some("complete") => params.checkmarks_complete = true,
                other => {
                    problems.push(format!("{here}: checkmarks must be `complete`, got {other:?}"))
                }
            },
            "validates" => match value.as_str().and_then(artifact) {
                Some(a) => params.validates = Some(a),
                None => problems.push(format!("{here}: `validates` has an empty alternative")),
            },
            "into" => params.into = value.as_str().map(str::to_owned),
            "event" => params.event = value.as_str().map(str::to_owned),
            "artifact" => params.artifact = value.as_str().map(str::to_owned),
            "upstream" => params.upstream = value.as_str().map(str::to_owned),
            "markers" => params.markers = strings(value),
            other => problems.push(format!("{here}: unknown parameter `{other}`")),
        }
    }
    params
}

fn edges(
    doc: &Yaml,
    ids: &BTreeSet<String>,
    problems: &mut Vec<String>,
) -> (Vec<Edge>, Vec<String>) {
    let (mut edges, mut warnings) = (Vec::<Edge>::new(), Vec::new());
    for (at, raw) in sequence(doc, "edges").iter().enumerate() {
        let (Some(from), Some(to), Some(on)) = (string(raw, "from"), string(raw, "to"), on(raw))
        else {
            problems.push(format!("edges[{at}] needs `from`, `to` and `on`"));
            continue;
        };
        for end in [&from, &to] {
            if !ids.contains(end) {
                problems.push(format!("edge {from} -> {to} names undeclared node `{end}`"));
            }
        }
        if edges.iter().any(|e| e.from == from && e.on == on) {
            warnings.push(format!("duplicate edge from `{from}` on `{on}`: the first is kept"));
            continue;
        }
        edges.push(Edge { from, to, on });
    }
    (edges, warnings)
}

/// An edge's `on`: a string, or a YAML 1.1 boolean some editors produce for `on: yes`
/// undone to the word it was.
fn on(raw: &Yaml) -> Option<String> {
    match raw.as_mapping_get("on")? {
        Yaml::Value(Scalar::String(s)) => Some(s.to_string()),
        Yaml::Value(Scalar::Boolean(true)) => Some("true".to_owned()),
        Yaml::Value(Scalar::Boolean(false)) => Some("false".to_owned()),
        _ => None,
    }
}

/// `a|b` → an artifact with two accepted names; `None` when an alternative is empty.
fn artifact(text: &str) -> Option<Artifact> {
    let names: Vec<String> = text.split('|').map(|n| n.trim().to_owned()).collect();
    names.iter().all(|n| !n.is_empty()).then_some(Artifact { names })
}

fn string(raw: &Yaml, key: &str) -> Option<String> {
    raw.as_mapping_get(key).and_then(Yaml::as_str).map(str::to_owned)
}

fn sequence<'a>(raw: &'a Yaml<'a>, key: &str) -> &'a [Yaml<'a>] {
    raw.as_mapping_get(key).and_then(Yaml::as_vec).map(Vec::as_slice).unwrap_or_default()
}

fn keys(raw: &Yaml) -> Vec<String> {
    raw.as_mapping()
        .map(|map| map.keys().map(|k| k.as_str().unwrap_or("?").to_owned()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "version: 1\nname: t\nstart: a\nnodes:\n  - {id: a, actor: agent, exit: [verify-tests]}\n  - {id: b, actor: human, terminal: true}\nedges:\n  - {from: a, to: b, on: pass}\n";

    fn problems(text: &str) -> Vec<String> {
        compile(text).err().map(|e| e.problems).unwrap_or_default()
    }

    #[test]
    fn a_minimal_loop_compiles() {
        let compiled = compile(MINIMAL).map_err(|e| e.to_string());
        let graph = compiled.map(|c| c.graph);
        assert_eq!(graph.as_ref().map(|g| g.edge("a", "pass")), Ok(Some("b")));
        assert_eq!(graph.map(|g| g.start_node().max_attempts), Ok(DEFAULT_MAX_ATTEMPTS));
    }

    #[test]
    fn every_compile_time_failure_is_listed_at_once() {
        let text = "version: 1\nname: t\nstart: nowhere\nskipSets:\n  s: [a]\nnodes:\n\
            \x20 - {id: a, actor: robot, exit: [no-such-hook]}\n\
            \x20 - {id: a, actor: agent, session: borrowed}\n\
            \x20 - {id: c, actor: agent, required: true, skippable: true, produces: ['x.md|']}\n\
            \x20 - {id: d, actor: agent, required: true, optIn: true}\n\
            \x20 - {id: e, actor: agent, exit: [{hook: validate-artifacts, with: {colour: red}}]}\n\
            \x20 - {id: f, actor: agent, command: write-poetry}\n\
            edges:\n  - {from: a, to: ghost, on: pass}\n";
        let found = problems(text);
        for expected in [
            "actor must be agent|human|code",
            "unknown hook `no-such-hook`",
            "duplicate node id `a`",
            "session must be new|inherit",
            "`required` and `skippable`",
            "`required` and `optIn`",
            "empty alternative",
            "unknown parameter `colour`",
            "undeclared node `ghost`",
            "`start` names no declared node",
            "node `c` is skippable but has no `on: skipped` edge",
            "skip set `s` names `a`, which is not skippable",
            "command `write-poetry` is not one the-loop ships (it ships work-on, brainstorm",
        ] {
            assert!(found.iter().any(|p| p.contains(expected)), "{expected:?} not in {found:#?}");
        }
    }

    #[test]
    fn a_duplicate_edge_keeps_the_first_with_a_warning() {
        let text = MINIMAL.replace("on: pass}\n", "on: pass}\n  - {from: a, to: a, on: pass}\n");
        let compiled = compile(&text).map_err(|e| e.to_string());
        let compiled = compiled.as_ref();
        assert_eq!(compiled.map(|c| c.graph.edge("a", "pass")), Ok(Some("b")));
        assert_eq!(compiled.map(|c| c.warnings.len()), Ok(1));
    }

    #[test]
    fn text_that_is_not_a_loop_is_refused_not_a_panic() {
        for text in ["", "[1, 2]", "{{{", "version: 2\nname: x\n"] {
            assert!(compile(text).is_err(), "{text:?}");
        }
    }
}
