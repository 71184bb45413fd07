//! Integration tests of the simulated GitHub.
