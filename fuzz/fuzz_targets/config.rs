//! libFuzzer's entry into the `config` harness (`loop_fuzz::config`, where the input's
//! path and what must hold are described).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loop_fuzz::config::run(data));
