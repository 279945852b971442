//! Every band the experiments check is the rule over its file of runs, and every file of runs
//! belongs to a band: a band cannot be retyped, and a run cannot be kept where no band reads it.

use std::{collections::BTreeSet, fs};

use controlloop_book::{
    kit::{
        band::Band,
        basis::{BASES_DIR, Basis, PREFIX},
    },
    lab::bands::all,
};

#[test]
fn every_band_is_the_rule_over_its_file() {
    let problems: Vec<String> = all()
        .into_iter()
        .filter_map(|b| b.rule.err().or(b.runs.err()))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A band's file is named after it, lower case, so the table, the file and the constant read
/// alike; and no file lies in `book/bases/` that no band reads.
#[test]
fn every_file_is_one_bands_and_named_after_it() {
    let mut named = BTreeSet::new();
    for b in all() {
        let file = format!("{PREFIX}{}.tsv", b.name.to_lowercase());
        assert_eq!(b.basis, file, "{}'s basis", b.name);
        assert!(named.insert(file), "two bands named {}", b.name);
    }
    for entry in fs::read_dir(BASES_DIR).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let file = format!("{PREFIX}{name}");
        assert!(named.contains(&file), "{file} is read by no band");
    }
}

/// The check fires on a band whose end was moved by hand, on a band whose file is missing, and
/// on a band whose basis is a sentence instead of a file.
#[test]
fn the_check_fires_on_a_retyped_band_a_missing_file_and_a_sentence() {
    let real = all().into_iter().next().expect("a band");
    let runs = Basis::read(real.basis.strip_prefix(PREFIX).unwrap()).unwrap();
    let (lo, hi) = runs.derived();
    assert!(runs.holds("X", &Band::new(lo, hi, real.basis)).is_ok());
    let widened = runs
        .holds("X", &Band::new(lo, hi * 1.5, real.basis))
        .unwrap_err();
    assert!(widened.starts_with("X is ["), "{widened}");
    assert!(
        widened.contains(&format!("but the rule over {}", real.basis)),
        "{widened}"
    );

    let missing = Basis::of(&Band::new(1.0, 2.0, "book/bases/no_such_band.tsv")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("book/bases/no_such_band.tsv: "),
        "{missing}"
    );
    let sentence = Basis::of(&Band::new(1.0, 2.0, "40 runs: 11..=46 µs")).unwrap_err();
    assert_eq!(
        sentence.to_string(),
        "the band's basis \"40 runs: 11..=46 µs\" names no file under book/bases/"
    );
}
