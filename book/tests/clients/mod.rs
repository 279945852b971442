//! What the two client checks (`kubectl_both`, `python_client_both`) share: the kubeconfig of
//! the embedded server, the check that every step's named difference is in the conformance
//! suite's table, and the check that the appendix on the embedded server states a step count.

use std::path::{Path, PathBuf};

use controlloop_book::lab::real_server::conformance::KNOWN;

/// Writes a kubeconfig for the embedded server at `url` (plain HTTP, no credentials) into
/// `dir` and returns its path.
pub fn embedded_kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let config = dir.join("embedded.kubeconfig");
    std::fs::write(
        &config,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e\n  cluster:\n    server: {url}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: e\n  context:\n    cluster: e\n    \
             user: u\ncurrent-context: e\n"
        ),
    )
    .expect("writing the embedded server's kubeconfig");
    config
}

/// Panics if a step names a difference that is not in `differences::KNOWN`.
pub fn every_named_difference_is_known<'a>(names: impl IntoIterator<Item = &'a str>) {
    for name in names {
        assert!(
            KNOWN.iter().any(|d| d.what == name),
            "a step names {name:?}, which is not in differences::KNOWN"
        );
    }
}

/// Panics unless the appendix on the embedded server says `said` (whitespace folded).
pub fn the_appendix_says(said: &str) {
    let page = std::fs::read_to_string(
        controlloop_book::repo().join("chapters/97-the-embedded-server.md"),
    )
    .expect("reading the appendix");
    let folded = page.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(folded.contains(said), "the appendix does not say {said:?}");
}

/// Where the two servers' answers to one step and the step's table entry disagree: the servers
/// answer alike on a step that names a known difference, or differently on one that names none.
/// The message names the step, both answers and whether it names one.
pub fn disagreement<C: std::fmt::Display + PartialEq>(
    label: &str,
    names_a_difference: bool,
    server: &str,
    embedded: (C, &str),
    theirs: (C, &str),
) -> Option<String> {
    let same = embedded.0 == theirs.0 && embedded.1 == theirs.1;
    (same == names_a_difference).then(|| {
        format!(
            "{label}: embedded {} {:?}, {server} {} {:?}, and the step names {} known difference",
            embedded.0,
            embedded.1,
            theirs.0,
            theirs.1,
            if names_a_difference { "a" } else { "no" }
        )
    })
}
