//! Any frame a device may send back for a `call`: the typed Bundle decodes
//! (or is refused) and the CETP envelope decoder never panics on it.
#![no_main]

use cetp_proto::envelope::{Response, V1Response};
use cetp_wire::{bundle_from_json, decode_frame, Frame, Json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Frame::Final(cetp_wire::Final::Ok { ok, .. })) = decode_frame(data) else {
        return;
    };
    let Some(result) = ok.get("result") else {
        return;
    };
    if let Json::Object(_) = result {
        if let Ok(bundle) = bundle_from_json(result, &cetp_wire::Path::ROOT) {
            let _ = Response::from_bundle(&bundle);
            let _ = V1Response::from_bundle(&bundle);
        }
    }
});
