//! Webhook deliveries from the simulated GitHub: payloads in GitHub's shapes, signed
//! with HMAC-SHA256 and POSTed with GitHub's headers to the configured receiver.
//!
//! The signature is computed here independently of the receiver's verifier (loop-github),
//! so the receiver is tested by a peer. Deliveries are sent in the order the changes
//! happened, one at a time, and every attempt is recorded with its answer.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::shapes::{self, Urls};
use crate::world::{Happening, HappeningDetail, World, WorldError};

/// Where deliveries go. Without a secret they are sent unsigned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookTarget {
    pub url: String,
    #[serde(default)]
    pub secret: Option<String>,
}

/// One delivery and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// `X-GitHub-Delivery`.
    pub id: String,
    /// `X-GitHub-Event`.
    pub event: String,
    pub action: String,
    /// The exact bytes POSTed (and signed).
    pub body: String,
    /// `X-Hub-Signature-256`, when a secret is configured.
    pub signature: Option<String>,
    /// The receiver's HTTP status, once answered.
    pub status: Option<u16>,
    /// Why it could not be delivered, if so.
    pub error: Option<String>,
}

/// `sha256=<hex HMAC-SHA256 of body under secret>`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length, so `new_from_slice` cannot fail here.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC-SHA256 accepts keys of any length"),
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A delivery id shaped like GitHub's (a UUID), unique within this simulator.
pub fn delivery_id(sequence: u64) -> String {
    format!("5e1f0000-0000-4000-8000-{sequence:012x}")
}

/// The payload GitHub sends for `happening`, built from the world as it is now.
pub fn payload(world: &World, urls: &Urls, happening: &Happening) -> Result<Value, WorldError> {
    let repo = world.repo(&happening.repo)?;
    if let HappeningDetail::WorkflowRun(id) = &happening.detail {
        let run = world.run(&happening.repo, *id)?;
        return Ok(json!({
            "action": happening.action,
            "repository": shapes::repository(world, urls, repo),
            "sender": shapes::user(world, urls, &happening.sender),
            "workflow": shapes::workflow(urls, repo, run),
            "workflow_run": shapes::workflow_run(world, urls, repo, run),
        }));
    }
    let item = world.item(&happening.repo, happening.number)?;
    let mut payload = json!({
        "action": happening.action,
        "repository": shapes::repository(world, urls, repo),
        "sender": shapes::user(world, urls, &happening.sender),
    });
    let head_sha = item.pull.as_ref().map(|p| p.head_sha.clone()).unwrap_or_default();
    match happening.event {
        "pull_request" | "pull_request_review" | "pull_request_review_comment" => {
            let pr = shapes::pull_request(world, urls, repo, item).ok_or_else(|| {
                WorldError::NotPullRequest { repo: happening.repo.clone(), number: item.number }
            })?;
            payload["pull_request"] = pr;
            if happening.event == "pull_request" {
                payload["number"] = json!(item.number);
            }
        }
        _ => payload["issue"] = shapes::issue(world, urls, repo, item),
    }
    match &happening.detail {
        HappeningDetail::None | HappeningDetail::WorkflowRun(_) => {}
        HappeningDetail::Label(name) => payload["label"] = shapes::label(repo, urls, name),
        HappeningDetail::Comment(id) => {
            let (number, comment) = world.comment(&happening.repo, *id)?;
            payload["comment"] = shapes::issue_comment(world, urls, repo, number, comment);
        }
        HappeningDetail::Review(id) => {
            let review =
                item.pull.iter().flat_map(|p| p.reviews.iter()).find(|r| r.id == *id).ok_or_else(
                    || WorldError::NoComment { repo: happening.repo.clone(), id: *id },
                )?;
            payload["review"] = shapes::review(world, urls, repo, item.number, review, &head_sha);
        }
        HappeningDetail::ReviewComment(id) => {
            let (number, comment) = world.review_comment(&happening.repo, *id)?;
            payload["comment"] =
                shapes::review_comment(world, urls, repo, number, comment, &head_sha);
        }
    }
    Ok(payload)
}

/// POSTs one delivery; returns the receiver's status or why it failed.
pub(crate) async fn send(
    http: &reqwest::Client,
    target: &WebhookTarget,
    delivery: &Delivery,
) -> Result<u16, String> {
    let mut request = http
        .post(&target.url)
        .header("Content-Type", "application/json")
        .header("User-Agent", "GitHub-Hookshot/loop-sim")
        .header("X-GitHub-Event", &delivery.event)
        .header("X-GitHub-Delivery", &delivery.id)
        .header("X-GitHub-Hook-ID", "1")
        .header("X-GitHub-Hook-Installation-Target-Type", "repository")
        .header("X-GitHub-Hook-Installation-Target-ID", "1")
        .body(delivery.body.clone());
    if let Some(signature) = &delivery.signature {
        request = request.header("X-Hub-Signature-256", signature);
    }
    match request.send().await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(err) => {
            Err(if err.is_connect() { "could not connect".to_owned() } else { err.to_string() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_githubs_documented_example() {
        assert_eq!(
            sign(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }
}
