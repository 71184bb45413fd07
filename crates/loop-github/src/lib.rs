//! The GitHub REST/GraphQL client and webhook signature verification.
//!
//! Filled by the GitHub-client issue.
