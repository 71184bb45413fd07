//! Every committed fuzz input — `fuzz/seeds/<target>/` (hand-written) and
//! `fuzz/regressions/<target>/` (inputs that once crashed, kept after their fix) — run
//! through its harness: a regression input that panics again fails `cargo test`.

use std::path::{Path, PathBuf};

use loop_fuzz::TARGETS;

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut inputs: Vec<PathBuf> = ["seeds", "regressions"]
        .iter()
        .filter_map(|kind| std::fs::read_dir(fuzz.join(kind).join(target)).ok())
        .flatten()
        .map(|entry| entry.expect("a readable fuzz input directory").path())
        .filter(|path| path.is_file())
        .collect();
    inputs.sort();
    inputs
}

#[test]
fn every_committed_fuzz_input_passes_its_harness() {
    let mut replayed = 0;
    for target in TARGETS {
        for input in inputs(target.name) {
            let data = std::fs::read(&input).expect("a readable fuzz input");
            let outcome = std::panic::catch_unwind(|| (target.run)(&data));
            assert!(outcome.is_ok(), "`{}` panics on {}", target.name, input.display());
            replayed += 1;
        }
    }
    assert!(replayed >= 20, "only {replayed} committed inputs found under fuzz/");
}
