//! The `.rdp` connection file that points an RDP client at the front door
//! for one pool (`GET /api/v1/hostPools/{pool}/rdpFile`). Pure, so the
//! HTTP route and the CLI serve the same bytes.
//!
//! The pool travels in `loadbalanceinfo`, which mstsc and FreeRDP send as
//! the routing token of their first PDU (rule R1). Lines end in CR LF, as
//! mstsc writes them; mstsc and xfreerdp also read UTF-8 files.
//!
//! With `?gateway=true` the file points the client at the RD Gateway
//! instead ([`gateway_rdp_file`]): the pool is the target, a connection
//! ticket the gateway access token.
//!
//! A pool's own RDP properties (rule F3, `customRdpProperties`) are laid
//! over any of these files by [`with_properties`].

/// The routing token that names a pool (rule R1), without its CR LF.
pub fn routing_token(pool: &str) -> String {
    format!("tsv://MS Terminal Services Plugin.1.{pool}")
}

/// An `.rdp` file for `pool` through the front door at `front_door`
/// (`host:port`, or a name when the port is 3389).
///
/// `pool` should be a valid pool name (the broker admits only letters,
/// digits, `.`, `-` and `_`); control characters in either argument are
/// dropped so that no value can add a line to the file.
pub fn rdp_file(front_door: &str, pool: &str) -> String {
    file_with_routing(front_door, &routing_token(pool))
}

/// An `.rdp` file through the front door at `front_door` whose
/// `loadbalanceinfo` is a signed connection ticket (rule T3, `ticket.rs`):
/// the ticket names the pool and the user.
pub fn rdp_file_with_ticket(front_door: &str, ticket: &str) -> String {
    file_with_routing(front_door, ticket)
}

/// An `.rdp` file through the RD Gateway at `gateway` (`host:port`, or a
/// name when the port is 443; MS-TSGU, `gateway::rd_gateway`): the client
/// asks the gateway for a channel to `pool` (the gateway reads the target
/// as the pool's name, never resolves it) and authenticates with `ticket`
/// as a pre-authenticated access token (PAA: `gatewaycredentialssource:i:5`).
pub fn gateway_rdp_file(gateway: &str, pool: &str, ticket: &str) -> String {
    let mut settings = vec![
        format!("full address:s:{}", clean(pool)),
        format!("gatewayhostname:s:{}", clean(gateway)),
        // Always through the gateway, even on the office network.
        "gatewayusagemethod:i:1".to_string(),
        // The gateway's credential is the access token below.
        "gatewaycredentialssource:i:5".to_string(),
        // Use these gateway settings, not the user's own.
        "gatewayprofileusagemethod:i:1".to_string(),
        format!("gatewayaccesstoken:s:{}", clean(ticket)),
    ];
    settings.extend(common_settings());
    lines(settings)
}

/// An `.rdp` file through the RD Gateway at `gateway` for `pool`, whose
/// user signs in to the gateway as themselves (Windows sign-in: Kerberos,
/// or NTLM with the name and password the client asks for once and uses
/// for the host too) rather than with a ticket. It holds nothing that
/// expires: what a subscribed client keeps (the workspace feed's files).
pub fn gateway_windows_rdp_file(gateway: &str, pool: &str) -> String {
    let mut settings = vec![
        format!("full address:s:{}", clean(pool)),
        format!("gatewayhostname:s:{}", clean(gateway)),
        "gatewayusagemethod:i:1".to_string(),
        // Ask for the user's credentials (or use the signed-in Windows
        // user's), not a token.
        "gatewaycredentialssource:i:0".to_string(),
        "gatewayprofileusagemethod:i:1".to_string(),
        // The same credentials for the gateway and the host.
        "promptcredentialonce:i:1".to_string(),
    ];
    settings.extend(common_settings());
    lines(settings)
}

/// The line that makes a gateway's `.rdp` file (from [`gateway_rdp_file`])
/// name `gateway` as the client's KDC proxy too (rule AD3): mstsc then
/// asks `https://<gateway>/KdcProxy` for its Kerberos tickets.
pub fn kdc_proxy_line(gateway: &str) -> String {
    format!("kdcproxyname:s:{}\r\n", clean(gateway))
}

/// `file` (one of the files above) with a pool's own RDP properties (rule
/// F3): each replaces the file's line of the same name, where there is one
/// (`screen mode id`, `redirectclipboard`, …), in its place; the others
/// are added at the end. A property is one of the list a pool may set
/// (`placement::parse_rdp_properties` made it), so none can say where or
/// as whom the client connects; its line is cleaned all the same.
pub fn with_properties(file: &str, properties: &[placement::RdpProperty]) -> String {
    if properties.is_empty() {
        return file.to_string();
    }
    let mut written = vec![false; properties.len()];
    let mut settings = Vec::new();
    for line in file.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default();
        match properties
            .iter()
            .position(|p| p.name().eq_ignore_ascii_case(name))
        {
            Some(i) => {
                if !written[i] {
                    settings.push(clean(&properties[i].to_string()));
                    written[i] = true;
                }
            }
            None => settings.push(line.to_string()),
        }
    }
    for (p, done) in properties.iter().zip(written) {
        if !done {
            settings.push(clean(&p.to_string()));
        }
    }
    lines(settings)
}

/// A published application as its launch file opens it (rule F2).
#[derive(Clone, Copy, Debug)]
pub struct LaunchedApplication<'a> {
    /// How the pool's hosts run it.
    pub mode: placement::ApplicationMode,
    /// What the host runs: a path, or `||alias` (RemoteApp hosts only).
    pub program: &'a str,
    /// What the client shows as its name.
    pub display_name: &'a str,
    /// The arguments its command-line policy let through (empty: none).
    pub command_line: &'a str,
    /// Extensions the client may open with it (`.txt`).
    pub file_extensions: &'a [String],
}

/// `file` (a desktop's file from above, with its pool's properties) made
/// to open an application instead (rule F2). On a RemoteApp pool the
/// client runs it in a window of its own (`remoteapplicationmode:i:1`,
/// the program, its name, arguments and extensions); on an
/// `AlternateShell` pool (xrdp) the session runs it as its only program
/// (`alternate shell`), and the desktop's full-screen line is dropped so
/// the program opens in a window of the client's size.
pub fn with_application(file: &str, app: &LaunchedApplication<'_>) -> String {
    let mut settings: Vec<String> = file
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .filter(|l| {
            let name = l.split(':').next().unwrap_or_default();
            !(name.eq_ignore_ascii_case("alternate shell")
                || name.to_ascii_lowercase().starts_with("remoteapplication")
                || (app.mode == placement::ApplicationMode::AlternateShell
                    && name.eq_ignore_ascii_case("screen mode id")))
        })
        .map(str::to_string)
        .collect();
    match app.mode {
        placement::ApplicationMode::RemoteApp => {
            settings.push("remoteapplicationmode:i:1".to_string());
            settings.push(format!("remoteapplicationprogram:s:{}", clean(app.program)));
            settings.push(format!(
                "remoteapplicationname:s:{}",
                clean(app.display_name)
            ));
            if !app.command_line.is_empty() {
                settings.push(format!(
                    "remoteapplicationcmdline:s:{}",
                    clean(app.command_line)
                ));
            }
            if !app.file_extensions.is_empty() {
                settings.push(format!(
                    "remoteapplicationfileextensions:s:{}",
                    clean(&app.file_extensions.join(","))
                ));
            }
            // What RD Web Access writes: the host's RemoteApp launcher, and
            // no refusal from a client that cannot tell whether the host
            // takes RemoteApp.
            settings.push("alternate shell:s:rdpinit.exe".to_string());
            settings.push("disableremoteappcapscheck:i:1".to_string());
        }
        placement::ApplicationMode::AlternateShell => {
            let shell = if app.command_line.is_empty() {
                app.program.to_string()
            } else {
                format!("{} {}", app.program, app.command_line)
            };
            settings.push(format!("alternate shell:s:{}", clean(&shell)));
        }
    }
    lines(settings)
}

/// What every file of ours asks for besides where to connect.
fn common_settings() -> [String; 4] {
    [
        // Full screen, the mstsc default for a published desktop.
        "screen mode id:i:2".to_string(),
        // Warn, but let the user go on, when the host's certificate cannot
        // be verified: TLS runs end to end with the session host.
        "authentication level:i:2".to_string(),
        "prompt for credentials:i:0".to_string(),
        "redirectclipboard:i:1".to_string(),
    ]
}

fn file_with_routing(front_door: &str, load_balance_info: &str) -> String {
    let mut settings = vec![
        format!("full address:s:{}", clean(front_door)),
        format!("loadbalanceinfo:s:{}", clean(load_balance_info)),
    ];
    settings.extend(common_settings());
    lines(settings)
}

/// A value with its control characters dropped: no value adds a line.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).collect()
}

/// The settings as a file, CR LF after each.
fn lines(settings: Vec<String>) -> String {
    let mut file = String::new();
    for line in settings {
        file.push_str(&line);
        file.push_str("\r\n");
    }
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an `.rdp` reader sees: `name:type:value` per line.
    fn settings(file: &str) -> Vec<(String, String, String)> {
        file.split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| {
                let mut parts = l.splitn(3, ':');
                let name = parts.next().unwrap_or_default().to_string();
                let kind = parts.next().unwrap_or_default().to_string();
                let value = parts.next().unwrap_or_default().to_string();
                (name, kind, value)
            })
            .collect()
    }

    #[test]
    fn points_at_the_front_door_with_the_pool_as_routing_token() {
        let file = rdp_file("rdp.contoso.com:3389", "contosohp01");
        assert!(file.ends_with("\r\n"));
        assert!(
            !file.replace("\r\n", "").contains('\n'),
            "CR LF line ends only"
        );
        let s = settings(&file);
        assert!(s.contains(&(
            "full address".into(),
            "s".into(),
            "rdp.contoso.com:3389".into()
        )));
        assert!(s.contains(&(
            "loadbalanceinfo".into(),
            "s".into(),
            "tsv://MS Terminal Services Plugin.1.contosohp01".into()
        )));
        for (name, kind, _) in &s {
            assert!(matches!(kind.as_str(), "s" | "i"), "{name} has type {kind}");
        }
    }

    #[test]
    fn through_the_gateway_the_target_is_the_pool_and_the_token_a_ticket() {
        let file = gateway_rdp_file(
            "gw.contoso.com:443",
            "contosohp01",
            "dbt1:contosohp01:9:mac:alice",
        );
        assert!(file.ends_with("\r\n"));
        let s = settings(&file);
        for (name, kind, value) in [
            ("full address", "s", "contosohp01"),
            ("gatewayhostname", "s", "gw.contoso.com:443"),
            ("gatewayusagemethod", "i", "1"),
            ("gatewaycredentialssource", "i", "5"),
            ("gatewayprofileusagemethod", "i", "1"),
            ("gatewayaccesstoken", "s", "dbt1:contosohp01:9:mac:alice"),
        ] {
            assert!(
                s.contains(&(name.into(), kind.into(), value.into())),
                "{name}:{kind}:{value} missing from {file:?}"
            );
        }
        // The gateway places on the token, not on a routing token.
        assert!(s.iter().all(|(name, _, _)| name != "loadbalanceinfo"));
        let names: Vec<&str> = s.iter().map(|(n, _, _)| n.as_str()).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a setting twice: {names:?}");
    }

    #[test]
    fn a_kdc_proxy_line_names_the_gateway_and_adds_one_line() {
        let mut file = gateway_rdp_file("gw.contoso.com", "contosohp01", "dbt1:x");
        file.push_str(&kdc_proxy_line("gw.contoso.com"));
        let s = settings(&file);
        assert!(s.contains(&("kdcproxyname".into(), "s".into(), "gw.contoso.com".into())));
        assert!(file.ends_with("\r\n"));
        assert_eq!(kdc_proxy_line("gw\r\nx:i:1"), "kdcproxyname:s:gwx:i:1\r\n");
    }

    #[test]
    fn a_pools_properties_replace_ours_and_the_rest_are_added() {
        let properties = placement::parse_rdp_properties(
            "redirectclipboard:i:0;audiomode:i:2;screen mode id:i:1;kdcproxyname:s:kdc.contoso.com",
        )
        .expect("valid");
        let mut file = gateway_rdp_file("gw.contoso.com", "contosohp01", "dbt1:x");
        file.push_str(&kdc_proxy_line("gw.contoso.com"));
        let file = with_properties(&file, &properties);
        assert!(file.ends_with("\r\n"));
        assert_eq!(file.matches("\r\n").count(), settings(&file).len());
        let s = settings(&file);
        for (name, kind, value) in [
            ("redirectclipboard", "i", "0"),
            ("audiomode", "i", "2"),
            ("screen mode id", "i", "1"),
            ("kdcproxyname", "s", "kdc.contoso.com"),
            ("full address", "s", "contosohp01"),
            ("gatewayaccesstoken", "s", "dbt1:x"),
            ("authentication level", "i", "2"),
        ] {
            assert!(
                s.contains(&(name.into(), kind.into(), value.into())),
                "{name}:{kind}:{value} missing from {file:?}"
            );
        }
        let mut names: Vec<&str> = s.iter().map(|(n, _, _)| n.as_str()).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a setting twice: {file:?}");
        // A replaced line keeps its place; a new one comes last.
        let plain = with_properties(&rdp_file("rdp.contoso.com", "p"), &properties);
        let order: Vec<String> = settings(&plain).into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(
            order,
            [
                "full address",
                "loadbalanceinfo",
                "screen mode id",
                "authentication level",
                "prompt for credentials",
                "redirectclipboard",
                "audiomode",
                "kdcproxyname",
            ]
        );
        assert_eq!(with_properties(&plain, &[]), plain);
    }

    #[test]
    fn gateway_values_cannot_add_lines() {
        let file = gateway_rdp_file("gw:1\r\nalternate shell:s:evil", "p\nx:s:y", "t\r\nz:i:1");
        assert_eq!(file.matches("\r\n").count(), settings(&file).len());
        for injected in ["\r\nalternate shell", "\r\nx:s:y", "\r\nz:i:1"] {
            assert!(!file.contains(injected));
        }
    }

    #[test]
    fn values_cannot_add_lines() {
        let file = rdp_file("a:1\r\nalternate shell:s:evil", "p\r\nx:s:y");
        assert_eq!(file.matches("\r\n").count(), settings(&file).len());
        assert!(!file.contains("\r\nalternate shell"));
        assert!(!file.contains("\r\nx:s:y"));
    }

    #[test]
    fn an_application_file_opens_the_application_in_its_mode() {
        let desktop = with_properties(
            &rdp_file("door.example:3389", "apps"),
            &placement::parse_rdp_properties("audiomode:i:2").unwrap(),
        );
        let extensions = vec![".txt".to_string(), ".log".to_string()];
        let app = LaunchedApplication {
            mode: placement::ApplicationMode::RemoteApp,
            program: "||notepad",
            display_name: "Note\r\npad",
            command_line: "",
            file_extensions: &extensions,
        };
        let file = with_application(&desktop, &app);
        let s = settings(&file);
        let value = |name: &str| {
            s.iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, _, v)| v.clone())
        };
        assert_eq!(value("remoteapplicationmode").as_deref(), Some("1"));
        assert_eq!(
            value("remoteapplicationprogram").as_deref(),
            Some("||notepad")
        );
        // A name cannot add a line of its own.
        assert_eq!(value("remoteapplicationname").as_deref(), Some("Notepad"));
        assert_eq!(value("remoteapplicationcmdline"), None);
        assert_eq!(
            value("remoteapplicationfileextensions").as_deref(),
            Some(".txt,.log")
        );
        assert_eq!(value("audiomode").as_deref(), Some("2"));
        assert_eq!(
            value("loadbalanceinfo").as_deref(),
            Some("tsv://MS Terminal Services Plugin.1.apps")
        );

        let shell = LaunchedApplication {
            mode: placement::ApplicationMode::AlternateShell,
            program: "/usr/bin/xterm",
            command_line: "",
            ..app
        };
        let file = with_application(&desktop, &shell);
        let s = settings(&file);
        assert!(
            s.iter()
                .all(|(n, _, _)| !n.starts_with("remoteapplication"))
        );
        assert!(s.iter().all(|(n, _, _)| n != "screen mode id"));
        let shells: Vec<_> = s
            .iter()
            .filter(|(n, _, _)| n == "alternate shell")
            .collect();
        assert_eq!(shells.len(), 1);
        assert_eq!(shells[0].2, "/usr/bin/xterm");
    }
}
