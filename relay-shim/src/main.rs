//! `relay-shim`: see the relay-token crate. (Under construction.)
fn main() {
    eprintln!("usage: relay-shim (not yet implemented)");
    std::process::exit(70);
}
