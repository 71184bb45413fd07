//! libFuzzer's entry into the `state_files` harness (`loop_fuzz::state_files`, where the input's
//! path and what must hold are described).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loop_fuzz::state_files::run(data));
