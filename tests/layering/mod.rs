//! The layering checker both crates' `tests/layers.rs` run: a std-only reader of a crate's
//! sources that resolves every import to the file defining the name, then finds cycles between
//! files and between modules, and imports a house rule forbids.
//!
//! It reads the source, not the compiler's view, so it knows only what it can see in the text:
//!
//! - Modules come from `mod name;` (the file `name.rs` or `name/mod.rs` beside the parent) and
//!   `mod name { … }` (a module inside its file). A module marked `#[cfg(test)]` is skipped.
//! - An edge is a `use` (`crate::`, `super::`, `self::`, a child module, nested groups, renames,
//!   globs) or an inline path such as `super::reflector::copy_resource_version(…)`, resolved
//!   through re-exports (`pub use child::Name` in a parent) to the file that defines the name.
//!   A `pub use` whose name the file never uses itself only re-exports and is no edge of its own.
//! - A module cycle is one among the children of one module (`cache::store` ↔ `cache::reflector`),
//!   each child standing for all the files under it.
//!
//! Each failure names the files or modules of a cycle and the names that tie each edge.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module path inside the crate: `[]` is the crate root, `["cache", "reflector"]` is
/// `crate::cache::reflector`.
type ModPath = Vec<String>;

/// The crate's sources: a file's path relative to the source directory (`cache/store.rs`) and
/// its text.
pub type Sources = BTreeMap<String, String>;

/// Reads every `.rs` file under `dir`.
pub fn read_dir(dir: &Path) -> Sources {
    fn walk(base: &Path, dir: &Path, out: &mut Sources) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(base, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(base).expect("under the base");
                let rel = rel.to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("a readable source file");
                out.insert(rel, text);
            }
        }
    }
    let mut out = Sources::new();
    walk(dir, dir, &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

/// Splits Rust source into identifiers (`$crate` is one), `::` and single punctuation
/// characters, dropping comments, string and character literals, numbers and lifetimes.
fn tokenize(src: &str) -> Vec<String> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&c, i) {
            i = end;
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && next == Some('"')) {
            i += if ch == '"' { 1 } else { 2 };
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ch == '\'' || (ch == 'b' && next == Some('\'')) {
            let j = if ch == '\'' { i + 1 } else { i + 2 };
            if c.get(j) == Some(&'\\') {
                // A character literal with an escape: up to the closing quote.
                let mut k = j + 2;
                while k < c.len() && c[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if c.get(j + 1) == Some(&'\'') {
                i = j + 2;
            } else {
                // A lifetime or a label: drop the quote and its name.
                i = j;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch == 'r' && next == Some('#') && c.get(i + 2).is_some_and(|&x| ident_start(x)) {
            // A raw identifier.
            let start = i + 2;
            i = start;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if ident_start(ch) || (ch == '$' && next.is_some_and(ident_start)) {
            let start = i;
            i += 1;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if ch.is_ascii_digit() {
            while i < c.len()
                && (ident_char(c[i])
                    || (c[i] == '.' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit())))
            {
                i += 1;
            }
        } else if ch == ':' && next == Some(':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(ch.to_string());
            i += 1;
        }
    }
    out
}

/// If a raw (byte, C) string starts at `i`, the index just past it.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"' && (1..=hashes).all(|h| c.get(j + h) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(c.len())
}

/// The index of the token closing the bracket opened at `open`.
fn matching(t: &[String], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, tok) in t.iter().enumerate().skip(open) {
        match tok.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    t.len().saturating_sub(1)
}

/// The index of the `;` ending the item at `i`, or of the `}` closing its body when a `{`
/// comes first (outside parentheses and brackets).
fn item_end(t: &[String], i: usize, body_ends: bool) -> usize {
    let mut k = i;
    while k < t.len() {
        match t[k].as_str() {
            ";" => return k,
            "(" | "[" => k = matching(t, k),
            "{" => {
                let close = matching(t, k);
                if body_ends {
                    return close;
                }
                k = close;
            }
            _ => {}
        }
        k += 1;
    }
    t.len().saturating_sub(1)
}

// ---------------------------------------------------------------------------------------------
// Structure: modules, items, uses
// ---------------------------------------------------------------------------------------------

/// One imported name: `use a::b::{c as d}` is the path `[a, b, c]` under the alias `d`.
#[derive(Clone, Debug)]
struct Import {
    path: Vec<String>,
    /// `None` for a glob.
    alias: Option<String>,
    /// A `pub` or `pub(…)` use at module scope: a re-export.
    public: bool,
    /// The module whose names the path starts from.
    scope: ModPath,
    file: String,
}

#[derive(Default, Debug)]
struct Module {
    /// The file the module's own items are written in.
    file: String,
    children: BTreeSet<String>,
    /// Items defined here (functions, types, constants, macros).
    items: BTreeSet<String>,
    imports: Vec<Import>,
}

/// A crate read from its sources.
#[derive(Default, Debug)]
struct Crate {
    modules: BTreeMap<ModPath, Module>,
    /// Each file's tokens, with the module each token is in (`None`: skipped test code).
    tokens: BTreeMap<String, Vec<(String, Option<ModPath>)>>,
    /// Where each file's use statements are, so the path scan skips them.
    use_ranges: BTreeMap<String, Vec<(usize, usize)>>,
}

fn parse_crate(sources: &Sources, root: &str) -> Crate {
    let mut krate = Crate::default();
    let mut pending = vec![(Vec::<String>::new(), root.to_owned())];
    while let Some((path, file)) = pending.pop() {
        let Some(text) = sources.get(&file) else {
            continue;
        };
        let toks = tokenize(text);
        let mut scopes: Vec<Option<ModPath>> = vec![None; toks.len()];
        let mut children = Vec::new();
        let mut uses = Vec::new();
        parse_module(
            &mut krate,
            &toks,
            0,
            toks.len(),
            &path,
            &file,
            &mut scopes,
            &mut children,
            &mut uses,
        );
        // Uses inside bodies (`fn f() { use super::x::Y; … }`): imports of the module they are in.
        let mut k = 0;
        while k < toks.len() {
            let listed = uses.iter().any(|&(a, b)| a <= k && k <= b);
            if toks[k] == "use"
                && !listed
                && (k == 0 || toks[k - 1] != "::")
                && let Some(scope) = scopes[k].clone()
            {
                let close = item_end(&toks, k, false);
                let mut out = Vec::new();
                parse_use_tree(&toks[k + 1..close], &[], &mut out);
                let module = krate.modules.entry(scope.clone()).or_default();
                for (p, alias) in out {
                    module.imports.push(Import {
                        path: p,
                        alias,
                        public: false,
                        scope: scope.clone(),
                        file: file.clone(),
                    });
                }
                uses.push((k, close));
                k = close;
            }
            k += 1;
        }
        for (child_path, _) in &children {
            let dir = child_dir(&file, &path);
            let name = child_path.last().expect("a child has a name");
            let flat = format!("{dir}{name}.rs");
            let nested = format!("{dir}{name}/mod.rs");
            let child_file = if sources.contains_key(&flat) {
                flat
            } else {
                nested
            };
            pending.push((child_path.clone(), child_file));
        }
        krate
            .tokens
            .insert(file.clone(), toks.into_iter().zip(scopes).collect());
        krate.use_ranges.insert(file.clone(), uses);
    }
    krate
}

/// The directory a module's `mod child;` files live in.
fn child_dir(file: &str, path: &ModPath) -> String {
    let dir = match file.rfind('/') {
        Some(k) => &file[..=k],
        None => "",
    };
    let name = file.rsplit('/').next().unwrap_or(file);
    if path.is_empty() || name == "mod.rs" || name == "lib.rs" || name == "main.rs" {
        dir.to_owned()
    } else {
        format!("{dir}{}/", name.trim_end_matches(".rs"))
    }
}

/// Reads the items of the module `path` written in `t[start..end]` of `file`.
#[allow(clippy::too_many_arguments)]
fn parse_module(
    krate: &mut Crate,
    t: &[String],
    start: usize,
    end: usize,
    path: &ModPath,
    file: &str,
    scopes: &mut [Option<ModPath>],
    children: &mut Vec<(ModPath, ())>,
    uses: &mut Vec<(usize, usize)>,
) {
    krate.modules.entry(path.clone()).or_default().file = file.to_owned();
    for s in scopes.iter_mut().take(end).skip(start) {
        *s = Some(path.clone());
    }
    let mut i = start;
    let mut cfg_test = false;
    let mut macro_export = false;
    while i < end {
        let tok = t[i].as_str();
        if tok == "#" {
            let open = if t.get(i + 1).map(String::as_str) == Some("!") {
                i + 2
            } else {
                i + 1
            };
            let close = matching(t, open);
            let attr: Vec<&str> = t[open + 1..close].iter().map(String::as_str).collect();
            if attr == ["cfg", "(", "test", ")"] {
                cfg_test = true;
            }
            if attr == ["macro_export"] {
                macro_export = true;
            }
            i = close + 1;
            continue;
        }
        if tok == "pub" {
            if t.get(i + 1).map(String::as_str) == Some("(") {
                i = matching(t, i + 1);
            }
            i += 1;
            continue;
        }
        if matches!(tok, "async" | "unsafe" | "extern" | "default") {
            i += 1;
            continue;
        }
        let public =
            i > start && (t[i - 1] == "pub" || (t[i - 1] == ")" && is_pub_restricted(t, i - 1)));
        let test = std::mem::take(&mut cfg_test);
        let exported = std::mem::take(&mut macro_export);
        match tok {
            "mod" => {
                let name = t[i + 1].clone();
                let mut child = path.clone();
                child.push(name.clone());
                if t.get(i + 2).map(String::as_str) == Some("{") {
                    let close = matching(t, i + 2);
                    if test {
                        for s in scopes.iter_mut().take(close + 1).skip(i) {
                            *s = None;
                        }
                    } else {
                        krate
                            .modules
                            .entry(path.clone())
                            .or_default()
                            .children
                            .insert(name);
                        parse_module(krate, t, i + 3, close, &child, file, scopes, children, uses);
                    }
                    i = close + 1;
                } else {
                    if !test {
                        krate
                            .modules
                            .entry(path.clone())
                            .or_default()
                            .children
                            .insert(name);
                        children.push((child, ()));
                    }
                    i += 3;
                }
            }
            "use" => {
                let close = item_end(t, i, false);
                if test {
                    for s in scopes.iter_mut().take(close + 1).skip(i) {
                        *s = None;
                    }
                } else {
                    let mut out = Vec::new();
                    parse_use_tree(&t[i + 1..close], &[], &mut out);
                    let module = krate.modules.get_mut(path).expect("registered");
                    for (p, alias) in out {
                        module.imports.push(Import {
                            path: p,
                            alias,
                            public,
                            scope: path.clone(),
                            file: file.to_owned(),
                        });
                    }
                    uses.push((i, close));
                }
                i = close + 1;
            }
            "fn" | "struct" | "enum" | "trait" | "type" | "static" | "union" | "const" => {
                let mut k = i;
                // `const fn`, `unsafe fn`, `async fn`: the name follows the last keyword.
                while matches!(
                    t.get(k + 1).map(String::as_str),
                    Some("fn" | "unsafe" | "async" | "extern")
                ) {
                    k += 1;
                }
                let name = t.get(k + 1).cloned().unwrap_or_default();
                let close = item_end(t, i, tok != "const" && tok != "static" && tok != "type");
                if test {
                    for s in scopes.iter_mut().take(close + 1).skip(i) {
                        *s = None;
                    }
                } else if name != "{" && name != "_" {
                    krate
                        .modules
                        .get_mut(path)
                        .expect("registered")
                        .items
                        .insert(name);
                }
                i = close + 1;
            }
            "macro_rules" => {
                let name = t[i + 2].clone();
                let target = if exported { Vec::new() } else { path.clone() };
                krate.modules.entry(target).or_default().items.insert(name);
                i = item_end(t, i, true) + 1;
            }
            "impl" => {
                let close = item_end(t, i, true);
                if test {
                    for s in scopes.iter_mut().take(close + 1).skip(i) {
                        *s = None;
                    }
                }
                i = close + 1;
            }
            ";" => i += 1,
            _ => {
                // A macro call at module scope, `extern crate`, or anything else: to its end.
                let close = item_end(t, i, true);
                if test {
                    for s in scopes.iter_mut().take(close + 1).skip(i) {
                        *s = None;
                    }
                }
                i = close + 1;
            }
        }
    }
}

fn is_pub_restricted(t: &[String], close: usize) -> bool {
    (0..close)
        .rev()
        .find(|&k| t[k] == "(")
        .is_some_and(|open| open > 0 && t[open - 1] == "pub")
}

/// Flattens a use tree (`a::{b, c::{self, d as e}, f::*}`) into paths and their aliases.
fn parse_use_tree(t: &[String], prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    if t.first().map(String::as_str) == Some("::") {
        // `use ::name`: an extern crate.
        return;
    }
    while i < t.len() {
        match t[i].as_str() {
            "::" => i += 1,
            "*" => {
                out.push((path.clone(), None));
                return;
            }
            "{" => {
                let close = matching(t, i);
                let inner = &t[i + 1..close];
                let mut depth = 0;
                let mut from = 0;
                for (k, tok) in inner.iter().enumerate() {
                    match tok.as_str() {
                        "{" => depth += 1,
                        "}" => depth -= 1,
                        "," if depth == 0 => {
                            parse_use_tree(&inner[from..k], &path, out);
                            from = k + 1;
                        }
                        _ => {}
                    }
                }
                if from < inner.len() {
                    parse_use_tree(&inner[from..], &path, out);
                }
                return;
            }
            "as" => {
                let alias = t[i + 1].clone();
                if alias != "_" {
                    out.push((path.clone(), Some(alias)));
                } else {
                    out.push((path.clone(), Some(String::new())));
                }
                return;
            }
            "self" if i > 0 || !prefix.is_empty() => i += 1,
            name => {
                path.push(name.to_owned());
                i += 1;
            }
        }
    }
    if let Some(last) = path.last().cloned() {
        out.push((path, Some(last)));
    }
}

// ---------------------------------------------------------------------------------------------
// Resolution
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Target {
    Module(ModPath),
    Item { module: ModPath, name: String },
}

impl Crate {
    fn file_of(&self, target: &Target) -> Option<String> {
        let module = match target {
            Target::Module(m) | Target::Item { module: m, .. } => m,
        };
        self.modules.get(module).map(|m| m.file.clone())
    }

    /// The name `name` as seen inside the module `m`.
    fn lookup(&self, m: &ModPath, name: &str, depth: usize) -> Option<Target> {
        if depth > 32 {
            return None;
        }
        let module = self.modules.get(m)?;
        if module.children.contains(name) {
            let mut child = m.clone();
            child.push(name.to_owned());
            return Some(Target::Module(child));
        }
        if module.items.contains(name) {
            return Some(Target::Item {
                module: m.clone(),
                name: name.to_owned(),
            });
        }
        for import in &module.imports {
            if import.alias.as_deref() == Some(name)
                && let Some(target) = self.resolve(&import.scope, &import.path, depth + 1)
            {
                return Some(target);
            }
        }
        for import in module.imports.iter().filter(|i| i.alias.is_none()) {
            if let Some(Target::Module(g)) = self.resolve(&import.scope, &import.path, depth + 1)
                && g != *m
                && let Some(target) = self.lookup(&g, name, depth + 1)
            {
                return Some(target);
            }
        }
        None
    }

    /// A path as written in the module `m`; `None` when it leaves the crate.
    fn resolve(&self, m: &ModPath, path: &[String], depth: usize) -> Option<Target> {
        let (first, rest) = path.split_first()?;
        let mut current = match first.as_str() {
            "crate" | "$crate" => Target::Module(Vec::new()),
            "self" => Target::Module(m.clone()),
            "super" => Target::Module(m[..m.len().saturating_sub(1)].to_vec()),
            name => self.lookup(m, name, depth)?,
        };
        for seg in rest {
            let Target::Module(cur) = &current else {
                break;
            };
            current = match seg.as_str() {
                "super" => Target::Module(cur[..cur.len().saturating_sub(1)].to_vec()),
                "self" => current.clone(),
                name => match self.lookup(cur, name, depth) {
                    Some(t) => t,
                    // A name the reader cannot see (made by a macro): the module it is in.
                    None => break,
                },
            };
        }
        Some(current)
    }
}

// ---------------------------------------------------------------------------------------------
// The graph
// ---------------------------------------------------------------------------------------------

/// The files of a crate and the imports between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// `(from, to)` file → the names `from` takes from `to`.
    pub edges: BTreeMap<(String, String), BTreeSet<String>>,
    /// Each file's module path (`cache::store`; the crate root is ``).
    pub module_of: BTreeMap<String, Vec<String>>,
}

/// Reads the crate whose root file (`lib.rs`) is in `sources` and resolves its imports.
pub fn graph(sources: &Sources, root: &str) -> Graph {
    let krate = parse_crate(sources, root);
    let mut g = Graph::default();
    for (path, module) in &krate.modules {
        let entry = g
            .module_of
            .entry(module.file.clone())
            .or_insert_with(|| path.clone());
        if path.len() < entry.len() {
            *entry = path.clone();
        }
    }
    let mut add = |from: &str, target: Option<Target>, label: &str| {
        let Some(target) = target else { return };
        let Some(to) = krate.file_of(&target) else {
            return;
        };
        if to != from {
            g.edges
                .entry((from.to_owned(), to))
                .or_default()
                .insert(label.to_owned());
        }
    };
    // Imports.
    for module in krate.modules.values() {
        for import in &module.imports {
            let tokens = &krate.tokens[&import.file];
            let ranges = &krate.use_ranges[&import.file];
            if import.public {
                // A re-export ties the file only if the file uses the name itself.
                let Some(alias) = &import.alias else { continue };
                let used = tokens.iter().enumerate().any(|(k, (tok, scope))| {
                    tok == alias
                        && scope.is_some()
                        && !ranges.iter().any(|&(a, b)| a <= k && k <= b)
                });
                if !used {
                    continue;
                }
            }
            let label = import.path.last().cloned().unwrap_or_default();
            add(
                &import.file,
                krate.resolve(&import.scope, &import.path, 0),
                &label,
            );
        }
    }
    // Paths in code: `super::x::y(…)`, `crate::a::B`, `child::f()`, `alias::g()`.
    for (file, tokens) in &krate.tokens {
        let ranges = &krate.use_ranges[file];
        let mut k = 0;
        while k < tokens.len() {
            let in_use = ranges.iter().any(|&(a, b)| a <= k && k <= b);
            let (tok, scope) = &tokens[k];
            let starts = tokens.get(k + 1).is_some_and(|(t, _)| t == "::")
                && (k == 0 || tokens[k - 1].0 != "::")
                && tok
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$');
            let Some(scope) = scope.as_ref().filter(|_| starts && !in_use) else {
                k += 1;
                continue;
            };
            let mut path = vec![tok.clone()];
            let mut j = k + 1;
            while j + 1 < tokens.len() && tokens[j].0 == "::" {
                let seg = &tokens[j + 1].0;
                if !seg
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_')
                {
                    break;
                }
                path.push(seg.clone());
                j += 2;
            }
            let anchored = matches!(tok.as_str(), "crate" | "$crate" | "super" | "self");
            let target = if anchored {
                krate.resolve(scope, &path, 0)
            } else {
                match krate.lookup(scope, tok, 0) {
                    Some(Target::Module(_)) => krate.resolve(scope, &path, 0),
                    _ => None,
                }
            };
            let label = path.last().cloned().unwrap_or_default();
            add(file, target, &label);
            k = j;
        }
    }
    g
}

fn module_name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        path.join("::")
    }
}

/// One cycle: the members of a strongly connected set of files or modules, and every edge
/// between them with the names that tie it.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// `"file"` or `"module"`.
    pub kind: &'static str,
    /// Sorted: what an allow-list names.
    pub members: Vec<String>,
    pub edges: Vec<(String, String, BTreeSet<String>)>,
}

impl Cycle {
    /// The members, sorted: what an allow-list names.
    pub fn key(&self) -> &[String] {
        &self.members
    }
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cycle through {}:",
            self.kind,
            self.members.join(", ")
        )?;
        for (from, to, names) in &self.edges {
            let names: Vec<_> = names.iter().map(String::as_str).collect();
            write!(f, "\n    {from} -[{}]-> {to}", names.join(", "))?;
        }
        Ok(())
    }
}

/// Every strongly connected set of more than one node.
fn cycles_of(
    kind: &'static str,
    edges: &BTreeMap<(String, String), BTreeSet<String>>,
) -> Vec<Cycle> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        adj.entry(from).or_default().push(to);
        adj.entry(to).or_default();
    }
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(n) = stack.pop() {
            for &m in &adj[n.as_str()] {
                if seen.insert(m.to_owned()) {
                    stack.push(m.to_owned());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<String>> = adj.keys().map(|&n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &n in adj.keys() {
        if done.contains(n) || !reaches[n].contains(n) {
            continue;
        }
        // The set: every node that n reaches and that reaches n.
        let members: Vec<String> = adj
            .keys()
            .filter(|m| reaches[n].contains(**m) && reaches[**m].contains(n))
            .map(|m| m.to_string())
            .collect();
        done.extend(members.iter().cloned());
        let edges = edges
            .iter()
            .filter(|((a, b), _)| members.contains(a) && members.contains(b))
            .map(|((a, b), names)| (a.clone(), b.clone(), names.clone()))
            .collect();
        out.push(Cycle {
            kind,
            members,
            edges,
        });
    }
    out
}

impl Graph {
    /// Cycles between files, then cycles among the children of each module.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut out = cycles_of("file", &self.edges);
        let parents: BTreeSet<Vec<String>> = self
            .module_of
            .values()
            .flat_map(|p| (0..p.len()).map(|k| p[..k].to_vec()))
            .collect();
        for parent in parents {
            let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
            for ((from, to), names) in &self.edges {
                let child = |file: &str| {
                    let m = &self.module_of[file];
                    (m.len() > parent.len() && m[..parent.len()] == parent[..])
                        .then(|| module_name(&m[..=parent.len()]))
                };
                if let (Some(a), Some(b)) = (child(from), child(to))
                    && a != b
                {
                    edges
                        .entry((a, b))
                        .or_default()
                        .extend(names.iter().cloned());
                }
            }
            out.extend(cycles_of("module", &edges));
        }
        out
    }

    /// Every edge from a file under the top-level module `from` to one under `to`.
    pub fn imports_between(&self, from: &str, to: &str) -> Vec<String> {
        let top = |file: &str| self.module_of[file].first().cloned().unwrap_or_default();
        self.edges
            .iter()
            .filter(|((a, b), _)| top(a) == from && top(b) == to)
            .map(|((a, b), names)| {
                let names: Vec<_> = names.iter().map(String::as_str).collect();
                format!("{a} imports {} from {b}", names.join(", "))
            })
            .collect()
    }
}

/// A house rule: the top-level module `from` never imports the top-level module `to`.
pub struct Rule {
    pub from: &'static str,
    pub to: &'static str,
}

/// Checks the crate: no cycle but the allowed ones (each named by its sorted members), no rule
/// broken, and no allowed cycle gone. The error lists every failure, one a line.
pub fn check(
    sources: &Sources,
    root: &str,
    rules: &[Rule],
    allowed: &[&[&str]],
) -> Result<(), String> {
    let g = graph(sources, root);
    let mut failures = Vec::new();
    let cycles = g.cycles();
    for cycle in &cycles {
        let key = cycle.key();
        if !allowed
            .iter()
            .any(|a| a.iter().copied().eq(key.iter().map(String::as_str)))
        {
            failures.push(cycle.to_string());
        }
    }
    for a in allowed {
        if !cycles
            .iter()
            .any(|c| a.iter().copied().eq(c.key().iter().map(String::as_str)))
        {
            failures.push(format!(
                "allowed cycle {a:?} is gone: delete its entry from the allow-list"
            ));
        }
    }
    for rule in rules {
        for edge in g.imports_between(rule.from, rule.to) {
            failures.push(format!(
                "house rule `{}` never imports `{}`: {edge}",
                rule.from, rule.to
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Sources {
        files
            .iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect()
    }

    const RULES: &[Rule] = &[Rule {
        from: "workqueue",
        to: "cache",
    }];

    #[test]
    fn a_clean_tree_passes() {
        let t = tree(&[
            ("lib.rs", "pub mod cache; pub mod workqueue;"),
            ("workqueue/mod.rs", "mod queue; pub use queue::Queue;"),
            ("workqueue/queue.rs", "pub struct Queue;"),
            ("cache/mod.rs", "mod store; pub use store::Store;"),
            (
                "cache/store.rs",
                "use crate::workqueue::Queue; pub struct Store(Queue);",
            ),
        ]);
        assert_eq!(check(&t, "lib.rs", RULES, &[]), Ok(()));
        let g = graph(&t, "lib.rs");
        // The re-export names the child file: the edge goes to it, not to the parent.
        assert!(
            g.edges
                .contains_key(&("cache/store.rs".into(), "workqueue/queue.rs".into()))
        );
    }

    #[test]
    fn an_inline_path_loop_between_files_is_named() {
        let t = tree(&[
            ("lib.rs", "pub mod cache;"),
            (
                "cache/mod.rs",
                "mod store; mod reflector; pub use store::Store;",
            ),
            (
                "cache/store.rs",
                "pub struct Store; impl Store { fn f(&self) { super::reflector::copy_resource_version(1); } }",
            ),
            (
                "cache/reflector/mod.rs",
                "use super::{Store, self as c}; pub fn copy_resource_version(_: u8) {}\n\
                 #[cfg(test)] mod tests { use crate::cache::store::Nothing; }",
            ),
        ]);
        let err = check(&t, "lib.rs", &[], &[]).unwrap_err();
        assert!(err.contains("file cycle through cache/reflector/mod.rs, cache/store.rs:\n    cache/reflector/mod.rs -[Store]-> cache/store.rs\n    cache/store.rs -[copy_resource_version]-> cache/reflector/mod.rs"), "{err}");
        assert!(err.contains("module cycle through cache::reflector, cache::store:\n    cache::reflector -[Store]-> cache::store\n    cache::store -[copy_resource_version]-> cache::reflector"), "{err}");
    }

    #[test]
    fn a_parent_child_knot_is_named() {
        let t = tree(&[
            ("lib.rs", "pub mod handlers;"),
            (
                "handlers/mod.rs",
                "mod reads; pub struct Ctx; fn route() { reads::get(); }",
            ),
            ("handlers/reads.rs", "use super::Ctx; pub fn get() {}"),
        ]);
        let err = check(&t, "lib.rs", &[], &[]).unwrap_err();
        assert!(err.contains("file cycle through handlers/mod.rs, handlers/reads.rs:\n    handlers/mod.rs -[get]-> handlers/reads.rs\n    handlers/reads.rs -[Ctx]-> handlers/mod.rs"), "{err}");
    }

    #[test]
    fn a_reexport_alone_is_no_edge_and_strings_and_comments_are_not_code() {
        let t = tree(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod b; mod c; pub use b::B; pub use c::C;"),
            (
                "a/b.rs",
                "use super::C; pub struct B(C); // super::c::x()\n const S: &str = \"crate::a::b::B\";",
            ),
            (
                "a/c.rs",
                "pub struct C; fn f<'a>(x: &'a u8) -> char { let _ = r#\"super::b::B\"#; '\\'' }",
            ),
        ]);
        assert_eq!(check(&t, "lib.rs", &[], &[]), Ok(()));
    }

    #[test]
    fn each_house_rule_broken_is_named() {
        let t = tree(&[
            ("lib.rs", "pub mod cache; pub mod workqueue; mod fake;"),
            (
                "workqueue/mod.rs",
                "use crate::cache::Store as S; pub struct Queue;",
            ),
            ("cache/mod.rs", "pub struct Store;"),
            ("fake.rs", "pub fn f() { crate::workqueue::Queue; }"),
        ]);
        let err = check(&t, "lib.rs", RULES, &[]).unwrap_err();
        assert!(err.contains("house rule `workqueue` never imports `cache`: workqueue/mod.rs imports Store from cache/mod.rs"), "{err}");
        let rules = [Rule {
            from: "fake",
            to: "workqueue",
        }];
        let err = check(&t, "lib.rs", &rules, &[]).unwrap_err();
        assert!(err.contains("house rule `fake` never imports `workqueue`: fake.rs imports Queue from workqueue/mod.rs"), "{err}");
    }

    #[test]
    fn an_allowed_cycle_passes_and_a_gone_one_fails() {
        let t = tree(&[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "pub fn f() { crate::b::g() }"),
            ("b.rs", "pub fn g() { crate::a::f() }"),
        ]);
        assert!(check(&t, "lib.rs", &[], &[]).is_err());
        let both: &[&[&str]] = &[&["a.rs", "b.rs"], &["a", "b"]];
        assert_eq!(check(&t, "lib.rs", &[], both), Ok(()));
        let stale: &[&[&str]] = &[&["a.rs", "b.rs"], &["a", "b"], &["x.rs", "y.rs"]];
        let err = check(&t, "lib.rs", &[], stale).unwrap_err();
        assert!(
            err.contains("allowed cycle [\"x.rs\", \"y.rs\"] is gone"),
            "{err}"
        );
    }

    #[test]
    fn nested_groups_globs_and_macros_resolve() {
        let t = tree(&[
            ("lib.rs", "pub mod p; pub mod q;"),
            (
                "p/mod.rs",
                "mod x; mod y; pub use x::*; pub use y::{Y, Z as W};",
            ),
            (
                "p/x.rs",
                "pub struct X; #[macro_export] macro_rules! m { () => { $crate::q::Q }; }",
            ),
            ("p/y.rs", "pub struct Y; pub struct Z;"),
            (
                "q.rs",
                "use crate::p::{X, W, self as pp}; pub struct Q; fn f() { pp::Y; }",
            ),
        ]);
        let g = graph(&t, "lib.rs");
        let names = |a: &str, b: &str| {
            g.edges
                .get(&(a.to_owned(), b.to_owned()))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(names("q.rs", "p/x.rs"), BTreeSet::from(["X".to_owned()]));
        assert_eq!(
            names("q.rs", "p/y.rs"),
            BTreeSet::from(["W".to_owned(), "Y".to_owned()])
        );
        assert_eq!(names("p/x.rs", "q.rs"), BTreeSet::from(["Q".to_owned()]));
    }
}
