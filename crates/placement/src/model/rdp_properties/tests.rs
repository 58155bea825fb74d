//! Rule F3's parser: good lists, each kind of bad entry, and the property
//! that any string is either refused or reads back as what it gave.

use super::*;
use proptest::prelude::*;

fn lines(list: &str) -> Vec<String> {
    parse_rdp_properties(list)
        .expect("accepted")
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn problems(list: &str) -> Vec<String> {
    parse_rdp_properties(list)
        .expect_err("refused")
        .problems()
        .to_vec()
}

#[test]
fn empty_or_absent_is_no_property() {
    for list in ["", " ", "   "] {
        assert_eq!(parse_rdp_properties(list), Ok(Vec::new()), "{list:?}");
    }
}

#[test]
fn good_lists_are_taken() {
    assert_eq!(
        lines(
            "audiomode:i:0;RedirectClipboard:i:0;drivestoredirect:s:*; Use Multimon : i : 1 ;\
             session bpp:i:24;kdcproxyname:s:gw.contoso.com:443;desktopscalefactor:i:150;"
        ),
        [
            "audiomode:i:0",
            "redirectclipboard:i:0",
            "drivestoredirect:s:*",
            "use multimon:i:1",
            "session bpp:i:24",
            "kdcproxyname:s:gw.contoso.com:443",
            "desktopscalefactor:i:150",
        ]
    );
    for list in [
        "camerastoredirect:s:",
        "camerastoredirect:s:*",
        "devicestoredirect:s:DynamicDevices",
        "drivestoredirect:s:DynamicDrives",
        "drivestoredirect:s:C:\\",
        "drivestoredirect:s:d:",
        "usbdevicestoredirect:s:*",
        "desktopwidth:i:200",
        "desktopheight:i:8192",
        "screen mode id:i:1",
        "authentication level:i:0",
        "kdcproxyname:s:kdc",
        "keyboardhook:i:2",
        "redirected video capture encoding quality:i:2",
    ] {
        assert_eq!(lines(list).len(), 1, "{list}");
    }
}

#[test]
fn unknown_properties_are_named() {
    let p = problems("audiomode:i:0;colordepth:i:3;x:s:y");
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].contains("\"colordepth\"") && p[0].contains("not a property"));
    assert!(p[1].contains("\"x\""));
}

#[test]
fn the_brokers_own_properties_are_refused_as_such() {
    for list in [
        "full address:s:evil.example:3389",
        "alternate shell:s:cmd.exe",
        "loadbalanceinfo:s:tsv://MS Terminal Services Plugin.1.other",
        "gatewayhostname:s:evil.example",
        "GatewayAccessToken:s:x",
        "remoteapplicationmode:i:1",
        "remoteapplicationprogram:s:||calc",
        "username:s:admin",
        "domain:s:CONTOSO",
        "password 51:b:0102",
        "alternate full address:s:evil.example",
        "prompt for credentials:i:1",
    ] {
        let p = problems(list);
        assert_eq!(p.len(), 1, "{list}: {p:?}");
        assert!(
            p[0].contains("the broker writes this property"),
            "{list}: {p:?}"
        );
    }
}

#[test]
fn wrong_types_are_named() {
    let p = problems("audiomode:s:0");
    assert!(
        p[0].contains("\"audiomode\"") && p[0].contains("it takes i"),
        "{p:?}"
    );
    let p = problems("drivestoredirect:i:1");
    assert!(p[0].contains("it takes s"), "{p:?}");
    let p = problems("audiomode:b:0");
    assert!(p[0].contains("type \"b\""), "{p:?}");
    let p = problems("audiomode::i:0");
    assert!(p[0].contains("type \"\""), "{p:?}");
}

#[test]
fn bad_values_are_named_with_what_is_allowed() {
    for (list, says) in [
        ("audiomode:i:3", "from 0 to 2"),
        ("audiomode:i:-1", "from 0 to 2"),
        ("audiomode:i:+1", "from 0 to 2"),
        ("audiomode:i:1:2", "from 0 to 2"),
        ("audiomode:i:", "from 0 to 2"),
        ("audiomode:i:99999999999999999999", "from 0 to 2"),
        ("desktopwidth:i:199", "from 200 to 8192"),
        ("desktopscalefactor:i:110", "one of 100, 125"),
        ("session bpp:i:8", "one of 15, 16, 24, 32"),
        ("screen mode id:i:0", "from 1 to 2"),
        ("drivestoredirect:s:\\\\server\\share", "DynamicDrives"),
        ("drivestoredirect:s:CD:", "DynamicDrives"),
        ("camerastoredirect:s:\\\\?\\usb#vid_0bda", "every camera"),
        ("kdcproxyname:s:https://gw.contoso.com", "DNS name"),
        ("kdcproxyname:s:gw.contoso.com:0", "DNS name"),
        ("kdcproxyname:s:gw..contoso.com", "DNS name"),
        ("kdcproxyname:s:-gw.contoso.com", "DNS name"),
        ("kdcproxyname:s:", "DNS name"),
    ] {
        let p = problems(list);
        assert_eq!(p.len(), 1, "{list}: {p:?}");
        assert!(
            p[0].contains("is not allowed") && p[0].contains(says),
            "{list}: {p:?}"
        );
    }
}

#[test]
fn a_property_given_twice_is_refused() {
    let p = problems("audiomode:i:0;AudioMode:i:1");
    assert_eq!(p, ["\"audiomode\": given twice"]);
}

#[test]
fn control_characters_are_refused_wherever_they_are() {
    for list in [
        "audiomode:i:0\r\nalternate shell:s:cmd",
        "audiomode:i:0;\n",
        "\t",
        "drivestoredirect:s:*\u{7f}",
        "kdcproxyname:s:gw\u{0}",
    ] {
        let p = problems(list);
        assert!(p.iter().any(|p| p.contains("control")), "{list:?}: {p:?}");
        assert!(
            p.iter().all(|p| !p.contains('\n') && !p.contains('\r')),
            "{p:?}"
        );
    }
}

#[test]
fn separator_misuse_is_named() {
    let p = problems(";audiomode:i:0");
    assert!(p[0].contains("entry 1 is empty"), "{p:?}");
    let p = problems("audiomode:i:0;;redirectclipboard:i:0");
    assert!(p[0].contains("entry 2 is empty"), "{p:?}");
    let p = problems("audiomode:i:0;;");
    assert!(p[0].contains("entry 2 is empty"), "{p:?}");
    let p = problems("audiomode=0");
    assert!(p[0].contains("not name:type:value"), "{p:?}");
    let p = problems("audiomode:i");
    assert!(p[0].contains("not name:type:value"), "{p:?}");
    let p = problems(":i:0");
    assert!(p[0].contains("no name"), "{p:?}");
    // A drive list in the .rdp file's own syntax splits into entries.
    let p = problems("drivestoredirect:s:C:\\;D:\\");
    assert!(
        p[0].contains("entry 2") && p[0].contains("not name:type:value"),
        "{p:?}"
    );
}

#[test]
fn every_bad_entry_is_named_in_one_refusal() {
    let p = problems("audiomode:i:9;full address:s:x;nope:i:1;redirectclipboard:i:1");
    assert_eq!(p.len(), 3, "{p:?}");
}

#[test]
fn bounds_hold() {
    let many: Vec<String> = (0..=MAX_RDP_PROPERTIES)
        .map(|_| "audiomode:i:0".into())
        .collect();
    let p = problems(&many.join(";"));
    assert_eq!(p, [format!("65 properties; at most {MAX_RDP_PROPERTIES}")]);

    let long = format!("audiomode:i:0;{}", " ".repeat(MAX_RDP_PROPERTIES_BYTES));
    let p = problems(&long);
    assert!(p[0].contains("at most 4096"), "{p:?}");

    let value = "a".repeat(MAX_RDP_STRING_VALUE_CHARS + 1);
    let p = problems(&format!("kdcproxyname:s:{value}"));
    assert!(p[0].contains("longer than 512"), "{p:?}");

    // Each bad entry is named, but a refusal lists a bounded number.
    let bad: Vec<String> = (0..40).map(|i| format!("bad{i}:i:0")).collect();
    let p = problems(&bad.join(";"));
    assert_eq!(p.len(), MAX_PROBLEMS_LISTED + 1);
    assert_eq!(p.last().map(String::as_str), Some("and 24 more"));
    // A quoted entry is cut.
    let p = problems(&format!("{}:i:0", "x".repeat(300)));
    assert!(p[0].len() < 200, "{p:?}");
}

#[test]
fn the_formatted_list_reads_back_the_same() {
    let list = "AudioMode:i:01; drivestoredirect : s : DynamicDrives;kdcproxyname:s:gw:443;";
    let parsed = parse_rdp_properties(list).expect("accepted");
    let formatted = format_rdp_properties(&parsed);
    assert_eq!(
        formatted,
        "audiomode:i:1;drivestoredirect:s:DynamicDrives;kdcproxyname:s:gw:443"
    );
    assert_eq!(parse_rdp_properties(&formatted), Ok(parsed));
}

/// Strings made of the pieces lists are made of, so that many are valid.
fn list_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("audiomode".to_string()),
        Just("screen mode id".to_string()),
        Just("drivestoredirect".to_string()),
        Just("kdcproxyname".to_string()),
        Just("full address".to_string()),
        Just(":".to_string()),
        Just(";".to_string()),
        Just("i".to_string()),
        Just("s".to_string()),
        Just("*".to_string()),
        Just(" ".to_string()),
        "[0-9]{1,3}",
        "[a-z.]{1,8}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

proptest! {
    /// Any string is refused with at least one problem, or its properties
    /// format to a list that reads back as the same properties, with no
    /// control character and no more than the bounds allow.
    #[test]
    fn any_string_is_refused_or_round_trips(list in prop_oneof![list_like(), any::<String>()]) {
        match parse_rdp_properties(&list) {
            Ok(parsed) => {
                prop_assert!(parsed.len() <= MAX_RDP_PROPERTIES);
                let formatted = format_rdp_properties(&parsed);
                prop_assert!(!formatted.chars().any(char::is_control));
                prop_assert_eq!(parse_rdp_properties(&formatted), Ok(parsed.clone()));
                for p in &parsed {
                    prop_assert!(!broker_owned(p.name()));
                }
            }
            Err(e) => {
                prop_assert!(!e.problems().is_empty());
                prop_assert!(!e.to_string().chars().any(char::is_control));
            }
        }
    }
}
