//! Prints the requirements the coverage report counts as gaps (observable
//! from outside, yet enforced by no case or check): a development aid for
//! choosing the next vectors.
//!
//! `cargo run -p cetp-conformance --example gaps`

use cetp_profile::coverage::*;
use cetp_vectors::suite::*;
fn main() {
    let dir = default_vectors_dir();
    let suite = Suite::load(&dir).unwrap();
    let cat = cetp_proto::catalog::Catalog::from_json(
        &std::fs::read_to_string(dir.join("requirements/catalog.json")).unwrap(),
    )
    .unwrap();
    let ex = load_exemptions(&dir.join("coverage/exemptions.json")).unwrap();
    let rows = rows(&cat, &suite, &Default::default(), &ex);
    for r in &rows {
        if r.status == Status::Gap {
            println!("{} {} {} | {}", r.id, r.level, r.side, r.summary);
        }
    }
}
