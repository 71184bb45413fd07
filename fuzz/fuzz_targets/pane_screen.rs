//! libFuzzer's entry into the `pane_screen` harness (`loop_fuzz::pane_screen`, where the input's
//! path and what must hold are described).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| loop_fuzz::pane_screen::run(data));
