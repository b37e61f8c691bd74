//! The module graph of a crate, read from its source text, and its circles.
//!
//! A module is a file: `lib.rs` (or `main.rs`) is the crate root (`crate`), `a.rs` and
//! `a/mod.rs` are `a`, `a/b.rs` is `a::b`. Inline modules belong to their file, except
//! `#[cfg(test)]` items, which are dropped (tests may reach anywhere). An edge
//! `a -> b` is a path in `a`'s code (comments and string literals dropped) that names
//! an item of `b` or `b` itself: `crate::b::X`, `super::X`, `self::x::Y`, a use group
//! `use crate::{b, c::d}`, or a bare path that starts with one of `a`'s own child
//! modules (`x::Y` in the file that declares `mod x;`).
//!
//! What counts, for a parent and its children:
//! - declaring a child (`mod x;`, `pub mod x;`) is not an import;
//! - the parent naming a child's items (`pub use x::Y`, `x::f()`) is `parent -> child`;
//! - a child naming its parent's items (`super::Y`, `crate::parent::Y`) is
//!   `child -> parent`.
//!
//! So items the children need must not live in the parent when the parent also uses
//! the children: they go in a sibling module both can import.
//!
//! What it does not see: a method called through its type (`CellTable::builder()`)
//! when an `impl` block in another module defines it. Keep such a block in a module
//! that may import the type's own (the builder's `impl CellTable { fn builder }` lives
//! in the builder, and nothing the table's module calls is defined there).
//!
//! [`circles`] reports every strongly connected component of more than one module,
//! with the edges (file:line) inside it. Any crate's test can use it:
//! `#[path = "../../ictus-exec/tests/module_graph/mod.rs"] mod module_graph;`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// One reference of a module to another.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Edge {
    /// The module that names the other.
    pub(crate) from: String,
    /// The module named.
    pub(crate) to: String,
    /// Where: the file, relative to the source folder.
    pub(crate) file: PathBuf,
    /// Where: the 1-based line.
    pub(crate) line: usize,
}

/// A set of modules that reach each other, and the edges between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Circle {
    /// The modules, sorted.
    pub(crate) modules: Vec<String>,
    /// The edges between two of them, sorted.
    pub(crate) edges: Vec<Edge>,
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} modules in one circle: {}",
            self.modules.len(),
            self.modules.join(", ")
        )?;
        // One line per pair of modules, with every place that makes the edge.
        let mut pairs: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
        for e in &self.edges {
            pairs.entry((&e.from, &e.to)).or_default().push(format!(
                "{}:{}",
                e.file.display(),
                e.line
            ));
        }
        for ((from, to), places) in pairs {
            writeln!(f, "  {from} -> {to}  ({})", places.join(", "))?;
        }
        Ok(())
    }
}

/// The circles among the modules of the crate whose source folder is `src` (the folder
/// holding `lib.rs`). Empty when the module graph has none.
pub(crate) fn circles(src: &Path) -> Vec<Circle> {
    let graph = edges(src);
    let modules: BTreeSet<&str> = graph
        .iter()
        .flat_map(|e| [e.from.as_str(), e.to.as_str()])
        .collect();
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &graph {
        next.entry(&e.from).or_default().insert(&e.to);
    }
    components(&modules, &next)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let edges = graph
                .iter()
                .filter(|e| c.contains(e.from.as_str()) && c.contains(e.to.as_str()))
                .cloned()
                .collect();
            Circle {
                modules: c.into_iter().map(str::to_string).collect(),
                edges,
            }
        })
        .collect()
}

/// Every edge between two different modules of the crate at `src`, sorted. A path
/// through an import or a re-export (`super::X` where the parent says
/// `pub use child::X`) leads to the module that holds the item.
pub(crate) fn edges(src: &Path) -> Vec<Edge> {
    let mut files = Vec::new();
    collect_files(src, &mut files);
    let modules: BTreeMap<String, Module> = files
        .iter()
        .map(|f| {
            let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let code = drop_test_items(&blank_comments_and_strings(&text));
            let module = Module {
                file: f.strip_prefix(src).unwrap_or(f).to_path_buf(),
                children: child_modules(&code),
                bindings: bindings(&code),
                code,
            };
            (module_of(src, f), module)
        })
        .collect();
    let mut out = BTreeSet::new();
    for (name, module) in &modules {
        for (line, path) in paths(&module.code, &module.children) {
            let Some(target) = resolve(name, &path, &modules, 0) else {
                continue;
            };
            if target != *name {
                out.insert(Edge {
                    from: name.clone(),
                    to: target,
                    file: module.file.clone(),
                    line,
                });
            }
        }
    }
    out.into_iter().collect()
}

/// One file of the crate, read.
struct Module {
    /// Relative to the source folder.
    file: PathBuf,
    /// Its code, comments, strings and test items blanked.
    code: String,
    /// The modules it declares.
    children: BTreeSet<String>,
    /// The names its `use` items bring in, each with its path.
    bindings: BTreeMap<String, Vec<String>>,
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// `lib.rs` (or a binary's `main.rs`) -> `crate`, `a.rs` and `a/mod.rs` -> `a`,
/// `a/b.rs` -> `a::b`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] || parts.is_empty() {
        return "crate".to_string();
    }
    parts.join("::")
}

/// The text with comments, string and char literals replaced by spaces (newlines
/// kept, so lines still count).
fn blank_comments_and_strings(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a): blank only the
            // literal.
            let end = if next == Some('\\') {
                (i + 2..b.len()).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// The code with every `#[cfg(test)]` item blanked (a `mod tests { .. }`, a
/// `use ..;`, a `fn`; also `#[cfg(all(test, ..))]`): test code may import anything.
fn drop_test_items(code: &str) -> String {
    let mut b: Vec<char> = code.chars().collect();
    let patterns: [Vec<char>; 2] = [
        "#[cfg(test)]".chars().collect(),
        "#[cfg(all(test,".chars().collect(),
    ];
    let mut i = 0;
    while i < b.len() {
        let Some(pattern) = patterns
            .iter()
            .find(|p| i + p.len() <= b.len() && b[i..i + p.len()] == p[..])
        else {
            i += 1;
            continue;
        };
        // The attribute ends at its `]` (`all(..)`'s after its own parentheses).
        let mut j = i + pattern.len();
        if pattern.last() != Some(&']') {
            while j < b.len() && b[j] != ']' {
                j += 1;
            }
            j += 1;
        }
        // The item runs to its first `;` at depth 0 or the end of its first block.
        let mut depth = 0usize;
        while j < b.len() {
            match b[j] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    j += 1;
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let end = j.min(b.len());
        for c in &mut b[i..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = j;
    }
    b.into_iter().collect()
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Other(char),
}

/// The tokens of the code that matter to paths, each with its line.
fn tokens(code: &str) -> Vec<(usize, Token)> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push((line, Token::Ident(b[start..i].iter().collect())));
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push((line, Token::PathSep));
            i += 2;
        } else {
            out.push((
                line,
                match c {
                    '{' => Token::Open,
                    '}' => Token::Close,
                    ',' => Token::Comma,
                    _ => Token::Other(c),
                },
            ));
            i += 1;
        }
    }
    out
}

/// The modules a file declares (`mod x;`, `pub(crate) mod x;`).
fn child_modules(code: &str) -> BTreeSet<String> {
    let t = tokens(code);
    t.windows(3)
        .filter_map(|w| match (&w[0].1, &w[1].1, &w[2].1) {
            (Token::Ident(m), Token::Ident(name), Token::Other(';')) if m == "mod" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

/// Every path in the code that starts at `crate`, `super`, `self` or a child module,
/// with use groups expanded, each with the line where it starts.
fn paths(code: &str, children: &BTreeSet<String>) -> Vec<(usize, Vec<String>)> {
    let t = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let starts = match &t[i].1 {
            Token::Ident(id) => {
                (id == "crate" || id == "super" || id == "self" || children.contains(id))
                    && matches!(t.get(i + 1), Some((_, Token::PathSep)))
                    && !matches!(
                        i.checked_sub(1).map(|p| &t[p].1),
                        Some(Token::PathSep | Token::Other('$'))
                    )
            }
            _ => false,
        };
        if !starts {
            i += 1;
            continue;
        }
        let line = t[i].0;
        let mut found = Vec::new();
        i = tree(&t, i, Vec::new(), &mut found);
        out.extend(found.into_iter().map(|(p, _)| (line, p)));
    }
    out
}

/// The names the code's `use` items bring in (`use a::b::C` binds `C`, `use a::{b as
/// c}` binds `c`, `use a::b::{self}` binds `b`), each with its path.
fn bindings(code: &str) -> BTreeMap<String, Vec<String>> {
    let t = tokens(code);
    let mut out = BTreeMap::new();
    for i in 0..t.len() {
        if t[i].1 != Token::Ident("use".to_string()) {
            continue;
        }
        let start = if matches!(t.get(i + 1), Some((_, Token::PathSep))) {
            i + 2
        } else {
            i + 1
        };
        let mut found = Vec::new();
        tree(&t, start, Vec::new(), &mut found);
        for (path, name) in found {
            if name != "_" && !name.is_empty() {
                out.insert(name, path);
            }
        }
    }
    out
}

/// Reads a use tree (or a plain path) from token `i` with `prefix` before it; pushes
/// each full path with the name it binds; returns the index after it.
fn tree(
    t: &[(usize, Token)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) -> usize {
    loop {
        match t.get(i).map(|x| &x.1) {
            Some(Token::Ident(id)) => {
                prefix.push(id.clone());
                i += 1;
                if matches!(t.get(i).map(|x| &x.1), Some(Token::PathSep)) {
                    i += 1;
                    continue;
                }
                let mut name = if id == "self" && prefix.len() >= 2 {
                    prefix[prefix.len() - 2].clone()
                } else {
                    id.clone()
                };
                if t.get(i).map(|x| &x.1) == Some(&Token::Ident("as".to_string())) {
                    if let Some((_, Token::Ident(alias))) = t.get(i + 1) {
                        name = alias.clone();
                    }
                    i += 2;
                }
                out.push((prefix, name));
                return i;
            }
            Some(Token::Open) => {
                i += 1;
                loop {
                    match t.get(i).map(|x| &x.1) {
                        Some(Token::Close) => return i + 1,
                        Some(Token::Comma) => i += 1,
                        None => return i,
                        Some(_) => {
                            let before = i;
                            i = tree(t, i, prefix.clone(), out);
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
            }
            _ => {
                // `crate::*`, a turbofish, or the end: the path so far.
                if !prefix.is_empty() {
                    out.push((prefix, String::new()));
                }
                return i;
            }
        }
    }
}

/// The module of `modules` that holds what `path`, seen from `module`, names:
/// the deepest module on the path, or where an import of that module leads.
/// `None` for a path that leaves the crate.
fn resolve(
    module: &str,
    path: &[String],
    modules: &BTreeMap<String, Module>,
    depth: usize,
) -> Option<String> {
    let join = |at: &[String]| {
        if at.is_empty() {
            "crate".to_string()
        } else {
            at.join("::")
        }
    };
    let mut at: Vec<String> = if module == "crate" {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            at.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first)
            if modules
                .get(module)
                .is_some_and(|m| m.children.contains(first)) => {}
        _ => return None,
    }
    let mut k = 0;
    while k < rest.len() {
        at.push(rest[k].clone());
        if !modules.contains_key(&join(&at)) {
            at.pop();
            break;
        }
        k += 1;
    }
    let here = join(&at);
    if depth < 8
        && let Some(name) = rest.get(k)
        && let Some(import) = modules.get(&here).and_then(|m| m.bindings.get(name))
        && let Some(found) = resolve(&here, import, modules, depth + 1)
    {
        return Some(found);
    }
    Some(here)
}

/// Strongly connected components (Tarjan), each sorted.
fn components<'a>(
    nodes: &BTreeSet<&'a str>,
    next: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> Vec<BTreeSet<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<BTreeSet<&'a str>>,
    }
    fn visit<'a>(v: &'a str, next: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in next.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, next, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                c.insert(w);
                if w == v {
                    break;
                }
            }
            s.out.push(c);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in nodes {
        if !s.index.contains_key(v) {
            visit(v, next, &mut s);
        }
    }
    s.out.sort();
    s.out
}
