//! Fuzz harness: raw body + headers → the receiver's decision.
//!
//! Each input is one request as the receiver sees it: the three headers it reads and the
//! raw body. It goes through the front door (`receiver::admit`: signature over the raw
//! body, then the body's shape) and, when admitted, through the whole judging pipeline
//! (normalize, route, guards, existence check, control decision) against an empty state
//! root, ending in `RecordDecision`. Half the inputs carry a correct signature over their
//! body, so the fuzzer reaches past the HMAC check. Nothing may panic.

use std::sync::{Arc, LazyLock, Mutex};

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use hmac::{Hmac, Mac};
use jiff::Timestamp;
use loop_core::route::KnownExistence;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::live_config::{Hosted, LiveConfig};
use loop_daemon::receiver::intake::Intake;
use loop_daemon::receiver::{DeliveryHeaders, RecordDecision, Secret, admit};
use loop_store::inbox::Journalled;
use loop_store::{EventLog, StateLayout, StateStore};
use sha2::Sha256;

const SECRET: &str = "fuzz-secret";

#[derive(Debug, Arbitrary)]
struct Request<'a> {
    event: Option<&'a str>,
    delivery: Option<&'a str>,
    signature: Option<&'a str>,
    /// Replace `signature` with the correct one for `body`.
    sign: bool,
    body: &'a [u8],
}

struct Site {
    /// Keeps the state root and config file alive for the whole run.
    _dir: tempfile::TempDir,
    pipeline: Intake,
    secret: Secret,
    seq: u64,
}

static SITE: LazyLock<Mutex<Site>> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("a temp dir for the fuzz run");
    let root = dir.path().join("state");
    let config_path = dir.path().join("cli-config.yaml");
    std::fs::write(
        &config_path,
        format!(
            "state:\n  root: {}\nrepositories: [octo/app, other/lib]\nrouting:\n  authorizedUsers: [octocat, hubot]\n",
            root.display()
        ),
    )
    .expect("the fuzz config");
    let (source, _) = ConfigSource::open(&config_path).expect("the fuzz config loads");
    let hosted = Hosted { receiver: true, unsigned: false, poller: false };
    let config = LiveConfig::new(source, EventLog::disabled(), hosted);
    let store = StateStore::new(StateLayout::new(&root), EventLog::disabled());
    let pipeline = Intake::new(
        config,
        store,
        EventLog::disabled(),
        Arc::new(RecordDecision::new(EventLog::disabled())),
        Arc::new(KnownExistence::default()),
    );
    let secret = Secret::from_value(Some(SECRET)).expect("a non-empty secret");
    Mutex::new(Site { _dir: dir, pipeline, secret, seq: 0 })
});

fn sign(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).expect("any key length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    format!("sha256={}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// One input: a request built from `data` as libFuzzer's typed targets build it.
pub fn run(data: &[u8]) {
    let Ok(request) = Request::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let mut site = SITE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let signed = request.sign.then(|| sign(request.body));
    let headers = DeliveryHeaders {
        event: request.event,
        delivery: request.delivery,
        signature: signed.as_deref().or(request.signature),
    };
    let body = Bytes::copy_from_slice(request.body);
    let Ok(receipt) = admit(Some(&site.secret), headers, body, Timestamp::UNIX_EPOCH) else {
        return;
    };
    site.seq += 1;
    let item = Journalled { seq: site.seq, receipt };
    site.pipeline.process(&item);
}
