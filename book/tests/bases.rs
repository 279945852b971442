//! Every band the experiments check is the rule over its file of runs, and every file of runs
//! belongs to a band: a band cannot be retyped, and a run cannot be kept where no band reads it.

use std::{collections::BTreeSet, fs};

use controlloop_book::{
    kit::{
        band::{Band, Kind},
        basis::{BASES_DIR, Basis, PREFIX, Regime},
    },
    lab::bands::{all, checks},
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

/// The check fires on a band whose end was moved by hand, on a band given another kind, on a
/// band whose file is missing, and on a band whose basis is a sentence instead of a file.
#[test]
fn the_check_fires_on_a_retyped_band_a_changed_kind_a_missing_file_and_a_sentence() {
    let real = checks().into_iter().next().expect("a band");
    let runs = Basis::read(real.basis.strip_prefix(PREFIX).unwrap()).unwrap();
    let kind = real.kind.unwrap();
    let (lo, hi) = runs.derived(kind);
    let band = |lo: Option<f64>, hi: Option<f64>, kind: Kind| {
        let b = match kind {
            Kind::Law => Band::law(lo.unwrap(), hi.unwrap(), "c", real.basis),
            Kind::AtMost => Band::at_most(hi.unwrap(), "c", real.basis),
            Kind::AtLeast => Band::at_least(lo.unwrap(), "c", real.basis),
        };
        b.with_ends(lo, hi)
    };
    assert!(runs.holds("X", &band(lo, hi, kind)).is_ok());
    let widened = runs
        .holds("X", &band(lo, hi.map(|h| h * 1.5), kind))
        .unwrap_err();
    assert!(widened.starts_with("X is ["), "{widened}");
    assert!(
        widened.contains(&format!(
            "but the rule of its kind ({}) over {}",
            controlloop_book::kit::basis::rule(kind),
            real.basis
        )),
        "{widened}"
    );
    // The same runs under another kind's rule give other ends.
    let other = if kind == Kind::AtLeast {
        Kind::AtMost
    } else {
        Kind::AtLeast
    };
    let (olo, ohi) = runs.derived(other);
    assert!(
        runs.holds("X", &band(lo, hi, kind).with_ends(olo, ohi))
            .is_err()
    );

    let missing = Basis::of(&Band::law(1.0, 2.0, "c", "book/bases/no_such_band.tsv")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("book/bases/no_such_band.tsv: "),
        "{missing}"
    );
    let sentence = Basis::of(&Band::law(1.0, 2.0, "c", "40 runs: 11..=46 µs")).unwrap_err();
    assert_eq!(
        sentence.to_string(),
        "the band's basis \"40 runs: 11..=46 µs\" names no file under book/bases/"
    );
}

/// Every band the embedded server's experiments check has runs measured quiet, loaded and on
/// one core: a band is derived from the regimes a reader's machine can be in. (The real
/// control plane's bands are measured where a control plane runs; their files say which
/// regimes they hold.)
#[test]
fn every_embedded_band_has_runs_in_every_regime() {
    let mut missing = Vec::new();
    for b in all() {
        if b.basis.contains("/real_server_")
            || b.basis.contains("/real_cpu_")
            || b.basis.contains("/real_lease_")
            || b.basis.contains("/embedded_")
        {
            continue; // the real tier's
        }
        // Chapter 18's share heard during a reconcile is a claim about two CPUs: its one-core
        // runs are a figure of their own, shown and not checked.
        let regimes: &[Regime] = match b.name {
            "CPU_HEARD_DURING_RECONCILE" => &[Regime::Quiet, Regime::Loaded],
            "CPU_HEARD_DURING_RECONCILE_ONE_CORE" => &[Regime::OneCore],
            _ => &[Regime::Quiet, Regime::Loaded, Regime::OneCore],
        };
        for &regime in regimes {
            if !b.regimes.iter().any(|r| r.regime == regime) {
                missing.push(format!("{}: no {regime} runs", b.name));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// A same-run law is at most 2× wide, or it is one of the few chapter 10 names with its reason.
#[test]
fn every_law_is_at_most_two_wide_or_named_in_chapter_10() {
    let chapter = fs::read_to_string(format!(
        "{}/../chapters/10-what-varies.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for b in checks().iter().filter(|b| b.kind == Some(Kind::Law)) {
        let width = b.width().expect("a law has two positive ends");
        assert!(
            // 2× before its ends are rounded outward to 0.001
            width <= 2.01 || chapter.contains(&format!("`{}`, ", b.name)),
            "{} is {width:.2}× wide and chapter 10 does not say why",
            b.name
        );
    }
}

/// The Rust blocks of a chapter's `text`, each as one string, hidden lines included (rustdoc
/// compiles them).
fn rust_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut open: Option<(bool, String)> = None; // (rust?, lines)
    for line in text.lines() {
        if let Some(tag) = line.trim_start().strip_prefix("```") {
            match open.take() {
                Some((true, block)) => blocks.push(block),
                Some((false, _)) => {}
                None => open = Some((tag.trim() == "rust", String::new())),
            }
        } else if let Some((_, block)) = &mut open {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// Whether `word` occurs in `text` with no identifier character on either side.
fn names(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word)
        .any(|(at, _)| !text[..at].ends_with(ident) && !text[at + word.len()..].starts_with(ident))
}

/// The bands of `bands` (name, chapter) that no Rust block of their chapter shows firing.
/// A block shows a band firing when it names the band and calls [`Band::fires`], or catches
/// the panic of its `check` (the introduction's form, which shows what a failing check prints).
fn not_shown_firing(bands: &[(&str, &str)], chapter_text: impl Fn(&str) -> String) -> Vec<String> {
    bands
        .iter()
        .filter(|(name, chapter)| {
            !rust_blocks(&chapter_text(chapter)).iter().any(|block| {
                names(block, name)
                    && (block.contains("fires(")
                        || (block.contains("catch_unwind(") && block.contains(".check(")))
            })
        })
        .map(|(name, chapter)| format!("{name} is never shown firing in {chapter}"))
        .collect()
}

/// Every band the experiments pin is shown, in its own chapter, rejecting a broken variant's
/// run: a band that has never failed may accept anything.
#[test]
fn every_band_is_shown_firing_in_its_chapter() {
    let bands: Vec<(&str, &str)> = checks().iter().map(|b| (b.name, b.chapter)).collect();
    assert!(bands.len() >= 20, "{} bands", bands.len());
    let read = |chapter: &str| {
        fs::read_to_string(format!(
            "{}/../chapters/{chapter}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let missing = not_shown_firing(&bands, read);
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The check fires on a band that is only checked, on one fired in prose or a text block, and
/// on a longer name's firing (`A_B` is not `A`).
#[test]
fn the_firing_check_fires_on_a_band_only_checked_or_fired_outside_rust() {
    let chapter = |_: &str| {
        "We check `A` and fire it in prose: A.fires(x).\n\n\
         ```rust\nA.check(\"a\", 1);\n```\n\n\
         ```text\nA.fires(\"a\", 9)\n```\n\n\
         ```rust\nA_B.fires(\"b\", 9);\n```\n\n\
         ```rust\nlet m = std::panic::catch_unwind(|| C.check(\"c\", 9));\n```\n"
            .to_owned()
    };
    let bands = [("A", "x.md"), ("A_B", "x.md"), ("C", "x.md")];
    assert_eq!(
        not_shown_firing(&bands, chapter),
        ["A is never shown firing in x.md"]
    );
}
