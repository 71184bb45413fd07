//! Harness adapters: how to launch an agent CLI in a fresh conversation or resume one.
//!
//! One trait, [`Harness`], three adapters: Claude Code (`claude --session-id <uuid>` /
//! `--resume <id>`), Cursor agent (`cursor-agent create-chat` mints the chat id, then
//! `cursor-agent --resume <id>` runs it), and a [`CommandHarness`] built from argv
//! templates with a `{session_id}` placeholder, so any terminal agent — or the stand-in
//! harness — can be hosted.
//!
//! Argv shape: program, the conversation pair, the operator's `routing.harnessArgs`, then
//! `--model`/`--effort` for the [`LaunchChoice`] — already resolved against what the
//! operator offers (`routing.harnessChoices`), so an adapter passes it as given. No prompt
//! is ever part of an argv (SPEC §8): the first prompt is pasted once the harness reads
//! its terminal. A conversation id is validated ([`ConversationId`]) so a recorded id can
//! never be read as a flag.
//!
//! [`Harness::received`] answers, best-effort, whether a conversation already received a
//! message containing a given line (the `Delivery: <key>` line of an event prompt): the
//! in-doubt check after a `kill -9` between a paste and its record (docs/dispatcher.md,
//! "In doubt"). Claude Code answers from its session transcript, a command harness from
//! the record file it was configured with, Cursor cannot tell. It reads files only; it
//! never asks the running harness.

use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use loop_core::agent_state::PaneSigns;
use loop_core::config::{Harness as ConfiguredHarness, HarnessArgsConfig};
use loop_core::pane::InputBoxSigns;

/// The longest conversation id accepted.
const CONVERSATION_ID_MAX: usize = 128;

/// The placeholder a [`CommandHarness`] template replaces with the conversation id.
pub const SESSION_ID_PLACEHOLDER: &str = "{session_id}";

/// Why a harness could not be launched as asked.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(
        "`{id}` is not a resumable conversation id (expected 1-128 of letters, digits, `.`, `_`, `-`, not starting with `-` or `.`)"
    )]
    ConversationId { id: String },
    #[error("harness `{harness}` cannot resume a conversation: {why}")]
    NoResume { harness: String, why: String },
    #[error("harness `{harness}` has an empty `{template}` command template")]
    EmptyTemplate { harness: String, template: &'static str },
    #[error("could not ask `{program}` for a new chat id")]
    NewChat {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program} create-chat` failed ({status}): {output}")]
    NewChatFailed { program: String, status: String, output: String },
}

impl loop_core::Hint for HarnessError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::NewChat { program, .. } => {
                Some(format!("is `{program}` installed and logged in?"))
            }
            _ => None,
        }
    }
}

/// A harness conversation id: `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, so it can never start
/// a flag or a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConversationId(String);

impl ConversationId {
    pub fn parse(id: &str) -> Result<Self, HarnessError> {
        let mut bytes = id.bytes();
        let ok = id.len() <= CONVERSATION_ID_MAX
            && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(Self(id.to_owned()))
        } else {
            Err(HarnessError::ConversationId { id: id.to_owned() })
        }
    }

    /// A new random (v4) UUID.
    pub fn new_uuid() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a session is launched on: the model and effort a work item chose, as far as the
/// operator offers them (`routing.harnessChoices`); `None`: the harness's own default.
/// And the-loop's Claude Code plugin, loaded for this session only (`--plugin-dir`) when
/// the spawn prompt may name its commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchChoice {
    pub model: Option<String>,
    pub effort: Option<String>,
    /// The plugin's directory (`routing.harnessPlugins`); harnesses without plugins
    /// ignore it.
    pub plugin_dir: Option<PathBuf>,
}

/// A harness command line and the handles the session record keeps about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Program first; never contains a prompt.
    pub argv: Vec<String>,
    pub conversation: ConversationId,
    /// Whether this launch resumes an existing conversation.
    pub resumed: bool,
    /// The model actually passed, if any.
    pub model: Option<String>,
    /// The effort actually passed, if any.
    pub effort: Option<String>,
    /// The operator's arguments as launched.
    pub harness_args: Vec<String>,
}

/// An agent CLI the-loop can host in tmux.
pub trait Harness: fmt::Debug + Send + Sync {
    /// The name recorded in the session record (`claude`, `cursor`, or the configured
    /// name of a command harness).
    fn name(&self) -> &str;

    /// Mints the id of a new conversation.
    fn new_conversation(&self) -> Result<ConversationId, HarnessError>;

    /// The command line starting the (new) conversation `conversation`.
    fn fresh(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError>;

    /// The command line resuming `conversation`.
    fn resume(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError>;

    /// How the harness draws its input box, when it draws one: deliveries then wait for
    /// the box and confirm the agent took the text ([`crate::landing`]).
    fn input_box(&self) -> Option<&InputBoxSigns> {
        None
    }

    /// How it draws a permission dialog and a usage-limit notice, when known
    /// (docs/agent-states.md); `None`: its pane is read for exit and activity only.
    fn pane_signs(&self) -> Option<&PaneSigns> {
        None
    }

    /// Whether `conversation` (run in `cwd`) already received a message with a line
    /// ending in `line`: `Some(true)` received, `Some(false)` not, `None` this harness
    /// cannot tell (no transcript it can read). Reads files; call on a blocking thread.
    fn received(&self, conversation: &str, cwd: &Path, line: &str) -> Option<bool> {
        let _ = (conversation, cwd, line);
        None
    }
}

/// Whether the JSON-lines file at `path` holds, in any string of any line, a text line
/// ending in `line`. `None` when the file cannot be opened (a missing transcript proves
/// nothing: the harness may not have written it yet); unparsable lines are skipped.
pub fn transcript_holds(path: &Path, line: &str) -> Option<bool> {
    let file = std::fs::File::open(path).ok()?;
    let found = BufReader::new(file).lines().map_while(Result::ok).any(|entry| {
        entry.contains(line)
            && serde_json::from_str::<serde_json::Value>(&entry)
                .is_ok_and(|value| any_text_line_ends_with(&value, line))
    });
    Some(found)
}

fn any_text_line_ends_with(value: &serde_json::Value, line: &str) -> bool {
    match value {
        serde_json::Value::String(text) => text.lines().any(|l| l.trim_end().ends_with(line)),
        serde_json::Value::Array(items) => items.iter().any(|v| any_text_line_ends_with(v, line)),
        serde_json::Value::Object(map) => map.values().any(|v| any_text_line_ends_with(v, line)),
        _ => false,
    }
}

/// The directory name Claude Code keeps a working directory's transcripts under, inside
/// `<config dir>/projects/`: every character other than an ASCII letter or digit becomes
/// `-` (`/home/ann/my_repo` → `-home-ann-my-repo`).
pub fn claude_project_dir_name(cwd: &Path) -> String {
    cwd.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// The adapter for a configured harness (`routing.defaultHarness`), with its
/// `routing.harnessArgs`.
/// `claude_config_dir` is where Claude Code keeps its files (its transcripts are under
/// `projects/`).
pub fn configured(
    harness: ConfiguredHarness,
    args: &HarnessArgsConfig,
    claude_config_dir: &Path,
) -> Box<dyn Harness> {
    match harness {
        ConfiguredHarness::Claude => {
            let mut claude = ClaudeCode::new(args.claude.clone());
            claude.transcripts = Some(claude_config_dir.join("projects"));
            Box::new(claude)
        }
        ConfiguredHarness::Cursor => Box::new(CursorAgent::new(args.cursor.clone())),
    }
}

/// Claude Code.
#[derive(Debug, Clone)]
pub struct ClaudeCode {
    /// The executable (`claude`).
    pub program: String,
    /// `routing.harnessArgs.claude`.
    pub args: Vec<String>,
    /// `<config dir>/projects`, where the session transcripts are
    /// (`<escaped cwd>/<session id>.jsonl`); `None`: [`Harness::received`] cannot tell.
    pub transcripts: Option<PathBuf>,
    /// How its input box looks.
    pub input_box: InputBoxSigns,
    /// How its dialogs and limit notices look.
    pub pane_signs: PaneSigns,
}

impl ClaudeCode {
    pub fn new(args: Vec<String>) -> Self {
        Self {
            program: "claude".to_owned(),
            args,
            transcripts: None,
            input_box: InputBoxSigns::claude_code(),
            pane_signs: PaneSigns::claude_code(),
        }
    }

    fn launch(
        &self,
        flag: &str,
        conversation: &ConversationId,
        choice: &LaunchChoice,
        resumed: bool,
    ) -> Launch {
        let mut argv = vec![self.program.clone(), flag.to_owned(), conversation.to_string()];
        argv.extend(self.args.iter().cloned());
        push_pair(&mut argv, "--model", choice.model.as_deref());
        push_pair(&mut argv, "--effort", choice.effort.as_deref());
        let plugin_dir = choice.plugin_dir.as_ref().map(|dir| dir.display().to_string());
        push_pair(&mut argv, "--plugin-dir", plugin_dir.as_deref());
        Launch {
            argv,
            conversation: conversation.clone(),
            resumed,
            model: choice.model.clone(),
            effort: choice.effort.clone(),
            harness_args: self.args.clone(),
        }
    }
}

impl Harness for ClaudeCode {
    fn name(&self) -> &str {
        "claude"
    }

    fn new_conversation(&self) -> Result<ConversationId, HarnessError> {
        Ok(ConversationId::new_uuid())
    }

    fn fresh(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError> {
        Ok(self.launch("--session-id", conversation, choice, false))
    }

    fn resume(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError> {
        Ok(self.launch("--resume", conversation, choice, true))
    }

    fn input_box(&self) -> Option<&InputBoxSigns> {
        Some(&self.input_box)
    }

    fn pane_signs(&self) -> Option<&PaneSigns> {
        Some(&self.pane_signs)
    }

    fn received(&self, conversation: &str, cwd: &Path, line: &str) -> Option<bool> {
        let conversation = ConversationId::parse(conversation).ok()?;
        let dir = self.transcripts.as_ref()?.join(claude_project_dir_name(cwd));
        transcript_holds(&dir.join(format!("{conversation}.jsonl")), line)
    }
}

/// Cursor agent. Its interactive mode cannot be given a new id, so a chat is created
/// first (`cursor-agent create-chat` prints its id) and then opened with `--resume`.
#[derive(Debug, Clone)]
pub struct CursorAgent {
    /// The executable (`cursor-agent`).
    pub program: String,
    /// `routing.harnessArgs.cursor`.
    pub args: Vec<String>,
}

impl CursorAgent {
    pub fn new(args: Vec<String>) -> Self {
        Self { program: "cursor-agent".to_owned(), args }
    }

    fn launch(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
        resumed: bool,
    ) -> Launch {
        let mut argv = vec![self.program.clone(), "--resume".to_owned(), conversation.to_string()];
        argv.extend(self.args.iter().cloned());
        push_pair(&mut argv, "--model", choice.model.as_deref());
        Launch {
            argv,
            conversation: conversation.clone(),
            resumed,
            model: choice.model.clone(),
            effort: None,
            harness_args: self.args.clone(),
        }
    }
}

impl Harness for CursorAgent {
    fn name(&self) -> &str {
        "cursor"
    }

    fn new_conversation(&self) -> Result<ConversationId, HarnessError> {
        let output =
            Command::new(&self.program).arg("create-chat").stdin(Stdio::null()).output().map_err(
                |source| HarnessError::NewChat { program: self.program.clone(), source },
            )?;
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            return Err(HarnessError::NewChatFailed {
                program: self.program.clone(),
                status: output.status.to_string(),
                output: if stderr.is_empty() { stdout } else { stderr },
            });
        }
        ConversationId::parse(&stdout)
    }

    fn fresh(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError> {
        Ok(self.launch(conversation, choice, false))
    }

    fn resume(
        &self,
        conversation: &ConversationId,
        choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError> {
        Ok(self.launch(conversation, choice, true))
    }
}

/// Any terminal agent, described by argv templates. Every `{session_id}` in an element
/// is replaced by the conversation id (a fresh UUID for a new conversation).
#[derive(Debug, Clone)]
pub struct CommandHarness {
    pub name: String,
    /// Starts a new conversation.
    pub fresh: Vec<String>,
    /// Resumes one; `None`: the agent cannot resume (a respawn starts fresh).
    pub resume: Option<Vec<String>>,
    /// A JSON-lines file the agent appends every message it receives to (`{session_id}`
    /// replaced; the stand-in's `--record`); `None`: [`Harness::received`] cannot tell.
    pub transcript: Option<String>,
}

impl CommandHarness {
    fn launch(
        &self,
        template: &[String],
        which: &'static str,
        conversation: &ConversationId,
        resumed: bool,
    ) -> Result<Launch, HarnessError> {
        if template.is_empty() {
            return Err(HarnessError::EmptyTemplate {
                harness: self.name.clone(),
                template: which,
            });
        }
        let argv = template
            .iter()
            .map(|element| element.replace(SESSION_ID_PLACEHOLDER, conversation.as_str()))
            .collect();
        Ok(Launch {
            argv,
            conversation: conversation.clone(),
            resumed,
            model: None,
            effort: None,
            harness_args: Vec::new(),
        })
    }
}

impl Harness for CommandHarness {
    fn name(&self) -> &str {
        &self.name
    }

    fn new_conversation(&self) -> Result<ConversationId, HarnessError> {
        Ok(ConversationId::new_uuid())
    }

    fn fresh(
        &self,
        conversation: &ConversationId,
        _choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError> {
        self.launch(&self.fresh, "fresh", conversation, false)
    }

    fn resume(
        &self,
        conversation: &ConversationId,
        _choice: &LaunchChoice,
    ) -> Result<Launch, HarnessError> {
        match &self.resume {
            Some(template) => self.launch(template, "resume", conversation, true),
            None => Err(HarnessError::NoResume {
                harness: self.name.clone(),
                why: "no resume command is configured".to_owned(),
            }),
        }
    }

    fn received(&self, conversation: &str, _cwd: &Path, line: &str) -> Option<bool> {
        let conversation = ConversationId::parse(conversation).ok()?;
        let path = self.transcript.as_ref()?.replace(SESSION_ID_PLACEHOLDER, conversation.as_str());
        transcript_holds(Path::new(&path), line)
    }
}

fn push_pair(argv: &mut Vec<String>, flag: &str, value: Option<&str>) {
    if let Some(value) = value {
        argv.extend([flag.to_owned(), value.to_owned()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ConversationId {
        ConversationId::parse(s).unwrap()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_configured_harness_gets_its_own_arguments() {
        let args = HarnessArgsConfig { claude: strings(&["--a"]), cursor: strings(&["--b"]) };
        let claude = configured(ConfiguredHarness::Claude, &args, Path::new("/c"));
        assert_eq!(claude.name(), "claude");
        assert_eq!(claude.fresh(&id("u"), &LaunchChoice::default()).unwrap().harness_args, ["--a"]);
        let cursor = configured(ConfiguredHarness::Cursor, &args, Path::new("/c"));
        assert_eq!(cursor.name(), "cursor");
        assert_eq!(
            cursor.resume(&id("c"), &LaunchChoice::default()).unwrap().harness_args,
            ["--b"]
        );
    }

    #[test]
    fn conversation_ids_can_never_be_flags_or_paths() {
        for ok in ["a", "0b6e7c1e-1d2f-4c55-9a0e-8f1f5d1c2b3a", "chat_1.x-y"] {
            assert!(ConversationId::parse(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(129);
        for bad in ["", "-x", "--resume", ".hidden", "a/b", "../x", "a b", "a;b", long.as_str()] {
            assert!(ConversationId::parse(bad).is_err(), "{bad:?}");
        }
        assert!(ConversationId::parse(ConversationId::new_uuid().as_str()).is_ok());
    }

    #[test]
    fn claude_fresh_and_resume_put_operator_args_after_the_id_pair() {
        let claude = ClaudeCode::new(strings(&["--permission-mode", "acceptEdits"]));
        let fresh = claude.fresh(&id("u-1"), &LaunchChoice::default()).unwrap();
        assert_eq!(
            fresh.argv,
            strings(&["claude", "--session-id", "u-1", "--permission-mode", "acceptEdits"])
        );
        assert!(!fresh.resumed);
        let resume = claude.resume(&id("u-1"), &LaunchChoice::default()).unwrap();
        assert_eq!(
            resume.argv,
            strings(&["claude", "--resume", "u-1", "--permission-mode", "acceptEdits"])
        );
        assert!(resume.resumed);
        assert_eq!(resume.harness_args, strings(&["--permission-mode", "acceptEdits"]));
    }

    #[test]
    fn a_chosen_model_effort_and_plugin_follow_the_operators_arguments() {
        let claude = ClaudeCode::new(strings(&["--verbose"]));
        let chosen = LaunchChoice {
            model: Some("opus".into()),
            effort: Some("high".into()),
            plugin_dir: Some(PathBuf::from("/s/plugin")),
        };
        let launch = claude.fresh(&id("u"), &chosen).unwrap();
        assert_eq!(
            launch.argv,
            strings(&[
                "claude",
                "--session-id",
                "u",
                "--verbose",
                "--model",
                "opus",
                "--effort",
                "high",
                "--plugin-dir",
                "/s/plugin"
            ])
        );
        assert_eq!(
            (launch.model.as_deref(), launch.effort.as_deref()),
            (Some("opus"), Some("high"))
        );
        let launch = claude.resume(&id("u"), &LaunchChoice::default()).unwrap();
        assert_eq!(launch.argv, strings(&["claude", "--resume", "u", "--verbose"]));
        assert_eq!((launch.model, launch.effort), (None, None));
    }

    #[test]
    fn cursor_opens_a_created_chat_with_resume_and_has_no_effort_or_plugin() {
        let cursor = CursorAgent::new(strings(&["--force"]));
        let chosen = LaunchChoice {
            model: Some("gpt-5".into()),
            effort: Some("high".into()),
            plugin_dir: Some(PathBuf::from("/s/plugin")),
        };
        let launch = cursor.fresh(&id("chat-9"), &chosen).unwrap();
        assert_eq!(
            launch.argv,
            strings(&["cursor-agent", "--resume", "chat-9", "--force", "--model", "gpt-5"])
        );
        assert_eq!(launch.effort, None);
    }

    /// A `cursor-agent` stand-in whose `create-chat` prints `chat`.
    fn fake_cursor(dir: &std::path::Path, chat: &str) -> CursorAgent {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join(format!("cursor-agent-{}", chat.len()));
        std::fs::write(&script, format!("#!/bin/sh\n[ \"$1\" = create-chat ] && echo '{chat}'\n"))
            .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cursor = CursorAgent::new(Vec::new());
        cursor.program = script.display().to_string();
        cursor
    }

    #[test]
    fn cursor_reads_the_new_chat_id_from_create_chat_and_validates_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(fake_cursor(dir.path(), "chat-42").new_conversation().unwrap(), id("chat-42"));
        let flag = fake_cursor(dir.path(), "--oops-flag");
        assert!(matches!(flag.new_conversation(), Err(HarnessError::ConversationId { .. })));
        let mut missing = CursorAgent::new(Vec::new());
        missing.program = dir.path().join("absent").display().to_string();
        assert!(matches!(missing.new_conversation(), Err(HarnessError::NewChat { .. })));
    }

    #[test]
    fn a_command_harness_fills_the_session_id_into_its_templates() {
        let harness = CommandHarness {
            name: "stand-in".into(),
            fresh: strings(&[
                "agent",
                "--session-id",
                "{session_id}",
                "--log=/tmp/{session_id}.log",
            ]),
            resume: Some(strings(&["agent", "--resume", "{session_id}"])),
            transcript: None,
        };
        let fresh = harness.fresh(&id("abc"), &LaunchChoice::default()).unwrap();
        assert_eq!(fresh.argv, strings(&["agent", "--session-id", "abc", "--log=/tmp/abc.log"]));
        let resume = harness.resume(&id("abc"), &LaunchChoice::default()).unwrap();
        assert_eq!(resume.argv, strings(&["agent", "--resume", "abc"]));
        let no_resume = CommandHarness { resume: None, ..harness };
        assert!(matches!(
            no_resume.resume(&id("abc"), &LaunchChoice::default()),
            Err(HarnessError::NoResume { .. })
        ));
    }

    #[test]
    fn claude_answers_from_the_session_transcript_under_its_escaped_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let mut claude = ClaudeCode::new(Vec::new());
        let cwd = Path::new("/work/my_repo.git");
        assert_eq!(claude.received("u-1", cwd, "Delivery: d-1"), None, "no transcripts dir");
        claude.transcripts = Some(dir.path().to_owned());
        assert_eq!(claude.received("u-1", cwd, "Delivery: d-1"), None, "no transcript yet");
        let project = dir.path().join("-work-my-repo-git");
        std::fs::create_dir_all(&project).unwrap();
        let user = serde_json::json!({"type": "user", "message": {"role": "user", "content":
            [{"type": "text", "text": "# Event\n- Delivery: d-1\nmore"}]}});
        std::fs::write(project.join("u-1.jsonl"), format!("{user}\nnot json\n")).unwrap();
        assert_eq!(claude.received("u-1", cwd, "Delivery: d-1"), Some(true));
        assert_eq!(claude.received("u-1", cwd, "Delivery: d-"), Some(false), "a whole key only");
        assert_eq!(claude.received("u-1", cwd, "Delivery: d-2"), Some(false));
        assert_eq!(claude.received("../u-1", cwd, "Delivery: d-1"), None, "never a path");
    }

    #[test]
    fn a_command_harness_answers_from_its_record_and_cursor_cannot_tell() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("{session_id}.jsonl");
        let harness = CommandHarness {
            name: "stand-in".into(),
            fresh: strings(&["agent"]),
            resume: None,
            transcript: Some(record.display().to_string()),
        };
        std::fs::write(dir.path().join("s1.jsonl"), "{\"text\":\"x\\nDelivery: k\"}\n").unwrap();
        assert_eq!(harness.received("s1", dir.path(), "Delivery: k"), Some(true));
        assert_eq!(harness.received("s2", dir.path(), "Delivery: k"), None);
        let cursor = CursorAgent::new(Vec::new());
        assert_eq!(cursor.received("s1", dir.path(), "Delivery: k"), None);
    }
}
