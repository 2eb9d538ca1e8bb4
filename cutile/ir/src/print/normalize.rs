//! Normalization of Tile IR text, so that our printer's output and tileirdisasm's can be compared although
//! they choose different SSA names and tileirdisasm leaves stray spaces.

use std::collections::HashMap;

/// Normalize Tile IR text for comparison. Exactly these rewrites, in this order:
///
/// 1. **Whitespace, per line**: `\r` is removed; trailing spaces and tabs are trimmed; inside the line (after
///    its leading indentation, which is kept unchanged) every run of spaces and tabs becomes one space; lines
///    that are then empty are dropped. Every kept line ends in `\n`.
/// 2. **SSA names**: every `%name` outside a string literal (`"…"`) is renamed `%vN`, with N counting value
///    definitions from 0 in textual order. `name` is an MLIR suffix id (`[A-Za-z0-9_$.-]+`). A definition is
///    - a name in the result list that opens a line (`%a, %b:2 = …`); `%b:2` defines two values and is
///      rewritten to two names (`%v1, %v2`);
///    - a name directly followed by `: ` (function parameters and region arguments, `%arg0: tile<i32>`);
///    - a name followed by ` = ` anywhere else (`iter_values(%acc = %init)`);
///    - a name followed by ` in ` (`for %i in (…)`).
///
///    Every other occurrence is a use: `%name` refers to the latest definition of `name` (its first value for a
///    group), `%name#I` to the I-th value of the group. A name defined again (sibling regions reuse names) gets
///    a fresh canonical name. A use of a name never defined counts as its definition.
///
/// So `%1:2 = get_index_space_shape …` / `… %1#1 …` and `%5, %6 = get_index_space_shape …` / `… %6 …`
/// normalize to the same text, as do `%blockId_x, %blockId_y, %blockId_z = …` and `%3:3 = …`.
pub fn normalize(text: &str) -> String {
    let mut names = Renamer::default();
    let mut out = String::with_capacity(text.len());
    for raw in text.lines() {
        let line = squeeze(raw);
        if line.trim().is_empty() {
            continue;
        }
        out.push_str(&names.line(&line));
        out.push('\n');
    }
    out
}

/// Step 1 for one line.
fn squeeze(raw: &str) -> String {
    let raw = raw.replace('\r', "");
    let body_start = raw.len() - raw.trim_start_matches([' ', '\t']).len();
    let (indent, body) = raw.split_at(body_start);
    let mut out = String::from(indent);
    let mut in_space = false;
    for c in body.trim_end_matches([' ', '\t']).chars() {
        if c == ' ' || c == '\t' {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

fn is_id_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'-')
}

#[derive(Default)]
struct Renamer {
    next: usize,
    current: HashMap<String, Vec<String>>,
}

impl Renamer {
    fn define(&mut self, name: &str, count: usize) -> Vec<String> {
        let vs: Vec<String> = (0..count.max(1))
            .map(|i| format!("%v{}", self.next + i))
            .collect();
        self.next += count.max(1);
        self.current.insert(name.to_string(), vs.clone());
        vs
    }

    fn use_of(&mut self, name: &str, index: usize) -> String {
        if !self.current.contains_key(name) {
            self.define(name, index + 1);
        }
        let vs = &self.current[name];
        match vs.get(index) {
            Some(v) => v.clone(),
            None => format!("{}#{index}", vs[0]),
        }
    }

    /// Byte length of the leading result list (`%a, %b:2`) if the line defines results, else 0.
    fn result_list_len(body: &[u8]) -> usize {
        let mut i = 0;
        loop {
            if body.get(i) != Some(&b'%') {
                return 0;
            }
            i += 1;
            let start = i;
            while i < body.len() && is_id_char(body[i]) {
                i += 1;
            }
            if i == start {
                return 0;
            }
            if body.get(i) == Some(&b':') && body.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i += 1;
                while i < body.len() && body[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if body[i..].starts_with(b" = ") {
                return i;
            }
            if !body[i..].starts_with(b", ") {
                return 0;
            }
            i += 2;
        }
    }

    fn line(&mut self, line: &str) -> String {
        let bytes = line.as_bytes();
        let indent = bytes.iter().take_while(|&&c| c == b' ').count();
        let results_end = indent + Self::result_list_len(&bytes[indent..]);
        let mut out = String::with_capacity(line.len());
        let mut i = 0;
        let mut in_str = false;
        let mut copied = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if in_str {
                if c == b'\\' {
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    in_str = false;
                }
                i += 1;
                continue;
            }
            if c == b'"' {
                in_str = true;
                i += 1;
                continue;
            }
            if c != b'%' {
                i += 1;
                continue;
            }
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && is_id_char(bytes[end]) {
                end += 1;
            }
            if end == start {
                i += 1;
                continue;
            }
            let name = &line[start..end];
            // Optional `:K` (group definition) or `#I` (group member use).
            let mut after = end;
            let mut group: Option<usize> = None;
            let mut member: Option<usize> = None;
            if let Some(&m) = bytes.get(end)
                && (m == b':' || m == b'#')
                && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)
            {
                let mut j = end + 1;
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                let n: usize = line[end + 1..j].parse().unwrap_or(0);
                if m == b':' {
                    group = Some(n);
                } else {
                    member = Some(n);
                }
                after = j;
            }
            let rest = &bytes[after..];
            let is_def = i < results_end
                || rest.starts_with(b": ")
                || rest.starts_with(b" = ")
                || rest.starts_with(b" in ");
            out.push_str(&line[copied..i]);
            if is_def && member.is_none() {
                out.push_str(&self.define(name, group.unwrap_or(1)).join(", "));
            } else {
                out.push_str(&self.use_of(name, member.unwrap_or(0)));
            }
            copied = after;
            i = after;
        }
        out.push_str(&line[copied..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn groups_and_lists_agree() {
        let a = "%1:2 = get_index_space_shape %pview : t -> tile<i32>\n%x = addi %1#1, %1#0 : t\n";
        let b = "%a, %b = get_index_space_shape %p : t -> tile<i32>\n%c = addi %b, %a : t\n";
        assert_eq!(normalize(a), normalize(b));
        assert_eq!(
            normalize(a),
            "%v0, %v1 = get_index_space_shape %v2 : t -> tile<i32>\n%v3 = addi %v1, %v0 : t\n"
        );
    }

    #[test]
    fn redefinitions_get_fresh_names_and_strings_are_left_alone() {
        let t = "  (%l: tile<f32>) {\n    %5 = maxf %l, %l : tile<f32>\n  }\n  (%l: tile<f32>) {\n    %5 = addf %l,   %l  : t   \n\n  }\n  print_tko \"%d\", %5\n";
        assert_eq!(
            normalize(t),
            "  (%v0: tile<f32>) {\n    %v1 = maxf %v0, %v0 : tile<f32>\n  }\n  (%v2: tile<f32>) {\n    %v3 = addf %v2, %v2 : t\n  }\n  print_tko \"%d\", %v3\n"
        );
    }

    #[test]
    fn loop_headers_define_their_names() {
        let t = "%for = for %i in (%lo to %hi, step %s) : tile<i32> iter_values(%acc = %init) -> (t) {\n";
        assert_eq!(
            normalize(t),
            "%v0 = for %v1 in (%v2 to %v3, step %v4) : tile<i32> iter_values(%v5 = %v6) -> (t) {\n"
        );
    }
}
