//! The library embeds vectors/ and profiles/ (src/embedded.rs): rebuild it
//! when they change.
fn main() {
    println!("cargo:rerun-if-changed=../../vectors");
    println!("cargo:rerun-if-changed=../../profiles");
}
