//! Prompt rendering: the text pasted into a session for an event, or booted into a new one.
//!
//! Templates use `$name` / `${name}` placeholders, substituted in one pass and safely: an
//! unknown placeholder is left as written and `$$` is a literal `$` (reference §6.3).
//! Substituted values are never scanned again, so payload text cannot inject a
//! placeholder. The event's content reaches the prompt only through
//! [`$payload_excerpt`](crate::excerpt), fenced and introduced as untrusted; the
//! interaction directive is a constant per mode and is appended when a custom template
//! omits its placeholder, so no template can drop it silently.
//!
//! The built-in templates are the files under `crates/loop-core/templates/`. Reading an
//! operator's template file is the caller's job; this module only renders text.

use crate::config::InteractionMode;
use crate::event::Event;
use crate::excerpt::excerpt;
use crate::refs::WorkItemRef;

/// The default event prompt (`routing.promptTemplate` when the file is absent).
pub const EVENT_TEMPLATE: &str = include_str!("../templates/webhook-event-prompt.md");

/// The default spawn prompt (`routing.spawnPromptTemplate` when the file is absent).
pub const SPAWN_TEMPLATE: &str = include_str!("../templates/webhook-autoexecute-prompt.md");

/// What the agent does first on a work item: the body of the plugin's `/the-loop:work-on`
/// command, and what a spawn prompt inlines for a harness without the plugin.
pub const WORK_ON_INSTRUCTIONS: &str = crate::slash::WORK_ON.body;

const ARTIFACT_RULE: &str = "Iterate on brainstorm, requirements, design and task artifacts \
only through review of the pull request that carries them.";

/// Where the session takes its answers from (`$interaction_directive`). Constant per
/// mode: it interpolates nothing.
pub fn interaction_directive(mode: InteractionMode) -> String {
    let ask = match mode {
        InteractionMode::WorkItem => {
            "Nobody is watching this terminal. Ask every question as a comment on the work \
item or its pull request with `the-loop ask --work-item <ref> --question \"...\"` (or, if \
the CLI is unavailable, post it yourself ending with the marker \
`<!-- the-loop:agent-comment -->`), then wait: the answer arrives as the next event. \
Never block on an interactive prompt, and never read silence as consent."
        }
        InteractionMode::Cli => {
            "A human is attached to this session: ask your questions here, and record the \
outcome of each decision on the work item as a comment."
        }
    };
    format!("{ask} {ARTIFACT_RULE}")
}

/// Everything a prompt names.
#[derive(Debug, Clone, Copy)]
pub struct Prompt<'a> {
    /// The endpoint's ref for an event prompt, the target's for a spawn prompt.
    pub work_item: &'a WorkItemRef,
    pub event: &'a Event,
    pub delivery_id: Option<&'a str>,
    /// The excerpt of deliveries pasted together ([`crate::batch::excerpt_of`]);
    /// `None`: the event's own.
    pub payload_excerpt: Option<&'a str>,
    /// The process-graph block (owned by the graph area); empty when there is no graph.
    pub graph_context: &'a str,
    pub interaction: InteractionMode,
    /// Whether the session's harness has the-loop's plugin (`/the-loop:work-on`); without
    /// it `$work_on` inlines the instructions, so no prompt names a missing command.
    pub plugin: bool,
}

impl Prompt<'_> {
    /// Renders `template`. When it declares no `$interaction_directive`, the directive
    /// is appended after the text: trailing whitespace trimmed, a blank line, the
    /// directive, a newline.
    pub fn render(&self, template: &str) -> String {
        let directive = interaction_directive(self.interaction);
        let mut excerpt_text: Option<String> = None;
        let mut directive_used = false;
        let rendered = substitute(template, |name| {
            Some(match name {
                "work_item" => self.work_item.to_string(),
                "event" => self.event.kind.as_str().to_owned(),
                "action" => self.event.action.clone().unwrap_or_else(|| "-".to_owned()),
                "repository" => self
                    .event
                    .repository
                    .as_ref()
                    .map(|r| format!("{}/{}", r.owner(), r.name()))
                    .unwrap_or_default(),
                "delivery_id" => self.delivery_id.unwrap_or("-").to_owned(),
                "payload_excerpt" => {
                    let own =
                        || self.payload_excerpt.map_or_else(|| excerpt(self.event), str::to_owned);
                    excerpt_text.get_or_insert_with(own).clone()
                }
                "graph_context" => self.graph_context.to_owned(),
                "work_on" => work_on(self.work_item, self.plugin),
                "interaction_directive" => {
                    directive_used = true;
                    directive.clone()
                }
                _ => return None,
            })
        });
        if directive_used { rendered } else { format!("{}\n\n{directive}\n", rendered.trim_end()) }
    }
}

/// `$work_on`: the plugin's command when the harness has it, else its instructions.
pub fn work_on(work_item: &WorkItemRef, plugin: bool) -> String {
    if plugin {
        format!("Run `/the-loop:work-on {work_item}` to begin.")
    } else {
        format!("The work item is {work_item}.\n\n{}", WORK_ON_INSTRUCTIONS.trim_end())
    }
}

/// One-pass safe substitution of `$name` and `${name}`; `$$` is `$`. A placeholder
/// `value` does not know is left exactly as written.
fn substitute(template: &str, mut value: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let (name, consumed) = match after.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) if is_identifier(&braced[..end]) => (&braced[..end], end + 2),
                _ => ("", 0),
            },
            None => {
                let len = identifier_len(after);
                (&after[..len], len)
            }
        };
        match (consumed, value(name)) {
            (1.., Some(text)) => {
                out.push_str(&text);
                rest = &after[consumed..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The length of a leading `[_A-Za-z][_A-Za-z0-9]*`.
fn identifier_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    if !bytes.first().is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_') {
        return 0;
    }
    bytes.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count()
}

fn is_identifier(text: &str) -> bool {
    !text.is_empty() && identifier_len(text) == text.len()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event() -> Event {
        Event::from_webhook(
            "issue_comment",
            &json!({
                "action": "created",
                "repository": {"full_name": "octo/app"},
                "issue": {"number": 7},
                "comment": {"body": "please fix $work_item ${graph_context} $$", "user": {"login": "ann"}},
            }),
        )
    }

    fn prompt<'a>(item: &'a WorkItemRef, event: &'a Event) -> Prompt<'a> {
        Prompt {
            payload_excerpt: None,
            work_item: item,
            event,
            delivery_id: Some("d-1"),
            graph_context: "GRAPH",
            interaction: InteractionMode::WorkItem,
            plugin: true,
        }
    }

    #[test]
    fn placeholders_are_substituted_safely_in_one_pass() {
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let event = event();
        let text = prompt(&item, &event).render(
            "$work_item ${event} $action $repository $delivery_id $$5 $unknown ${nope} $ {x} \
             ${graph_context} $interaction_directive\n$payload_excerpt",
        );
        assert!(text.starts_with(
            "github:octo/app#7 issue_comment created octo/app d-1 $5 $unknown ${nope} $ {x} GRAPH "
        ));
        // The comment's own `$work_item` is payload text: it stays literal.
        assert!(text.contains("please fix $work_item ${graph_context} $$"), "{text}");
        assert_eq!(text.matches(&interaction_directive(InteractionMode::WorkItem)).count(), 1);
    }

    #[test]
    fn a_template_without_the_directive_gets_it_appended() {
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let event = event();
        let mut p = prompt(&item, &event);
        p.interaction = InteractionMode::Cli;
        assert_eq!(
            p.render("Custom for $work_item.\n\n"),
            format!(
                "Custom for github:octo/app#7.\n\n{}\n",
                interaction_directive(InteractionMode::Cli)
            )
        );
        assert_eq!(p.render("$$interaction_directive").matches("A human is attached").count(), 1);
    }

    #[test]
    fn the_default_templates_declare_every_placeholder_and_warn_about_untrusted_data() {
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let event = event();
        for template in [EVENT_TEMPLATE, SPAWN_TEMPLATE] {
            for placeholder in ["$payload_excerpt", "$graph_context", "$interaction_directive"] {
                assert!(template.contains(placeholder), "{placeholder}");
            }
            let text = prompt(&item, &event).render(template);
            assert!(text.contains("UNTRUSTED"));
            assert!(text.contains("```json\n{\n  \"comment\""), "{text}");
            assert!(!text.contains("$payload_excerpt"));
        }
        assert!(
            prompt(&item, &event)
                .render(SPAWN_TEMPLATE)
                .contains("/the-loop:work-on github:octo/app#7")
        );
    }

    #[test]
    fn without_the_plugin_the_spawn_prompt_inlines_the_work_on_instructions() {
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let event = event();
        let mut p = prompt(&item, &event);
        p.plugin = false;
        let text = p.render(SPAWN_TEMPLATE);
        assert!(!text.contains("/the-loop:"), "{text}");
        assert!(text.contains("The work item is github:octo/app#7."));
        assert!(text.contains("the-loop ask --question"));
        assert!(text.contains("the-loop sessions link-pr"));
    }
}
