//! Integration tests of loop-core's front-door rules, one binary with a module per area.
//!
//! - `webhooks`: real payloads from `@octokit/webhooks-examples` route to the expected
//!   refs and render excerpts within the caps.
//! - `edge_cases`: the numbered edge cases of reference §9 that concern routing, guards,
//!   control and the excerpt, each a named test through the production plan (`front`).
//! - `plan_order`: the order of the plan's steps where the order is the contract.
//! - `properties`: nothing panics on arbitrary JSON or text; excerpts are always JSON
//!   within the cap.

mod edge_cases;
mod front;
mod plan_order;
mod properties;
mod webhooks;
