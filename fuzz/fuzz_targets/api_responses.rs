//! libFuzzer's entry into the `api_responses` harness (`loop_fuzz::api_responses`, where the input's
//! path and what must hold are described).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loop_fuzz::api_responses::run(data));
