//! `relay-host`: see the relay-token crate. (Under construction.)
fn main() {
    eprintln!("usage: relay-host (not yet implemented)");
    std::process::exit(70);
}
