//! Malformed input never panics: byte flips and truncations of the samples go through the container reader,
//! the classifier and the whole inspect path (which includes the cutile-ir bytecode reader).

mod common;

use proptest::prelude::*;
use tilelib_tools::{container, inspect, kind};

const SAMPLES: [&str; 3] = ["lib1.tilelib", "lib2.tilelib", "tilelib_interface.tilebc"];

fn mutate(sample: &[u8], flips: &[(usize, u8)], keep: Option<usize>) -> Vec<u8> {
    let mut bytes = sample.to_vec();
    for &(at, xor) in flips {
        let n = bytes.len();
        bytes[at % n] ^= xor;
    }
    if let Some(k) = keep {
        bytes.truncate(k % (bytes.len() + 1));
    }
    bytes
}

fn exercise(bytes: &[u8]) {
    let _ = kind::classify(bytes);
    let _ = container::other_sections(bytes);
    if let Ok(lib) = container::read(bytes) {
        for f in &lib.implementations {
            let _ = kind::classify(f);
        }
        // Whatever reads must write back to something that reads the same.
        let again = container::write(&lib).expect("a read library can be written");
        assert_eq!(container::read(&again).expect("written library reads"), lib);
    }
    if let Ok(report) = inspect::inspect(bytes) {
        let _ = report.to_json();
        let _ = report.to_string();
        let _ = tilelib_tools::declare::declare(&report.interface, "fuzz");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn flipped_and_truncated_samples_never_panic(
        which in 0..SAMPLES.len(),
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 0..6),
        keep in prop::option::of(any::<usize>()),
    ) {
        let sample = common::read(SAMPLES[which]);
        exercise(&mutate(&sample, &flips, keep));
    }

    /// Flips confined to the ELF header and section table, where the container reader does its work.
    #[test]
    fn header_and_section_table_flips_never_panic(
        which in 0..2usize,
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
        in_table in any::<bool>(),
    ) {
        let sample = common::read(SAMPLES[which]);
        let shoff = u64::from_le_bytes(sample[0x28..0x30].try_into().expect("8 bytes")) as usize;
        let (start, len) = if in_table { (shoff, sample.len() - shoff) } else { (0, 64) };
        let flips: Vec<(usize, u8)> = flips.iter().map(|&(at, x)| (start + at % len, x)).collect();
        exercise(&mutate(&sample, &flips, None));
    }
}

#[test]
fn every_truncation_of_the_samples_is_handled() {
    for name in SAMPLES {
        let sample = common::read(name);
        for keep in 0..sample.len().min(2048) {
            exercise(&sample[..keep]);
        }
    }
}
