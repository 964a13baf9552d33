//! Any line a peer may send: decoding never panics, and whatever decodes
//! re-encodes to one line that decodes to the same frame.
#![no_main]

use cetp_wire::{decode_frame, encode_frame, Frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = decode_frame(data) {
        if let Frame::Request(r) = &frame {
            let _ = r.decode_op();
        }
        let line = encode_frame(&frame);
        assert_eq!(decode_frame(&line).as_ref(), Ok(&frame));
    }
});
