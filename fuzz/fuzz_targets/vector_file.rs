//! Any bytes as the text of a case file (`vectors/cases/*.json`, or a file
//! given with `--vectors`): the loader refuses or accepts it without
//! panicking, and what the runner computes from an accepted case without a
//! device (cited requirements, templates, assertions) never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    cetp_fuzz::exercise_vector_text(text);
});
