//! How the CLI prints API answers: `--output table|json|tsv`, shaped like the
//! Azure CLI's outputs so that people who script `az` feel at home.
//!
//! Everything here works on `serde_json::Value`, never on typed structs, so a
//! field the broker adds shows up in `json` and `tsv` output without a change
//! here; `table` shows a chosen set of columns per command, like az's table
//! transformers.

use serde_json::Value;

/// The three output formats of the contract (`--output`, default `table`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Aligned columns with a header row, like az --output table.
    #[default]
    Table,
    /// The response JSON, pretty-printed; for lists, the value array.
    Json,
    /// Tab-separated values without a header, like az --output tsv.
    Tsv,
}

/// The columns a `table` shows, as the camelCase JSON keys of the response.
/// The header of a column is its key with the first letter capitalised
/// (`loadBalancerType` → `LoadBalancerType`), as az derives its headers.
pub type Columns = &'static [&'static str];

/// Formats `data` — one object, or an array of objects for a list — in
/// `format`. The result is empty or ends with a newline, so callers print it
/// as is.
pub fn render(data: &Value, format: OutputFormat, columns: &[&str]) -> String {
    match format {
        OutputFormat::Json => render_json(data),
        OutputFormat::Table => render_table(&rows_of(data), columns),
        OutputFormat::Tsv => render_tsv(&rows_of(data)),
    }
}

/// Pretty JSON with a final newline. JSON escapes C0 controls itself;
/// DEL, C1 controls and the bidirectional marks are escaped too (`\u009b`),
/// which keeps the JSON the same and a terminal showing it untouched.
fn render_json(data: &Value) -> String {
    // Serialising a `Value` cannot fail: its map keys are always strings.
    let text = serde_json::to_string_pretty(data).unwrap_or_default();
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        // Inside its strings JSON has escaped every C0 control already: a
        // line break left is the layout's own.
        if is_unsafe(c) && c != '\n' {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out.push('\n');
    out
}

/// Whether `c` can drive a terminal or reorder what it shows: C0 and C1
/// control characters, DEL, and the Unicode bidirectional marks, embeddings,
/// overrides and isolates (U+200E, U+200F, U+202A–U+202E, U+2066–U+2069).
/// Text the broker answers may hold them (an audit entry, a user name), and
/// printed raw they could clear an administrator's screen, retitle the
/// terminal or fake rows.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character of [`is_unsafe`] written as an escape
/// (`\x1b`, `\u{202e}`), so that it prints as what it is.
pub fn inert(text: &str) -> String {
    if !text.chars().any(is_unsafe) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        let n = u32::from(c);
        if !is_unsafe(c) {
            out.push(c);
        } else if n <= 0xff {
            out.push_str(&format!("\\x{n:02x}"));
        } else {
            out.push_str(&format!("\\u{{{n:x}}}"));
        }
    }
    out
}

/// A list prints one row per element; anything else is one row.
fn rows_of(data: &Value) -> Vec<&Value> {
    match data {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    }
}

/// The header az shows for a JSON key: the key with its first letter in
/// upper case.
fn header_of(key: &str) -> String {
    let mut chars = key.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The text of one cell. Strings print without quotes, `null` and missing
/// fields as nothing, booleans as `true`/`false` (the spelling the CLI's own
/// flags take, so a value can be fed back), arrays of scalars joined with
/// commas (the spelling of `--capabilities`), other arrays and objects as
/// compact JSON.
fn cell_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Bool(flag)) => flag.to_string(),
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::Array(items)) if items.iter().all(is_scalar) => items
            .iter()
            .map(|item| cell_text(Some(item)))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

/// Width of a cell in terminal columns. Counting `char`s is exact for the
/// names, addresses and states the broker returns; wide East Asian characters
/// would count one each.
fn width_of(text: &str) -> usize {
    text.chars().count()
}

/// The table az prints with `--output table` (az formats with the Python
/// `tabulate` package, format "simple", numbers not parsed):
///
/// - every column is left-aligned, numbers too, and columns are separated by
///   two spaces;
/// - **a column's width is `max(len(header) + 2, len(longest value))`**:
///   tabulate reserves a padding of 2 beyond each header, but a long value
///   only needs its own width. So `LoadBalancerType` (16) with `DepthFirst`
///   (10) is 18 wide, while `Name` (4) with `contosohp01` (11) is 11 wide;
/// - the second row is dashes as wide as each column;
/// - trailing spaces are cut from every line.
///
/// An empty list prints the header alone (az prints nothing, which does not
/// tell "none" from "the command did nothing").
fn render_table(rows: &[&Value], columns: &[&str]) -> String {
    let headers: Vec<String> = columns.iter().map(|key| header_of(key)).collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|key| one_line(&cell_text(row.get(key))))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(column, header)| {
            let longest_value = cells
                .iter()
                .map(|row| width_of(&row[column]))
                .max()
                .unwrap_or(0);
            (width_of(header) + 2).max(longest_value)
        })
        .collect();

    let mut out = String::new();
    push_line(&mut out, &headers, &widths);
    let dashes: Vec<String> = widths.iter().map(|width| "-".repeat(*width)).collect();
    push_line(&mut out, &dashes, &widths);
    for row in &cells {
        push_line(&mut out, row, &widths);
    }
    out
}

/// Appends one table line: cells padded to their column's width, two spaces
/// between columns, no trailing spaces.
fn push_line(out: &mut String, cells: &[String], widths: &[usize]) {
    let mut line = String::new();
    for (column, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if column > 0 {
            line.push_str("  ");
        }
        line.push_str(cell);
        line.extend(std::iter::repeat_n(
            ' ',
            width.saturating_sub(width_of(cell)),
        ));
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

/// `tsv` prints, for each row, the values of its scalar fields in the order
/// the broker sent them, tab-separated, without a header; nested objects and
/// arrays are left out (az does the same). Unlike `table`, it shows every
/// scalar field, so new fields appear without a CLI change.
fn render_tsv(rows: &[&Value]) -> String {
    let mut out = String::new();
    for row in rows {
        let fields: Vec<String> = match row {
            Value::Object(map) => map
                .values()
                .filter(|value| is_scalar(value))
                .map(|value| tsv_field(&cell_text(Some(value))))
                .collect(),
            scalar => vec![tsv_field(&cell_text(Some(scalar)))],
        };
        out.push_str(&fields.join("\t"));
        out.push('\n');
    }
    out
}

/// A table cell must stay on one line, and hold nothing a terminal acts on
/// ([`inert`]).
fn one_line(text: &str) -> String {
    inert(&text.replace(['\r', '\n'], " "))
}

/// A tsv field must hold no tab or line break, or it would shift the columns
/// of a script reading it, and nothing a terminal acts on ([`inert`]).
fn tsv_field(text: &str) -> String {
    inert(&text.replace(['\t', '\r', '\n'], " "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_format_prints_a_character_a_terminal_acts_on() {
        let row = json!([{
            "actor": "credential:x\u{1b}]0;owned\u{7}",
            "target": "a\u{9b}2J\u{202e}b\u{2066}c\u{200f}\u{7f}",
            "after": {"name": "\u{1b}[2J\u{85}"},
        }]);
        for format in [OutputFormat::Table, OutputFormat::Tsv, OutputFormat::Json] {
            let out = render(&row, format, &["actor", "target", "after"]);
            let bad: Vec<char> = out
                .chars()
                .filter(|&c| !matches!(c, '\n' | '\t') && is_unsafe(c))
                .collect();
            assert!(bad.is_empty(), "{format:?}: {bad:?} in {out}");
            assert!(
                !out.contains('\t') || format == OutputFormat::Tsv,
                "{format:?}: {out}"
            );
        }
        let table = render(&row, OutputFormat::Table, &["actor", "target"]);
        assert!(table.contains(r"credential:x\x1b]0;owned\x07"), "{table}");
        assert!(
            table.contains(r"a\x9b2J\u{202e}b\u{2066}c\u{200f}\x7f"),
            "{table}"
        );
        // JSON stays JSON, and says the same.
        let text = render(&row, OutputFormat::Json, &[]);
        assert!(
            text.contains(r"\u009b") && text.contains(r"\u202e"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).expect("json"), row);
    }

    /// The az-style table of the interface contract's example, byte for byte
    /// (`hostpool show` now adds the pool's type: see `hostpool.rs`).
    #[test]
    fn three_column_table_matches_the_contract_example() {
        let pool = json!({
            "name": "contosohp01",
            "hostPoolType": "Pooled",
            "loadBalancerType": "DepthFirst",
            "maxSessionLimit": 10,
            "breadthFirstRandomized": true,
            "personalDesktopAssignmentType": null,
            "standardCapabilities": ["rdp"],
            "warnings": []
        });
        let expected = "\
Name         LoadBalancerType    MaxSessionLimit
-----------  ------------------  -----------------
contosohp01  DepthFirst          10
";
        assert_eq!(
            render(
                &pool,
                OutputFormat::Table,
                &["name", "loadBalancerType", "maxSessionLimit"]
            ),
            expected
        );
    }

    #[test]
    fn table_width_is_the_longer_of_header_plus_two_and_longest_value() {
        // "Id": 2 + 2 = 4 beats "a" (1); "Address": 7 + 2 = 9 loses to the
        // 12-character address. The last column's header and cells are
        // trimmed on the right.
        let rows = json!([
            {"id": "a", "address": "10.0.0.5:338"},
            {"id": "bb", "address": "h2"}
        ]);
        let expected = "\
Id    Address
----  ------------
a     10.0.0.5:338
bb    h2
";
        assert_eq!(
            render(&rows, OutputFormat::Table, &["id", "address"]),
            expected
        );
    }

    #[test]
    fn table_cells_show_null_as_nothing_and_booleans_and_lists_as_flags_spell_them() {
        let host = json!({
            "name": "h1",
            "allowNewSession": false,
            "assignedUser": null,
            "capabilities": ["rdp", "gpu"]
        });
        let expected = "\
Name    AllowNewSession    AssignedUser    Capabilities    Missing
------  -----------------  --------------  --------------  ---------
h1      false                              rdp,gpu
";
        assert_eq!(
            render(
                &host,
                OutputFormat::Table,
                &[
                    "name",
                    "allowNewSession",
                    "assignedUser",
                    "capabilities",
                    "missing"
                ]
            ),
            expected
        );
    }

    #[test]
    fn empty_list_prints_the_header_in_table_nothing_in_tsv_and_an_empty_array_in_json() {
        let empty = json!([]);
        assert_eq!(
            render(&empty, OutputFormat::Table, &["name", "sessionHost"]),
            "Name    SessionHost\n------  -------------\n"
        );
        assert_eq!(render(&empty, OutputFormat::Tsv, &["name"]), "");
        assert_eq!(render(&empty, OutputFormat::Json, &["name"]), "[]\n");
    }

    #[test]
    fn tsv_prints_every_scalar_field_in_response_order_without_header() {
        let sessions = json!([
            {"id": "s1", "sessionHost": "h1", "userPrincipalName": "alice@contoso.com",
             "sessionState": "Active", "createTime": "2026-11-30T08:00:00Z"},
            {"id": "s2", "sessionHost": "h2", "userPrincipalName": "bob@contoso.com",
             "sessionState": "Pending", "createTime": null, "tags": ["x"], "policy": {"a": 1}}
        ]);
        let expected = "\
s1\th1\talice@contoso.com\tActive\t2026-11-30T08:00:00Z
s2\th2\tbob@contoso.com\tPending\t
";
        assert_eq!(render(&sessions, OutputFormat::Tsv, &["id"]), expected);
    }

    #[test]
    fn tsv_keeps_one_record_per_line_when_values_hold_tabs_or_newlines() {
        let pool =
            json!({"name": "p1", "description": "two\tparts\nand lines", "maxSessionLimit": 5});
        assert_eq!(
            render(&pool, OutputFormat::Tsv, &[]),
            "p1\ttwo parts and lines\t5\n"
        );
    }

    #[test]
    fn json_is_pretty_and_keeps_the_broker_field_order() {
        let answer = json!({"sessionId": "s1", "address": "10.0.0.5:3389", "reconnect": false});
        let expected = "\
{
  \"sessionId\": \"s1\",
  \"address\": \"10.0.0.5:3389\",
  \"reconnect\": false
}
";
        assert_eq!(
            render(&answer, OutputFormat::Json, &["sessionId"]),
            expected
        );
    }
}
