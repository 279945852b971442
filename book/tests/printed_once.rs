//! The book prints each function once. A chapter's Rust block is compiled on its own, so a
//! function two blocks need is written into both, and all but one copy must be hidden (rustdoc's
//! `# ` prefix): a reader who meets the same function twice, or its two halves in two blocks,
//! reads code that carries nothing new. A later chapter that needs an earlier one's code links
//! to it instead of reprinting it.
//!
//! This test finds every `fn` written in a chapter's Rust block (hidden lines included), and
//! fails when two blocks of the book, in one chapter or in two, show the same line of the same
//! function: the same name and the same text, compared with indentation and hidden-line
//! prefixes removed. A long function may be shown in two parts with prose between, the second
//! block hiding the lines the first one showed.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// One function written in a chapter block.
#[derive(Debug)]
struct Written {
    /// Where it is: `chapter:line` of its `fn` line.
    at: String,
    /// The block it is in: `chapter:fence line`.
    block: String,
    /// Its name.
    name: String,
    /// Its text, each line trimmed, hidden-line prefixes removed.
    text: String,
    /// Which of its non-blank lines the reader sees, counted from its `fn` line.
    shown: Vec<usize>,
}

/// A block's line with rustdoc's hidden prefix removed, and whether it was hidden.
fn unhide(line: &str) -> (&str, bool) {
    let trimmed = line.trim_start();
    if trimmed == "#" {
        ("", true)
    } else if let Some(rest) = trimmed.strip_prefix("# ") {
        (rest.trim_start(), true)
    } else {
        (trimmed, false)
    }
}

/// The name of the function `line` (unhidden, trimmed) starts to define, if it does.
fn defines(line: &str) -> Option<&str> {
    let mut words = line;
    for prefix in [
        "pub(crate) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        words = words.strip_prefix(prefix).unwrap_or(words);
    }
    let rest = words.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    (end > 0).then(|| &rest[..end])
}

/// `{` minus `}` on `line`, outside string and character literals.
fn depth_change(line: &str) -> i64 {
    let (mut depth, mut chars) = (0, line.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A character literal ('{', '\''), or a lifetime ('a), which has no closing quote.
                let ahead: String = chars.clone().take(3).collect();
                if let Some(escaped) = ahead.strip_prefix('\\') {
                    let close = escaped.find('\'').map_or(0, |i| i + 2);
                    for _ in 0..close {
                        chars.next();
                    }
                } else if ahead.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// Every function written in the Rust blocks of `text` (the chapter `chapter`).
fn written(chapter: &str, text: &str) -> Vec<Written> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(tag) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let fence = i + 1;
        let end = (i + 1..lines.len())
            .find(|&j| lines[j].trim_start().starts_with("```"))
            .unwrap_or(lines.len());
        if tag.trim().starts_with("rust") {
            let block = &lines[i + 1..end];
            for (k, line) in block.iter().enumerate() {
                let (code, _) = unhide(line);
                let Some(name) = defines(code) else { continue };
                let (mut depth, mut opened, mut body, mut shown) = (0, false, Vec::new(), vec![]);
                for (n, line) in block[k..].iter().enumerate() {
                    let (code, hidden) = unhide(line);
                    body.push(code);
                    if !hidden && !code.is_empty() {
                        shown.push(n);
                    }
                    let change = depth_change(code);
                    opened |= code.contains('{');
                    depth += change;
                    if (opened && depth <= 0) || (!opened && code.ends_with(';')) {
                        break;
                    }
                }
                out.push(Written {
                    at: format!("{chapter}:{}", i + 2 + k),
                    block: format!("{chapter}:{fence}"),
                    name: name.to_string(),
                    text: body.join("\n"),
                    shown,
                });
            }
        }
        i = end + 1;
    }
    out
}

/// One message per function that two blocks show, naming every place it is shown.
fn printed_twice(chapters: &[(String, String)]) -> Vec<String> {
    let mut shown: BTreeMap<(String, String), Vec<Written>> = BTreeMap::new();
    for (chapter, text) in chapters {
        for w in written(chapter, text)
            .into_iter()
            .filter(|w| !w.shown.is_empty())
        {
            shown
                .entry((w.name.clone(), w.text.clone()))
                .or_default()
                .push(w);
        }
    }
    shown
        .into_values()
        .filter_map(|ws| {
            let twice = ws.iter().enumerate().any(|(i, a)| {
                ws[i + 1..]
                    .iter()
                    .any(|b| b.block != a.block && a.shown.iter().any(|n| b.shown.contains(n)))
            });
            let places: Vec<String> = ws
                .iter()
                .map(|w| format!("{} ({} lines shown)", w.at, w.shown.len()))
                .collect();
            twice.then(|| {
                format!(
                    "`fn {}` has lines shown in {} blocks: {} (show each line once: hide the \
                     other copy with `# `, or link to the block that shows it)",
                    ws[0].name,
                    ws.len(),
                    places.join(", ")
                )
            })
        })
        .collect()
}

/// Every chapter, as (file name, text).
fn chapters() -> Vec<(String, String)> {
    let dir = Path::new(ROOT).join("chapters");
    let mut out: Vec<(String, String)> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| p.file_name().unwrap() != "SUMMARY.md")
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn no_function_is_shown_in_two_blocks() {
    let problems = printed_twice(&chapters());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const HALVES: &str = "\
```rust
fn timeline(n: u32) -> u32 {
    let twice = n * 2;
#     let more = twice + 1;
#     more
# }
```

```rust
fn timeline(n: u32) -> u32 {
#     let twice = n * 2;
    let more = twice + 1;
    more
}
```
";

/// [`HALVES`] as it should be: the second block hides the line the first one showed.
const SPLIT: &str = "\
```rust
fn timeline(n: u32) -> u32 {
    let twice = n * 2;
#     let more = twice + 1;
#     more
# }
```

```rust
# fn timeline(n: u32) -> u32 {
#     let twice = n * 2;
    let more = twice + 1;
    more
}
```
";

const HIDDEN_COPY: &str = "\
```rust
fn cost(n: u32) -> u32 {
    n + 1
}
```

```rust
# fn cost(n: u32) -> u32 {
#     n + 1
# }
assert_eq!(cost(1), 2);
```
";

const REPRINT: &str = "\
```rust
fn cost(n: u32) -> u32 {
    n + 1
}
```
";

/// The check fires on one function shown in two overlapping halves in two blocks of a chapter,
/// and on a function a second chapter reprints; it passes a function split without overlap, a
/// copy hidden whole, and two functions that share a name but not their text.
#[test]
fn the_check_fires_on_halves_and_on_a_reprint_and_passes_a_hidden_copy() {
    let one = |name: &str, text: &str| vec![(name.to_string(), text.to_string())];
    let halves = printed_twice(&one("01-a.md", HALVES));
    assert_eq!(halves.len(), 1, "{halves:?}");
    assert!(halves[0].contains("`fn timeline` has lines shown in 2 blocks: 01-a.md:2 (2 lines shown), 01-a.md:10 (4 lines shown)"), "{halves:?}");

    assert_eq!(printed_twice(&one("01-a.md", SPLIT)), Vec::<String>::new());
    assert_eq!(
        printed_twice(&one("01-a.md", HIDDEN_COPY)),
        Vec::<String>::new()
    );

    let both = [one("01-a.md", HIDDEN_COPY), one("02-b.md", REPRINT)].concat();
    let reprint = printed_twice(&both);
    assert_eq!(reprint.len(), 1, "{reprint:?}");
    assert!(
        reprint[0].contains("01-a.md:2") && reprint[0].contains("02-b.md:2"),
        "{reprint:?}"
    );

    let renamed = [
        one("01-a.md", HIDDEN_COPY),
        one("02-b.md", &REPRINT.replace("n + 1", "n + 2")),
    ]
    .concat();
    assert_eq!(printed_twice(&renamed), Vec::<String>::new());
}

/// Braces inside strings, character literals and comments do not end a function early.
#[test]
fn braces_in_strings_and_characters_are_not_counted() {
    assert_eq!(depth_change(r#"let s = format!("{x} {{");"#), 0);
    assert_eq!(depth_change("if c == '{' {"), 1);
    assert_eq!(depth_change(r"let q = '\''; }"), -1);
    assert_eq!(depth_change("fn f<'a>(x: &'a str) { // }"), 1);
    assert_eq!(defines("pub async fn run_it(x: u8) {"), Some("run_it"));
    assert_eq!(defines("let f = 1;"), None);
}
