//! The shapes of the records the-loop keeps about work items, as values.
//!
//! These are the serde forms of what loop-store writes under `state.root` (SPEC §4, seed
//! 003): the sections of the portable work-item record ([`portable`]), the machine-local
//! session record with its endpoints ([`local`]) and the poll clocks ([`clocks`]). Pure
//! rules (control, the poll ledger, collaborators, closure) operate on these values;
//! loop-store only loads and stores them.
//!
//! Nothing here does IO or reads a clock: timestamps are passed in by the caller.
//!
//! JSON keys are camelCase, absent optionals are omitted, and refs and logins are written
//! as their canonical strings (`github:owner/repo#N`, `octocat`).

pub mod clocks;
pub mod local;
pub mod portable;

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::ser::{Serialize, Serializer};

use crate::login::Login;
use crate::refs::WorkItemRef;

pub use clocks::{PollClock, PollClocks};
pub use local::{AwaitingInput, Endpoint, EndpointStatus, LocalRecord, RECENT_DELIVERIES_CAP};
pub use portable::{
    ChannelBinding, Collaborator, Collaborators, CommentId, CommentLedger, Control, ControlSource,
    Ended, GaveUp, PollLedger, SpawnLedger,
};

/// Serializes a value through its `Display` and deserializes it through its `FromStr`, so
/// a ref or login in a file is validated exactly as one typed on the command line.
fn serialize_display<T: fmt::Display, S: Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

struct FromStrVisitor<T>(std::marker::PhantomData<T>, &'static str);

impl<T> Visitor<'_> for FromStrVisitor<T>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.1)
    }

    fn visit_str<E: de::Error>(self, input: &str) -> Result<T, E> {
        input.parse().map_err(E::custom)
    }
}

impl Serialize for WorkItemRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_display(self, serializer)
    }
}

impl<'de> Deserialize<'de> for WorkItemRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FromStrVisitor(
            std::marker::PhantomData,
            "a work-item ref `github:[host/]owner/repo#N`",
        ))
    }
}

impl Serialize for Login {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_display(self, serializer)
    }
}

impl<'de> Deserialize<'de> for Login {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(FromStrVisitor(std::marker::PhantomData, "a GitHub login"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_round_trips_as_its_canonical_string() {
        let item: WorkItemRef = "github:github.com/octo/app#7".parse().unwrap();
        let json = serde_json::to_string(&item).unwrap();
        assert_eq!(json, r#""github:octo/app#7""#);
        assert_eq!(serde_json::from_str::<WorkItemRef>(&json).unwrap(), item);
    }

    #[test]
    fn a_malformed_ref_in_a_file_is_a_parse_error_naming_it() {
        let err = serde_json::from_str::<WorkItemRef>(r#""octo/app#7""#).unwrap_err();
        assert!(err.to_string().contains("octo/app#7"), "{err}");
    }

    #[test]
    fn a_login_round_trips_and_a_bad_one_is_refused() {
        let login: Login = serde_json::from_str(r#""octocat""#).unwrap();
        assert_eq!(serde_json::to_string(&login).unwrap(), r#""octocat""#);
        assert!(serde_json::from_str::<Login>(r#""not a login""#).is_err());
    }
}
