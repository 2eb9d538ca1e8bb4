//! The printer against tileirdisasm through the bytecode reader and writer:
//! - every reference sample and `tests/print_data` file, read with `read_module` and printed, equals the
//!   tileirdisasm text stored next to it (after `normalize`);
//! - the hand-built modules of `print_common`, written with `write_module` and disassembled live by
//!   tileirdisasm, print the same text as tileirdisasm shows (skipped, saying so, without the toolchain).

mod print_common;

use cutile_ir::V13_5;
use cutile_ir::bytecode::{read_module, write_module};
use cutile_ir::print::print_module;
use print_common::{assert_same_text, disassemble, oracle_pairs, tileirdisasm};

#[test]
fn samples_print_like_tileirdisasm() {
    let pairs = oracle_pairs();
    // vadd/softmax/matmul × 5 versions, 4 preview files, 7 print_data files.
    assert!(pairs.len() >= 26, "only {} sample pairs found", pairs.len());
    for (bc, text) in pairs {
        let label = bc.display().to_string();
        let bytes = std::fs::read(&bc).unwrap_or_else(|e| panic!("{label}: {e}"));
        let want = std::fs::read_to_string(&text).unwrap_or_else(|e| panic!("{label}: {e}"));
        let module = read_module(&bytes).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_same_text(&label, &print_module(&module), &want);
    }
}

#[test]
fn hand_built_modules_print_like_tileirdisasm_of_their_bytecode() {
    let Some(tool) = tileirdisasm() else {
        cutile_testkit::skip(
            "hand_built_modules_print_like_tileirdisasm_of_their_bytecode",
            &cutile_testkit::tools::not_found("tileirdisasm"),
        );
        return;
    };
    let cases = [
        ("arith", print_common::arith_module()),
        ("control_flow", print_common::control_flow_module()),
        ("preview_const", print_common::preview_const_module()),
    ];
    for (name, module) in cases {
        let bytes = write_module(&module, V13_5).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = disassemble(&tool, name, &bytes, module.needs_preview())
            .unwrap_or_else(|e| panic!("{name}: tileirdisasm rejected our bytecode: {e}"));
        assert_same_text(name, &print_module(&module), &want);
    }
}
