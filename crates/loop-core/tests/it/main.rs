//! Integration tests of loop-core's front-door rules, one binary with a module per area.
//!
//! - `webhooks`: real payloads from `@octokit/webhooks-examples` route to the expected
//!   refs and render excerpts within the caps.
//! - `edge_cases`: the numbered edge cases of reference §9 that concern routing, guards,
//!   control and the excerpt, each a named test through the public pipeline.
//! - `properties`: nothing panics on arbitrary JSON or text; excerpts are always JSON
//!   within the cap.

mod edge_cases;
mod pipeline;
mod properties;
mod webhooks;
