//! A strict, bounded reader of the Prometheus text exposition format
//! (version 0.0.4), the format windows_exporter answers `/metrics` in.
//!
//! The text comes from a machine the agent does not control, so it is
//! untrusted input: every line is checked, every bound is named
//! ([`Limits`]), and anything the format does not allow is a
//! [`ParseError`] naming the line, never a panic. Only the series and
//! labels the caller asks for are kept ([`parse`]'s `keep`, a [`Keep`]),
//! so a host that exports a thousand other series, or adds labels to the
//! ones read, costs the agent a pass over them and no memory; what is kept
//! is bounded too ([`Limits::samples_kept_max`], [`Limits::kept_bytes_max`]).
//! An error says what is wrong in the reader's own words and where; the
//! text at fault is only in its [`ParseError::detail`], for a log.
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

/// The bounds one answer is read within (rule W1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lines of text, every kind counted.
    pub lines_max: usize,
    /// Bytes of one label value, after unescaping.
    pub label_value_bytes_max: usize,
    /// Labels of one series.
    pub labels_per_series_max: usize,
    /// Samples kept from one text.
    pub samples_kept_max: usize,
    /// Bytes the kept samples of one text may hold, as [`Sample::held_bytes`]
    /// counts them.
    pub kept_bytes_max: usize,
}

/// Rule W1: at most 100,000 lines, label values of at most 1,024 bytes.
/// windows_exporter's series have at most six labels; 32 leaves room for
/// every collector we know and refuses a line built to cost memory. Of
/// what the agent reads, a host sends one sample per session (the state it
/// is in), five per CPU core, a few per volume and two per collector:
/// 16,384 samples are four times the sessions a heartbeat may list, and
/// 2 MiB of them is half of what the answer itself may be, so what one
/// scrape keeps never costs more than its answer.
pub const LIMITS: Limits = Limits {
    lines_max: 100_000,
    label_value_bytes_max: 1024,
    labels_per_series_max: 32,
    samples_kept_max: 16_384,
    kept_bytes_max: 2 * 1024 * 1024,
};

/// What the caller keeps of the series of one metric name. Every line is
/// checked whole whatever is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Nothing: the series costs a pass over its lines and no memory.
    Nothing,
    /// Every sample, with every label.
    Whole,
    /// Every sample, with only the labels named.
    Labels(&'static [&'static str]),
    /// Only the samples whose value is 1, with only the labels named: a
    /// state set or an info series, where 1 marks the series in force and
    /// the others (0) say nothing more.
    LabelsWhenOne(&'static [&'static str]),
}

impl Keep {
    fn label(&self, name: &str) -> bool {
        match self {
            Keep::Nothing => false,
            Keep::Whole => true,
            Keep::Labels(names) | Keep::LabelsWhenOne(names) => names.contains(&name),
        }
    }
}

/// One sample the caller kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// In the order written; only those the caller keeps.
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

    /// The bytes this sample holds: its own size, its name, and each
    /// label's pair and text (what [`Limits::kept_bytes_max`] bounds).
    pub fn held_bytes(&self) -> usize {
        std::mem::size_of::<Sample>()
            + self.name.len()
            + self
                .labels
                .iter()
                .map(|(n, v)| std::mem::size_of::<(String, String)>() + n.len() + v.len())
                .sum::<usize>()
    }
}

/// Why a text is not a valid exposition, in the reader's own words: line
/// numbers, bounds and fixed descriptions, never the text read (its
/// [`Display`](std::fmt::Display) may be shown to anyone who reads the host).
/// What the text said there is in [`ParseError::detail`], for a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("more than {max} lines")]
    TooManyLines { max: usize },
    #[error("more than {max} samples of the series read")]
    TooManySamples { max: usize },
    #[error("the series read hold more than {max} bytes")]
    TooManyBytes { max: usize },
    #[error("line {line}: a label value is longer than {max} bytes")]
    LabelTooLong { line: usize, max: usize },
    #[error("line {line}: more than {max} labels in one series")]
    TooManyLabels { line: usize, max: usize },
    #[error("line {line}: {what}")]
    Line {
        line: usize,
        what: &'static str,
        /// At most [`DETAIL_CHARS`] characters of the text at fault.
        detail: Option<String>,
    },
}

impl ParseError {
    /// The start of the text at fault, when there is one: untrusted text,
    /// for the agent's own log only.
    pub fn detail(&self) -> Option<&str> {
        match self {
            ParseError::Line { detail, .. } => detail.as_deref(),
            _ => None,
        }
    }
}

/// The most of the text at fault a [`ParseError`] carries.
pub const DETAIL_CHARS: usize = 40;

/// What is wrong with one line: a bound passed, or a fixed description
/// and, for the log, the text at fault.
enum Bad {
    LabelTooLong,
    TooManyLabels,
    Fixed {
        what: &'static str,
        detail: Option<String>,
    },
}

impl Bad {
    fn at(what: &'static str, text: &str) -> Bad {
        Bad::Fixed {
            what,
            detail: Some(shorten(text)),
        }
    }

    fn on_line(self, line: usize, limits: &Limits) -> ParseError {
        match self {
            Bad::LabelTooLong => ParseError::LabelTooLong {
                line,
                max: limits.label_value_bytes_max,
            },
            Bad::TooManyLabels => ParseError::TooManyLabels {
                line,
                max: limits.labels_per_series_max,
            },
            Bad::Fixed { what, detail } => ParseError::Line { line, what, detail },
        }
    }
}

impl From<&'static str> for Bad {
    fn from(what: &'static str) -> Bad {
        Bad::Fixed { what, detail: None }
    }
}

/// Reads the whole text and returns the samples of the series `keep`
/// keeps, in the order written, with the labels it keeps. Any invalid
/// line fails the whole text: an answer that is partly garbage is not
/// trusted in part; so does an answer whose kept samples exceed
/// [`Limits::samples_kept_max`] or [`Limits::kept_bytes_max`].
pub fn parse(
    text: &str,
    limits: &Limits,
    keep: impl Fn(&str) -> Keep,
) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    let mut held = 0usize;
    let mut pieces = text.split('\n').peekable();
    let mut number = 0usize;
    while let Some(line) = pieces.next() {
        number += 1;
        if number > limits.lines_max {
            // The empty piece after a final newline is no line; an empty
            // line with more after it is one, and one too many.
            if line.is_empty() && pieces.peek().is_none() {
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
        let sample = parse_sample(body, limits, &keep).map_err(|b| b.on_line(number, limits))?;
        if let Some(sample) = sample {
            if samples.len() == limits.samples_kept_max {
                return Err(ParseError::TooManySamples {
                    max: limits.samples_kept_max,
                });
            }
            held += sample.held_bytes();
            if held > limits.kept_bytes_max {
                return Err(ParseError::TooManyBytes {
                    max: limits.kept_bytes_max,
                });
            }
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
    keep: &impl Fn(&str) -> Keep,
) -> Result<Option<Sample>, Bad> {
    let mut c = Cursor { text: line, at: 0 };
    let name = c
        .name(true)
        .ok_or_else(|| Bad::at("a sample line must start with a metric name", line))?;
    let kept = keep(name);
    // Every label's name, to refuse one given twice; only the kept ones'
    // values.
    let mut seen: Vec<&str> = Vec::new();
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
                return Err(Bad::at("expected '=' after a label name", label));
            }
            c.at += 1;
            c.skip_blanks();
            if c.peek() != Some(b'"') {
                return Err(Bad::at("a label value must be quoted", label));
            }
            c.at += 1;
            let value = label_value(&mut c, limits.label_value_bytes_max).map_err(|b| match b {
                Bad::Fixed { what, .. } => Bad::at(what, label),
                other => other,
            })?;
            if seen.contains(&label) {
                return Err(Bad::at("a label is given twice", label));
            }
            if seen.len() == limits.labels_per_series_max {
                return Err(Bad::TooManyLabels);
            }
            seen.push(label);
            if kept.label(label) {
                labels.push((label.to_string(), value));
            }
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
            .map_err(|_| Bad::at("the timestamp is not an integer", ts))?;
        c.skip_blanks();
    }
    if c.peek().is_some() {
        return Err(Bad::at("unexpected text after the sample", &c.text[c.at..]));
    }
    let kept = match kept {
        Keep::Nothing => false,
        Keep::LabelsWhenOne(_) => value == 1.0,
        Keep::Whole | Keep::Labels(_) => true,
    };
    Ok(kept.then(|| Sample {
        name: name.to_string(),
        labels,
        value,
    }))
}

/// Reads a quoted label value after its opening quote, through its closing
/// quote, unescaping `\\`, `\"` and `\n`.
fn label_value(c: &mut Cursor<'_>, max_bytes: usize) -> Result<String, Bad> {
    let mut value = String::new();
    loop {
        let rest = &c.text[c.at..];
        // The next quote or backslash; everything before it is literal.
        let Some(stop) = rest.find(['"', '\\']) else {
            return Err("a quoted label value is not closed".into());
        };
        value.push_str(&rest[..stop]);
        c.at += stop;
        if value.len() > max_bytes {
            return Err(Bad::LabelTooLong);
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
            _ => {
                return Err(
                    "invalid escape in a label value: only \\\\, \\\" and \\n are allowed".into(),
                );
            }
        }
        c.at += 1;
        if value.len() > max_bytes {
            return Err(Bad::LabelTooLong);
        }
    }
}

/// A sample value as Go writes floats: decimal or exponent notation,
/// `NaN`, `+Inf`, `-Inf`.
fn parse_value(word: &str) -> Result<f64, Bad> {
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
        return Err(Bad::at("the sample's value is not a number", word));
    }
    word.parse::<f64>()
        .map_err(|_| Bad::at("the sample's value is not a number", word))
}

/// At most [`DETAIL_CHARS`] characters of untrusted text, for a log.
fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(DETAIL_CHARS).collect();
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
        parse(text, &LIMITS, |_| Keep::Whole)
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
        let only_b = |n: &str| if n == "b" { Keep::Whole } else { Keep::Nothing };
        let kept = parse(text, &LIMITS, only_b).unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].label("x"), Some("y"));
        let bad = "a 1\nzzz{x=\"y} 2\n";
        assert!(parse(bad, &LIMITS, only_b).is_err());
    }

    #[test]
    fn keeps_only_the_labels_and_states_asked_for() {
        let text = "s{id=\"1\",state=\"active\",pad=\"xxxx\"} 1\n\
                    s{id=\"1\",state=\"idle\",pad=\"xxxx\"} 0\n\
                    t{mode=\"idle\",core=\"0,0\"} 7\n";
        let keep = |n: &str| match n {
            "s" => Keep::LabelsWhenOne(&["id", "state"]),
            "t" => Keep::Labels(&["mode"]),
            _ => Keep::Nothing,
        };
        let kept = parse(text, &LIMITS, keep).unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(
            kept[0].labels,
            vec![("id".into(), "1".into()), ("state".into(), "active".into())]
        );
        assert_eq!(kept[1].labels, vec![("mode".into(), "idle".into())]);
        assert_eq!(kept[1].value, 7.0);
        // A label dropped is still checked.
        let twice = "t{mode=\"idle\",core=\"0\",core=\"1\"} 7\n";
        assert!(parse(twice, &LIMITS, keep).is_err());
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
        // The error is in the reader's words; what the text said is only
        // in the detail.
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "<html>hello</html>",
                "line 1: a sample line must start with a metric name",
                Some("<html>hello</html>"),
            ),
            ("a 1\nb", "line 2: the sample has no value", None),
            (
                "a{x=\"1\" 2",
                "line 1: expected ',' or '}' after a label",
                None,
            ),
            (
                "a{x=1} 2",
                "line 1: a label value must be quoted",
                Some("x"),
            ),
            (
                "a{x=\"\\t\"} 2",
                "line 1: invalid escape in a label value: only \\\\, \\\" and \\n are allowed",
                Some("x"),
            ),
            (
                "a{x=\"1\",x=\"2\"} 2",
                "line 1: a label is given twice",
                Some("x"),
            ),
            (
                "a{x=\"open} 2",
                "line 1: a quoted label value is not closed",
                Some("x"),
            ),
            (
                "a infinity",
                "line 1: the sample's value is not a number",
                Some("infinity"),
            ),
            (
                "a 1 soon",
                "line 1: the timestamp is not an integer",
                Some("soon"),
            ),
            (
                "a 1 2 3",
                "line 1: unexpected text after the sample",
                Some("3"),
            ),
            (
                "a{x=\"1\"}2",
                "line 1: expected a blank before the value",
                None,
            ),
        ];
        for (text, want, detail) in cases {
            let e = all(text).unwrap_err();
            assert_eq!(e.to_string(), *want, "{text}");
            assert_eq!(e.detail(), *detail, "{text}");
        }
        // The detail is short.
        let long = format!("secret: {}", "s".repeat(100));
        let e = all(&long).unwrap_err();
        assert!(!e.to_string().contains("secret"), "{e}");
        assert_eq!(e.detail().unwrap().chars().count(), DETAIL_CHARS + 1);
    }

    #[test]
    fn bounds_are_enforced() {
        let limits = Limits {
            lines_max: 3,
            label_value_bytes_max: 4,
            labels_per_series_max: 2,
            samples_kept_max: 3,
            kept_bytes_max: 1024,
        };
        let whole = |_: &str| Keep::Whole;
        assert!(parse("a 1\nb 2\nc 3\n", &limits, whole).is_ok());
        assert_eq!(
            parse("a 1\nb 2\nc 3\nd 4\n", &limits, whole).unwrap_err(),
            ParseError::TooManyLines { max: 3 }
        );
        // An empty line at the bound ends the text only when it is the
        // last piece, after the final newline.
        for text in [
            "a 1\nb 2\nc 3\n\nd 4\n",
            "a 1\nb 2\nc 3\n\n\n",
            "a 1\nb 2\nc 3\n\n",
        ] {
            assert_eq!(
                parse(text, &limits, whole).unwrap_err(),
                ParseError::TooManyLines { max: 3 },
                "{text:?}"
            );
        }
        assert!(parse("a{x=\"1234\"} 1", &limits, whole).is_ok());
        let e = parse("a{x=\"12345\"} 1", &limits, whole).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: a label value is longer than 4 bytes"
        );
        let e = parse(r#"a{x="1\\\\\\\\"} 1"#, &limits, whole).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: a label value is longer than 4 bytes"
        );
        let e = parse("a{x=\"1\",y=\"2\",z=\"3\"} 1", &limits, whole).unwrap_err();
        assert_eq!(e.to_string(), "line 1: more than 2 labels in one series");

        // What is kept is bounded in samples and in bytes; what is not
        // kept costs nothing.
        let four = "a 1\nb 2\n# c\n";
        assert!(parse(four, &limits, whole).is_ok());
        let limits = Limits {
            lines_max: 100,
            ..limits
        };
        assert_eq!(
            parse("a 1\nb 2\nc 3\nd 4\n", &limits, whole).unwrap_err(),
            ParseError::TooManySamples { max: 3 }
        );
        assert!(
            parse("a 1\nb 2\nc 3\nd 4\n", &limits, |n| if n == "d" {
                Keep::Nothing
            } else {
                Keep::Whole
            })
            .is_ok()
        );
        let limits = Limits {
            samples_kept_max: 100,
            kept_bytes_max: 3 * std::mem::size_of::<Sample>(),
            ..limits
        };
        assert!(parse("a 1\nb 2\n", &limits, whole).is_ok());
        assert_eq!(
            parse("a 1\nb 2\nc 3\n", &limits, whole).unwrap_err(),
            ParseError::TooManyBytes {
                max: 3 * std::mem::size_of::<Sample>()
            }
        );
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
                prop_assert!(samples.len() <= LIMITS.samples_kept_max);
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
