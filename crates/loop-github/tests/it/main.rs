//! Integration tests of loop-github against the simulated GitHub.
