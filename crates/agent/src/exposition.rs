//! A strict, bounded reader of the Prometheus text exposition format
//! (version 0.0.4), the format windows_exporter answers `/metrics` in.
//!
//! The text comes from a machine the agent does not control, so it is
//! untrusted input: every line is checked, every bound is named
//! ([`Limits`]), and anything the format does not allow is a
//! [`ParseError`] naming the line, never a panic. Only the series the
//! caller asks for are kept ([`parse`]'s `keep`), so a host that exports a
//! thousand other series costs the agent a pass over them and no memory.
//!
//! Why not a crate: the Rust crates we looked at for this format either
//! split label pairs on `,` and `=` without reading escapes (so the
//! exporter's `DOMAIN\\sam`, a backslash escaped as the format wants, would
//! come out with two backslashes, and a comma in a value would break the
//! line) or bound nothing. The grammar is small: a sample line is
//!
//! ```text
//! name [ "{" label "=" "\"" value "\"" { "," label "=" "\"" value "\"" } [ "," ] "}" ] number [ timestamp ]
//! ```
//!
//! with `\\`, `\"` and `\n` the only escapes in a label value. `#` lines
//! (HELP, TYPE, comments) and blank lines carry no samples. The fuzz
//! target `crates/agent/fuzz` and a round-trip property test keep it honest.

use std::fmt;

/// The bounds one answer is read within (rule W1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lines of text, every kind counted.
    pub lines_max: usize,
    /// Bytes of one label value, after unescaping.
    pub label_value_bytes_max: usize,
    /// Labels of one series.
    pub labels_per_series_max: usize,
}

/// Rule W1: at most 100,000 lines, label values of at most 1,024 bytes.
/// windows_exporter's series have at most six labels; 32 leaves room for
/// every collector we know and refuses a line built to cost memory.
pub const LIMITS: Limits = Limits {
    lines_max: 100_000,
    label_value_bytes_max: 1024,
    labels_per_series_max: 32,
};

/// One sample the caller kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// In the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the series has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a text is not a valid exposition: the line (1-based) and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("more than {max} lines")]
    TooManyLines { max: usize },
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
}

fn err(line: usize, what: impl fmt::Display) -> ParseError {
    ParseError::Line {
        line,
        what: what.to_string(),
    }
}

/// Reads the whole text and returns the samples whose metric name `keep`
/// accepts, in the order written. Any invalid line fails the whole text:
/// an answer that is partly garbage is not trusted in part.
pub fn parse(
    text: &str,
    limits: &Limits,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        if number > limits.lines_max {
            // A final empty piece after the last newline is no line.
            if number == limits.lines_max + 1 && line.is_empty() && text.ends_with('\n') {
                break;
            }
            return Err(ParseError::TooManyLines {
                max: limits.lines_max,
            });
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        if let Some(sample) = parse_sample(body, limits, &keep).map_err(|w| err(number, w))? {
            samples.push(sample);
        }
    }
    Ok(samples)
}

/// A cursor over one line's bytes.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_blanks(&mut self) -> bool {
        let start = self.at;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
        self.at > start
    }

    /// A name: `[A-Za-z_:][A-Za-z0-9_:]*` (colons only in metric names).
    fn name(&mut self, colons: bool) -> Option<&'a str> {
        let start = self.at;
        while let Some(c) = self.peek() {
            let ok = c.is_ascii_alphabetic()
                || c == b'_'
                || (colons && c == b':')
                || (self.at > start && c.is_ascii_digit());
            if !ok {
                break;
            }
            self.at += 1;
        }
        (self.at > start).then(|| &self.text[start..self.at])
    }

    /// A token up to the next blank or the end.
    fn word(&mut self) -> &'a str {
        let start = self.at;
        while !matches!(self.peek(), None | Some(b' ' | b'\t')) {
            self.at += 1;
        }
        &self.text[start..self.at]
    }
}

fn parse_sample(
    line: &str,
    limits: &Limits,
    keep: &impl Fn(&str) -> bool,
) -> Result<Option<Sample>, String> {
    let mut c = Cursor { text: line, at: 0 };
    let name = c
        .name(true)
        .ok_or("a sample line must start with a metric name")?;
    let kept = keep(name);
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut blank = c.skip_blanks();
    if c.peek() == Some(b'{') {
        c.at += 1;
        loop {
            c.skip_blanks();
            if c.peek() == Some(b'}') {
                c.at += 1;
                break;
            }
            let label = c.name(false).ok_or("expected a label name or '}'")?;
            c.skip_blanks();
            if c.peek() != Some(b'=') {
                return Err(format!("expected '=' after label {label}"));
            }
            c.at += 1;
            c.skip_blanks();
            if c.peek() != Some(b'"') {
                return Err(format!("the value of label {label} must be quoted"));
            }
            c.at += 1;
            let value = label_value(&mut c, limits.label_value_bytes_max)
                .map_err(|w| format!("label {label}: {w}"))?;
            if labels.iter().any(|(n, _)| n == label) {
                return Err(format!("label {label} is given twice"));
            }
            if labels.len() == limits.labels_per_series_max {
                return Err(format!(
                    "more than {} labels in one series",
                    limits.labels_per_series_max
                ));
            }
            labels.push((label.to_string(), value));
            c.skip_blanks();
            match c.peek() {
                Some(b',') => c.at += 1,
                Some(b'}') => {
                    c.at += 1;
                    break;
                }
                _ => return Err("expected ',' or '}' after a label".into()),
            }
        }
        blank = c.skip_blanks();
    }
    if !blank {
        return Err(match c.peek() {
            Some(_) => "expected a blank before the value",
            None => "the sample has no value",
        }
        .into());
    }
    let value = parse_value(c.word())?;
    if c.skip_blanks() && c.peek().is_some() {
        let ts = c.word();
        ts.parse::<i64>()
            .map_err(|_| format!("the timestamp {:?} is not an integer", shorten(ts)))?;
        c.skip_blanks();
    }
    if c.peek().is_some() {
        return Err("unexpected text after the sample".into());
    }
    Ok(kept.then(|| Sample {
        name: name.to_string(),
        labels,
        value,
    }))
}

/// Reads a quoted label value after its opening quote, through its closing
/// quote, unescaping `\\`, `\"` and `\n`.
fn label_value(c: &mut Cursor<'_>, max_bytes: usize) -> Result<String, String> {
    let mut value = String::new();
    loop {
        let rest = &c.text[c.at..];
        // The next quote or backslash; everything before it is literal.
        let Some(stop) = rest.find(['"', '\\']) else {
            return Err("the quoted value is not closed".into());
        };
        value.push_str(&rest[..stop]);
        c.at += stop;
        if value.len() > max_bytes {
            return Err(format!("value longer than {max_bytes} bytes"));
        }
        let b = c.peek();
        c.at += 1;
        if b == Some(b'"') {
            return Ok(value);
        }
        match c.peek() {
            Some(b'\\') => value.push('\\'),
            Some(b'"') => value.push('"'),
            Some(b'n') => value.push('\n'),
            _ => return Err("invalid escape: only \\\\, \\\" and \\n are allowed".into()),
        }
        c.at += 1;
        if value.len() > max_bytes {
            return Err(format!("value longer than {max_bytes} bytes"));
        }
    }
}

/// A sample value as Go writes floats: decimal or exponent notation,
/// `NaN`, `+Inf`, `-Inf`.
fn parse_value(word: &str) -> Result<f64, String> {
    if word.is_empty() {
        return Err("the sample has no value".into());
    }
    match word {
        "NaN" => return Ok(f64::NAN),
        "+Inf" | "Inf" => return Ok(f64::INFINITY),
        "-Inf" => return Ok(f64::NEG_INFINITY),
        _ => {}
    }
    // Rust also reads "inf", "infinity" and "nan" in any case; the format
    // spells them only as above.
    let plain = word
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !plain {
        return Err(format!("the value {:?} is not a number", shorten(word)));
    }
    word.parse::<f64>()
        .map_err(|_| format!("the value {:?} is not a number", shorten(word)))
}

/// At most 40 characters of untrusted text, for an error message.
fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(40).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}

/// Writes a label value as the format wants it (the inverse of the
/// reading above); used by tests and the benchmark's fake exporters.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(text: &str) -> Result<Vec<Sample>, ParseError> {
        parse(text, &LIMITS, |_| true)
    }

    #[test]
    fn reads_what_windows_exporter_writes() {
        let text = concat!(
            "# HELP windows_terminal_services_session_info Terminal Services sessions info\n",
            "# TYPE windows_terminal_services_session_info gauge\n",
            "windows_terminal_services_session_info{host=\"\",id=\"2\",session_name=\"RDP-Tcp 0\",state=\"active\",user=\"CONTOSO\\\\alice\"} 1\n",
            "windows_cpu_time_total{core=\"0,0\",mode=\"idle\"} 12345.678\n",
            "windows_memory_available_bytes 1.2345e+09\n",
            "windows_exporter_build_info{branch=\"HEAD\",goversion=\"go1.24\",version=\"0.31.1\"} 1\n",
            "\n",
        );
        let samples = all(text).unwrap();
        assert_eq!(samples.len(), 4);
        assert_eq!(samples[0].label("user"), Some("CONTOSO\\alice"));
        assert_eq!(samples[0].label("session_name"), Some("RDP-Tcp 0"));
        assert_eq!(samples[0].value, 1.0);
        assert_eq!(samples[1].label("core"), Some("0,0"));
        assert_eq!(samples[1].value, 12345.678);
        assert_eq!(samples[2].labels, vec![]);
        assert_eq!(samples[2].value, 1.2345e9);
    }

    #[test]
    fn keeps_only_what_is_asked_for_but_checks_every_line() {
        let text = "a 1\nb{x=\"y\"} 2\nc 3\n";
        let kept = parse(text, &LIMITS, |n| n == "b").unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].label("x"), Some("y"));
        let bad = "a 1\nzzz{x=\"y} 2\n";
        assert!(parse(bad, &LIMITS, |n| n == "a").is_err());
    }

    #[test]
    fn special_values_timestamps_and_trailing_commas() {
        let s = all("a NaN\nb +Inf\nc -Inf 1700000000000\nd{x=\"1\",} 4\ne{} 5\n").unwrap();
        assert!(s[0].value.is_nan());
        assert_eq!(s[1].value, f64::INFINITY);
        assert_eq!(s[2].value, f64::NEG_INFINITY);
        assert_eq!(s[3].label("x"), Some("1"));
        assert_eq!(s[4].value, 5.0);
    }

    #[test]
    fn garbage_is_refused_with_the_line() {
        let cases: &[(&str, &str)] = &[
            (
                "<html>hello</html>",
                "line 1: a sample line must start with a metric name",
            ),
            ("a 1\nb", "line 2: the sample has no value"),
            ("a{x=\"1\" 2", "line 1: expected ',' or '}' after a label"),
            ("a{x=1} 2", "line 1: the value of label x must be quoted"),
            (
                "a{x=\"\\t\"} 2",
                "line 1: label x: invalid escape: only \\\\, \\\" and \\n are allowed",
            ),
            ("a{x=\"1\",x=\"2\"} 2", "line 1: label x is given twice"),
            (
                "a{x=\"open} 2",
                "line 1: label x: the quoted value is not closed",
            ),
            (
                "a infinity",
                "line 1: the value \"infinity\" is not a number",
            ),
            (
                "a 1 soon",
                "line 1: the timestamp \"soon\" is not an integer",
            ),
            ("a 1 2 3", "line 1: unexpected text after the sample"),
            ("a{x=\"1\"}2", "line 1: expected a blank before the value"),
        ];
        for (text, want) in cases {
            assert_eq!(all(text).unwrap_err().to_string(), *want, "{text}");
        }
    }

    #[test]
    fn bounds_are_enforced() {
        let limits = Limits {
            lines_max: 3,
            label_value_bytes_max: 4,
            labels_per_series_max: 2,
        };
        assert!(parse("a 1\nb 2\nc 3\n", &limits, |_| true).is_ok());
        assert_eq!(
            parse("a 1\nb 2\nc 3\nd 4\n", &limits, |_| true).unwrap_err(),
            ParseError::TooManyLines { max: 3 }
        );
        assert!(parse("a{x=\"1234\"} 1", &limits, |_| true).is_ok());
        let e = parse("a{x=\"12345\"} 1", &limits, |_| true).unwrap_err();
        assert_eq!(e.to_string(), "line 1: label x: value longer than 4 bytes");
        let e = parse(r#"a{x="1\\\\\\\\"} 1"#, &limits, |_| true).unwrap_err();
        assert_eq!(e.to_string(), "line 1: label x: value longer than 4 bytes");
        let e = parse("a{x=\"1\",y=\"2\",z=\"3\"} 1", &limits, |_| true).unwrap_err();
        assert_eq!(e.to_string(), "line 1: more than 2 labels in one series");
    }

    fn render(samples: &[Sample]) -> String {
        let mut out = String::new();
        for s in samples {
            out.push_str(&s.name);
            if !s.labels.is_empty() {
                out.push('{');
                for (i, (n, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&format!("{n}=\"{}\"", escape_label_value(v)));
                }
                out.push('}');
            }
            out.push_str(&format!(" {:?}\n", s.value));
        }
        out
    }

    fn sample() -> impl Strategy<Value = Sample> {
        (
            "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}",
            proptest::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,10}", ".{0,40}", 0..5),
            proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
        )
            .prop_map(|(name, labels, value)| Sample {
                name,
                labels: labels.into_iter().collect(),
                value,
            })
    }

    proptest! {
        /// Whatever a correct writer writes, with any characters in label
        /// values (backslashes, quotes, newlines, any Unicode), reads back
        /// as written.
        #[test]
        fn what_is_written_reads_back(samples in proptest::collection::vec(sample(), 0..20)) {
            let text = render(&samples);
            let read = all(&text).unwrap();
            prop_assert_eq!(read, samples);
        }

        /// Any text either reads or is refused; what reads honours the bounds.
        #[test]
        fn any_text_reads_or_is_refused(text in ".{0,200}") {
            if let Ok(samples) = all(&text) {
                for s in samples {
                    prop_assert!(s.labels.len() <= LIMITS.labels_per_series_max);
                    for (_, v) in &s.labels {
                        prop_assert!(v.len() <= LIMITS.label_value_bytes_max);
                    }
                }
            }
        }
    }
}
