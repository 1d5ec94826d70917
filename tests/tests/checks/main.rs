//! The checks that read the source and the docs and run nothing: the module graph and its
//! length rules (`module_graph`), that the docs name real tests and match the code
//! (`features_doc`), and that no test hides in a program or example (`test_targets`). Run: `cargo test -p relay-tests --test checks`.

mod features_doc;
mod module_graph;
mod test_targets;
