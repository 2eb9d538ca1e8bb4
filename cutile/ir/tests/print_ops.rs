//! Hand-built modules printed by `print_module`, compared (after `normalize`) with what tileirdisasm 13.5
//! printed for the same modules (`tests/print_data/*.mlir`, disassembled from the `.tilebc` next to them).
//! These need neither the bytecode reader nor the toolchain.

mod print_common;

use cutile_ir::Module;
use cutile_ir::print::print_module;

fn oracle(name: &str) -> String {
    let path = format!(
        "{}/tests/print_data/{name}.mlir",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn assert_matches_oracle(module: &Module, name: &str) {
    print_common::assert_same_text(name, &print_module(module), &oracle(name));
}

#[test]
fn arithmetic_ops_match_tileirdisasm() {
    assert_matches_oracle(&print_common::arith_module(), "arith");
}

#[test]
fn control_flow_ops_match_tileirdisasm() {
    assert_matches_oracle(&print_common::control_flow_module(), "control_flow");
}
