//! libFuzzer's entry into the `webhook_delivery` harness (`loop_fuzz::webhook_delivery`, where the input's
//! path and what must hold are described).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loop_fuzz::webhook_delivery::run(data));
