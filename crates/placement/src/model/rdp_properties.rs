//! Rule F3: a pool's own RDP properties (`customRdpProperties`, Azure
//! Virtual Desktop's `customRdpProperty`), written into every `.rdp` file
//! the pool's users get.
//!
//! The syntax is AVD's: `name:type:value` entries separated by `;` (one
//! `;` may end the list), `type` being `i` (a whole number) or `s` (a
//! string). Only the properties in [`ALLOWED`] are taken, each with the
//! values RDP clients honour; the properties that say where and as whom a
//! client connects (`full address`, `loadbalanceinfo`, `gateway…`,
//! `remoteapplication…`, `alternate shell`, `username`, …) are the broker's
//! to write and are refused. A list is parsed whole and refused whole,
//! with every bad entry named, so nothing half-checked is ever stored.
//!
//! [`RdpProperty`] can only be made by [`parse_rdp_properties`], so a
//! property the writer gets is always one of the list with a checked value
//! and no control character.

use std::fmt;

/// The most properties one pool may set.
pub const MAX_RDP_PROPERTIES: usize = 64;
/// The longest `customRdpProperties`, in bytes.
pub const MAX_RDP_PROPERTIES_BYTES: usize = 4096;
/// The longest string (`s`) value, in characters.
pub const MAX_RDP_STRING_VALUE_CHARS: usize = 512;
/// The most problems one refusal lists, so that its message stays bounded.
const MAX_PROBLEMS_LISTED: usize = 16;
/// The most characters of a bad entry quoted back in a problem.
const MAX_QUOTED_CHARS: usize = 48;

/// The values a property takes.
enum Allowed {
    /// A whole number from `min` to `max`.
    Range(i64, i64),
    /// One of these whole numbers.
    OneOf(&'static [i64]),
    /// A string the function accepts, and how to describe what it accepts.
    Text(fn(&str) -> bool, &'static str),
}

/// The properties a pool may set, with their values (AVD's "Supported RDP
/// properties"). Names are matched without regard to ASCII case.
const ALLOWED: &[(&str, Allowed)] = &[
    // Devices and redirection.
    ("audiocapturemode", Allowed::Range(0, 1)),
    ("audiomode", Allowed::Range(0, 2)),
    (
        "camerastoredirect",
        Allowed::Text(star_or_empty, "* (every camera) or empty (none)"),
    ),
    (
        "devicestoredirect",
        Allowed::Text(
            devices,
            "* (every device), DynamicDevices (devices plugged in later) or empty (none)",
        ),
    ),
    (
        "drivestoredirect",
        Allowed::Text(
            drives,
            "* (every drive), DynamicDrives (drives plugged in later), one drive such as \
             C:\\, or empty (none)",
        ),
    ),
    ("redirectclipboard", Allowed::Range(0, 1)),
    ("redirectcomports", Allowed::Range(0, 1)),
    ("redirectlocation", Allowed::Range(0, 1)),
    ("redirectprinters", Allowed::Range(0, 1)),
    ("redirectsmartcards", Allowed::Range(0, 1)),
    ("redirectwebauthn", Allowed::Range(0, 1)),
    (
        "usbdevicestoredirect",
        Allowed::Text(star_or_empty, "* (every USB device) or empty (none)"),
    ),
    ("keyboardhook", Allowed::Range(0, 2)),
    ("videoplaybackmode", Allowed::Range(0, 1)),
    ("encode redirected video capture", Allowed::Range(0, 1)),
    (
        "redirected video capture encoding quality",
        Allowed::Range(0, 2),
    ),
    // Display.
    ("use multimon", Allowed::Range(0, 1)),
    ("maximizetocurrentdisplays", Allowed::Range(0, 1)),
    ("singlemoninwindowedmode", Allowed::Range(0, 1)),
    ("screen mode id", Allowed::Range(1, 2)),
    ("smart sizing", Allowed::Range(0, 1)),
    ("dynamic resolution", Allowed::Range(0, 1)),
    ("desktopwidth", Allowed::Range(200, 8192)),
    ("desktopheight", Allowed::Range(200, 8192)),
    (
        "desktopscalefactor",
        Allowed::OneOf(&[100, 125, 150, 175, 200, 250, 300, 400, 500]),
    ),
    ("session bpp", Allowed::OneOf(&[15, 16, 24, 32])),
    ("allow font smoothing", Allowed::Range(0, 1)),
    // Connection and session behaviour.
    ("compression", Allowed::Range(0, 1)),
    ("networkautodetect", Allowed::Range(0, 1)),
    ("bandwidthautodetect", Allowed::Range(0, 1)),
    ("autoreconnection enabled", Allowed::Range(0, 1)),
    ("disableconnectionsharing", Allowed::Range(0, 1)),
    // Authentication.
    ("authentication level", Allowed::Range(0, 3)),
    ("enablecredsspsupport", Allowed::Range(0, 1)),
    ("enablerdsaadauth", Allowed::Range(0, 1)),
    ("targetisaadjoined", Allowed::Range(0, 1)),
    (
        "kdcproxyname",
        Allowed::Text(dns_name_and_port, "a DNS name, with :PORT or without"),
    ),
];

/// Whether a property says where or as whom a client connects, which only
/// the broker writes (`name` in lower case).
fn broker_owned(name: &str) -> bool {
    matches!(
        name,
        "full address"
            | "alternate full address"
            | "server port"
            | "alternate shell"
            | "shell working directory"
            | "loadbalanceinfo"
            | "username"
            | "domain"
            | "password 51"
            | "prompt for credentials"
    ) || name.starts_with("gateway")
        || name.starts_with("remoteapplication")
}

fn star_or_empty(v: &str) -> bool {
    v.is_empty() || v == "*"
}

fn devices(v: &str) -> bool {
    star_or_empty(v) || v.eq_ignore_ascii_case("DynamicDevices")
}

fn drives(v: &str) -> bool {
    if star_or_empty(v) || v.eq_ignore_ascii_case("DynamicDrives") {
        return true;
    }
    let b = v.as_bytes();
    matches!(b, [letter, b':'] | [letter, b':', b'\\'] if letter.is_ascii_alphabetic())
}

/// A DNS name (letters, digits and `-` in labels of 1 to 63, 253 in all),
/// optionally followed by `:` and a port from 1 to 65535.
fn dns_name_and_port(v: &str) -> bool {
    let (name, port) = match v.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (v, None),
    };
    if let Some(port) = port
        && !(port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0))
    {
        return false;
    }
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl Allowed {
    fn kind(&self) -> char {
        match self {
            Allowed::Range(..) | Allowed::OneOf(_) => 'i',
            Allowed::Text(..) => 's',
        }
    }

    fn describe(&self) -> String {
        match self {
            Allowed::Range(min, max) => format!("a whole number from {min} to {max}"),
            Allowed::OneOf(values) => {
                let values: Vec<String> = values.iter().map(ToString::to_string).collect();
                format!("one of {}", values.join(", "))
            }
            Allowed::Text(_, what) => (*what).to_string(),
        }
    }

    /// The value, checked; `None` when the property does not take it.
    fn check(&self, value: &str) -> Option<RdpValue> {
        match self {
            Allowed::Range(..) | Allowed::OneOf(_) => {
                // Digits only: no sign, no spaces, and few enough to fit.
                if value.is_empty() || value.len() > 9 || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                let n: i64 = value.parse().ok()?;
                let ok = match self {
                    Allowed::Range(min, max) => (*min..=*max).contains(&n),
                    Allowed::OneOf(values) => values.contains(&n),
                    Allowed::Text(..) => false,
                };
                ok.then_some(RdpValue::Number(n))
            }
            Allowed::Text(accepts, _) => accepts(value).then(|| RdpValue::Text(value.to_string())),
        }
    }
}

/// One property of a pool's list, checked: its name is one of the list's
/// (in its canonical spelling) and its value one the property takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdpProperty {
    name: &'static str,
    value: RdpValue,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum RdpValue {
    Number(i64),
    Text(String),
}

impl RdpProperty {
    /// The property's name, in lower case as the list spells it.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// The property as a line of an `.rdp` file, without its line end:
/// `name:i:1` or `name:s:value`.
impl fmt::Display for RdpProperty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            RdpValue::Number(n) => write!(f, "{}:i:{n}", self.name),
            RdpValue::Text(s) => write!(f, "{}:s:{s}", self.name),
        }
    }
}

/// Why a list of RDP properties was refused: every bad entry, each with
/// its reason (at most 16, then how many more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdpPropertiesError {
    problems: Vec<String>,
}

impl RdpPropertiesError {
    /// Each bad entry and its reason.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for RdpPropertiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("; "))
    }
}

/// `entry` quoted for a message: escaped (no control character reaches a
/// log or a terminal) and cut at [`MAX_QUOTED_CHARS`].
fn quote(entry: &str) -> String {
    let mut cut: String = entry.chars().take(MAX_QUOTED_CHARS).collect();
    if cut.len() < entry.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// Parses and checks a pool's `customRdpProperties`. Empty (or only
/// spaces) is no property. Spaces around names, types and values are
/// ignored; names are matched without regard to ASCII case.
pub fn parse_rdp_properties(list: &str) -> Result<Vec<RdpProperty>, RdpPropertiesError> {
    let refuse = |problem: String| RdpPropertiesError {
        problems: vec![problem],
    };
    if list.len() > MAX_RDP_PROPERTIES_BYTES {
        return Err(refuse(format!(
            "{} bytes; at most {MAX_RDP_PROPERTIES_BYTES}",
            list.len()
        )));
    }
    if list.trim().is_empty() {
        if let Some(c) = list.chars().find(|c| c.is_control()) {
            return Err(refuse(format!(
                "control character U+{:04X}: not allowed",
                u32::from(c)
            )));
        }
        return Ok(Vec::new());
    }
    let mut entries: Vec<&str> = list.split(';').collect();
    // One `;` may end the list, as AVD's own lists often do.
    if entries.len() > 1 && entries.last().is_some_and(|e| e.chars().all(|c| c == ' ')) {
        entries.pop();
    }
    if entries.len() > MAX_RDP_PROPERTIES {
        return Err(refuse(format!(
            "{} properties; at most {MAX_RDP_PROPERTIES}",
            entries.len()
        )));
    }
    let mut problems = Vec::new();
    let mut properties: Vec<RdpProperty> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        match parse_entry(i + 1, entry) {
            Ok(p) if properties.iter().any(|q| q.name == p.name) => {
                problems.push(format!("{:?}: given twice", p.name));
            }
            Ok(p) => properties.push(p),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        return Ok(properties);
    }
    if problems.len() > MAX_PROBLEMS_LISTED {
        let more = problems.len() - MAX_PROBLEMS_LISTED;
        problems.truncate(MAX_PROBLEMS_LISTED);
        problems.push(format!("and {more} more"));
    }
    Err(RdpPropertiesError { problems })
}

/// The `n`th entry (from 1), or why it is refused.
fn parse_entry(n: usize, entry: &str) -> Result<RdpProperty, String> {
    if entry.chars().any(char::is_control) {
        return Err(format!(
            "entry {n} {}: control characters are not allowed",
            quote(entry)
        ));
    }
    if entry.trim().is_empty() {
        return Err(format!(
            "entry {n} is empty: `;` separates properties, and only one may end the list"
        ));
    }
    let mut parts = entry.splitn(3, ':');
    let (Some(name), Some(kind), Some(value)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!(
            "entry {n} {}: not name:type:value (a `;` inside a value, or a `:` missing?)",
            quote(entry)
        ));
    };
    let name = name.trim().to_ascii_lowercase();
    let (kind, value) = (kind.trim(), value.trim());
    if name.is_empty() {
        return Err(format!("entry {n} {}: no name before `:`", quote(entry)));
    }
    if broker_owned(&name) {
        return Err(format!(
            "{}: the broker writes this property itself (it says where and as whom the \
             client connects); a pool cannot set it",
            quote(&name)
        ));
    }
    let Some((canonical, allowed)) = ALLOWED.iter().find(|(known, _)| *known == name) else {
        return Err(format!(
            "{}: not a property a pool may set (docs/gateway.md lists them)",
            quote(&name)
        ));
    };
    let expected = allowed.kind();
    if !(kind.len() == 1 && kind.eq_ignore_ascii_case(&expected.to_string())) {
        return Err(format!(
            "{canonical:?}: type {}; it takes {expected} ({})",
            quote(kind),
            allowed.describe()
        ));
    }
    if value.chars().count() > MAX_RDP_STRING_VALUE_CHARS {
        return Err(format!(
            "{canonical:?}: the value is longer than {MAX_RDP_STRING_VALUE_CHARS} characters"
        ));
    }
    match allowed.check(value) {
        Some(value) => Ok(RdpProperty {
            name: canonical,
            value,
        }),
        None => Err(format!(
            "{canonical:?}: {} is not allowed; it takes {}",
            quote(value),
            allowed.describe()
        )),
    }
}

/// The properties as a list in AVD's syntax, `;` between entries: what
/// [`parse_rdp_properties`] reads back as the same properties.
pub fn format_rdp_properties(properties: &[RdpProperty]) -> String {
    let lines: Vec<String> = properties.iter().map(ToString::to_string).collect();
    lines.join(";")
}

#[cfg(test)]
mod tests;
