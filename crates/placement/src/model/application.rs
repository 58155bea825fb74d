//! Published applications and application groups (rule F1): what a pool
//! publishes besides its desktop, and who is given what.
//!
//! A pool publishes applications, each under an alias (the last part of its
//! address, a name as pools' are). An application group belongs to one
//! pool and is of AVD's kinds: a `Desktop` group gives its users the pool's
//! desktop, a `RemoteApp` group gives them the listed applications. Groups
//! are assigned to users and to groups of users (the directory's groups
//! where one is configured). Being given a resource is publication: the
//! pool's own entitlements (rule T2) still decide whether a session may be
//! placed.
//!
//! Everything here is checked where it is set ([`Application::validate`],
//! [`ApplicationGroup::validate`]); the icons' content (that they are
//! images of a bounded size) is the broker's to check, since it needs
//! their decoders.
//!
//! A user's workspace feed (rule F4) lists what the user is given; a
//! [`FeedStamp`] records which set it last listed and since when, so that
//! the feed's `LastUpdated` changes only when that set does.

use serde::{Deserialize, Serialize};

use super::{MAX_ENTITLEMENTS, check_text, validate_group, validate_name, validate_user};
use crate::Error;

/// The most applications one pool publishes: a workspace's page and feed
/// list them all.
pub const MAX_APPLICATIONS_PER_POOL: usize = 500;
/// The most application groups a broker keeps.
pub const MAX_APPLICATION_GROUPS: usize = 2_000;
/// The most applications one group names.
pub const MAX_GROUP_APPLICATIONS: usize = MAX_APPLICATIONS_PER_POOL;
/// The longest `program`, in bytes (Windows' long paths are 32,767
/// characters; a published program's path is far shorter in practice).
pub const MAX_PROGRAM_BYTES: usize = 1024;
/// The longest command line, fixed or given at launch, in bytes.
pub const MAX_COMMAND_LINE_BYTES: usize = 2048;
/// The most file extensions one application claims.
pub const MAX_FILE_EXTENSIONS: usize = 64;
/// The longest folder name, in bytes.
pub const MAX_FOLDER_BYTES: usize = 256;
/// The largest icon, in bytes once decoded from base64. An icon of every
/// size up to 256×256 fits comfortably.
pub const MAX_ICON_BYTES: usize = 64 * 1024;

/// What a launch may add to an application's command line (RDS's
/// "command-line parameters" of a RemoteApp program).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CommandLinePolicy {
    /// The program runs without arguments; a launch that gives some is
    /// refused.
    #[default]
    None,
    /// A launch may give any arguments (a file opened by its extension,
    /// say).
    Any,
    /// The program always runs with `commandLine`; a launch that gives
    /// other arguments is refused.
    Fixed,
}

/// One published application of a pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Application {
    /// What users see: 1 to 256 bytes, no control characters.
    pub display_name: String,
    /// What the host runs: a path on the host (`C:\Program Files\…\app.exe`,
    /// `/usr/bin/gnome-calculator`), or `||name`, an alias the host itself
    /// publishes (RDS's RemoteApp allow list).
    pub program: String,
    #[serde(default)]
    pub command_line_policy: CommandLinePolicy,
    /// The arguments of a `Fixed` policy; empty otherwise.
    #[serde(default)]
    pub command_line: String,
    /// The icon as a PNG, in base64 (at most [`MAX_ICON_BYTES`] decoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_png: Option<String>,
    /// The icon as a Windows ICO, in base64 (at most [`MAX_ICON_BYTES`]
    /// decoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_ico: Option<String>,
    /// The file extensions the application opens on the client
    /// (`.txt`), which a subscribed client associates with it.
    #[serde(default)]
    pub file_extensions: Vec<String>,
    /// The folder it is shown in; empty: the top level.
    #[serde(default)]
    pub folder: String,
    /// When it was last put (milliseconds since the epoch), set by the
    /// broker; what a client gives is ignored.
    #[serde(default)]
    pub modified_ms: i64,
}

impl Application {
    /// Rule F1: checks every field but the icons' content, naming the
    /// field at fault.
    pub fn validate(&self) -> Result<(), Error> {
        if self.display_name.trim().is_empty() {
            return Err(Error::InvalidParameter(
                "displayName: required; what users see".into(),
            ));
        }
        check_text("displayName", &self.display_name, 256)?;
        validate_program(&self.program)?;
        match self.command_line_policy {
            CommandLinePolicy::Fixed => {
                if self.command_line.is_empty() {
                    return Err(Error::InvalidParameter(
                        "commandLine: required by the Fixed commandLinePolicy".into(),
                    ));
                }
                validate_command_line("commandLine", &self.command_line)?;
            }
            policy => {
                if !self.command_line.is_empty() {
                    return Err(Error::InvalidParameter(format!(
                        "commandLine: only a Fixed commandLinePolicy has one (this one is \
                         {policy:?})"
                    )));
                }
            }
        }
        if self.file_extensions.len() > MAX_FILE_EXTENSIONS {
            return Err(Error::InvalidParameter(format!(
                "fileExtensions: {} entries; at most {MAX_FILE_EXTENSIONS}",
                self.file_extensions.len()
            )));
        }
        for (i, ext) in self.file_extensions.iter().enumerate() {
            validate_file_extension(&format!("fileExtensions[{i}]"), ext)?;
        }
        validate_folder(&self.folder)?;
        Ok(())
    }

    /// The arguments a launch runs the program with: the fixed ones, the
    /// launch's own where the policy allows any, or none. Refused (naming
    /// `commandLine`) when the launch gives arguments the policy forbids.
    pub fn launch_command_line(&self, given: Option<&str>) -> Result<String, Error> {
        let given = given.filter(|g| !g.is_empty());
        match (self.command_line_policy, given) {
            (CommandLinePolicy::Any, Some(args)) => {
                validate_command_line("commandLine", args)?;
                Ok(args.to_string())
            }
            (CommandLinePolicy::Fixed, None) => Ok(self.command_line.clone()),
            (CommandLinePolicy::Fixed, Some(args)) if args == self.command_line => {
                Ok(self.command_line.clone())
            }
            (_, None) => Ok(String::new()),
            (policy, Some(_)) => Err(Error::InvalidParameter(format!(
                "commandLine: this application's commandLinePolicy is {policy:?}; a launch \
                 may not give arguments"
            ))),
        }
    }
}

/// `program`: a path or `||alias`, 1 to [`MAX_PROGRAM_BYTES`] bytes, no
/// control characters (it is written on a line of a connection file).
fn validate_program(program: &str) -> Result<(), Error> {
    if program.trim().is_empty() {
        return Err(Error::InvalidParameter(
            "program: required; a path on the host or ||alias".into(),
        ));
    }
    check_text("program", program, MAX_PROGRAM_BYTES)?;
    if let Some(alias) = program.strip_prefix("||") {
        validate_name("program", alias).map_err(|_| {
            Error::InvalidParameter(format!(
                "program: {program:?}: after || comes the alias the host publishes: letters, \
                 digits, '.', '-' or '_'"
            ))
        })?;
    }
    Ok(())
}

/// A command line: at most [`MAX_COMMAND_LINE_BYTES`] bytes, no control
/// characters.
fn validate_command_line(field: &str, line: &str) -> Result<(), Error> {
    check_text(field, line, MAX_COMMAND_LINE_BYTES)
}

/// Whether `ext` is a file extension: a dot and 1 to 16 letters, digits,
/// `-` or `_` (`.txt`).
pub fn is_file_extension(ext: &str) -> bool {
    ext.strip_prefix('.').is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 16
            && rest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    })
}

/// A file extension ([`is_file_extension`]), or a refusal naming `field`.
fn validate_file_extension(field: &str, ext: &str) -> Result<(), Error> {
    if !is_file_extension(ext) {
        return Err(Error::InvalidParameter(format!(
            "{field}: {ext:?} is not a file extension; use a dot and 1 to 16 letters, digits, \
             '-' or '_' (.txt)"
        )));
    }
    Ok(())
}

/// A folder: empty (the top level) or 1 to [`MAX_FOLDER_BYTES`] bytes
/// without control characters, slashes or backslashes (one level, as
/// AVD's and RD Web Access's folders are).
fn validate_folder(folder: &str) -> Result<(), Error> {
    check_text("folder", folder, MAX_FOLDER_BYTES)?;
    if folder.contains(['/', '\\']) || (!folder.is_empty() && folder.trim().is_empty()) {
        return Err(Error::InvalidParameter(format!(
            "folder: {folder:?}: one level, without '/' or '\\'"
        )));
    }
    Ok(())
}

/// AVD's application group kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum AppGroupKind {
    /// Gives the pool's desktop. A pool has at most one.
    Desktop,
    /// Gives the applications it lists.
    RemoteApp,
}

/// Which kind a user given both a pool's desktop and some of its
/// applications sees (AVD's `preferredAppGroupType`): a pooled pool gives a
/// user one session, which is either a desktop or applications.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PreferredAppGroupType {
    #[default]
    Desktop,
    /// AVD's `RailApplications` is taken as this too.
    #[serde(alias = "RailApplications")]
    RemoteApp,
}

/// How a pool's hosts run a published application.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ApplicationMode {
    /// In its own window on the client's desktop (RemoteApp, RAIL):
    /// Windows hosts.
    #[default]
    RemoteApp,
    /// As the session's only program, in place of the desktop (`alternate
    /// shell`): hosts without RemoteApp, such as xrdp's. `program` must be
    /// a path.
    AlternateShell,
}

/// One application group (rule F1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplicationGroup {
    /// The pool it belongs to; it cannot move to another.
    pub host_pool: String,
    pub kind: AppGroupKind,
    /// What users see as the group's name (AVD's friendly name).
    #[serde(default)]
    pub friendly_name: String,
    /// The aliases of the pool's applications it gives (`RemoteApp`
    /// groups only).
    #[serde(default)]
    pub applications: Vec<String>,
    /// Users given what the group gives (matched without regard to ASCII
    /// case).
    #[serde(default)]
    pub assigned_users: Vec<String>,
    /// Groups whose members are given it.
    #[serde(default)]
    pub assigned_groups: Vec<String>,
    /// When it was last put (milliseconds since the epoch), set by the
    /// broker; what a client gives is ignored.
    #[serde(default)]
    pub modified_ms: i64,
}

impl ApplicationGroup {
    /// Rule F1: checks every field on its own (that the pool and its
    /// applications exist is the broker's to check), naming the field at
    /// fault.
    pub fn validate(&self) -> Result<(), Error> {
        validate_name("hostPool", &self.host_pool)?;
        check_text("friendlyName", &self.friendly_name, 256)?;
        if self.kind == AppGroupKind::Desktop && !self.applications.is_empty() {
            return Err(Error::InvalidParameter(
                "applications: a Desktop application group gives the pool's desktop and lists \
                 no applications"
                    .into(),
            ));
        }
        if self.applications.len() > MAX_GROUP_APPLICATIONS {
            return Err(Error::InvalidParameter(format!(
                "applications: {} entries; at most {MAX_GROUP_APPLICATIONS}",
                self.applications.len()
            )));
        }
        for (i, alias) in self.applications.iter().enumerate() {
            validate_name(&format!("applications[{i}]"), alias)?;
        }
        for (field, len) in [
            ("assignedUsers", self.assigned_users.len()),
            ("assignedGroups", self.assigned_groups.len()),
        ] {
            if len > MAX_ENTITLEMENTS {
                return Err(Error::InvalidParameter(format!(
                    "{field}: {len} entries; at most {MAX_ENTITLEMENTS}"
                )));
            }
        }
        for (i, user) in self.assigned_users.iter().enumerate() {
            validate_user(&format!("assignedUsers[{i}]"), user)?;
        }
        for (i, group) in self.assigned_groups.iter().enumerate() {
            validate_group(&format!("assignedGroups[{i}]"), group)?;
        }
        Ok(())
    }

    /// Whether the group is given to `user`, a member of `groups` (both
    /// matched without regard to ASCII case).
    pub fn is_assigned(&self, user: &str, groups: &[String]) -> bool {
        self.assigned_users
            .iter()
            .any(|u| u.eq_ignore_ascii_case(user))
            || self
                .assigned_groups
                .iter()
                .any(|g| groups.iter().any(|m| m.eq_ignore_ascii_case(g)))
    }
}

/// The most users whose workspace feed stamps ([`FeedStamp`]) a broker
/// keeps, in memory and in its store: one stamp a user who fetched the
/// feed, so that a stream of sign-ins by ever new names cannot make the
/// broker hold without bound.
pub const MAX_FEED_STAMPS: usize = 100_000;

/// What a user's workspace feed last held, so that its `LastUpdated` moves
/// exactly when that set changes (rule F4): the broker digests the
/// resources it lists for the user, and keeps that digest with the time it
/// first listed that set. A fetch that lists the same set answers the same
/// `LastUpdated`, and a changed set starts a new one. Kept in the store,
/// so that the time is the same after a restart and on every replica.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedStamp {
    /// A digest of the resources the feed listed (hex), as the broker computes it.
    pub set_hash: String,
    /// Since when (ms since the Unix epoch) the feed has held that set.
    pub since_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notepad() -> Application {
        Application {
            display_name: "Notepad".into(),
            program: r"C:\Windows\System32\notepad.exe".into(),
            command_line_policy: CommandLinePolicy::None,
            command_line: String::new(),
            icon_png: None,
            icon_ico: None,
            file_extensions: vec![".txt".into()],
            folder: "Accessories".into(),
            modified_ms: 0,
        }
    }

    fn refused(app: &Application) -> String {
        match app.validate() {
            Err(Error::InvalidParameter(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_application_is_checked_field_by_field() {
        notepad().validate().unwrap();
        let aliased = Application {
            program: "||notepad".into(),
            ..notepad()
        };
        aliased.validate().unwrap();

        for (app, field) in [
            (
                Application {
                    display_name: " ".into(),
                    ..notepad()
                },
                "displayName",
            ),
            (
                Application {
                    program: "a\nb".into(),
                    ..notepad()
                },
                "program",
            ),
            (
                Application {
                    program: "||no such alias".into(),
                    ..notepad()
                },
                "program",
            ),
            (
                Application {
                    command_line: "/x".into(),
                    ..notepad()
                },
                "commandLine",
            ),
            (
                Application {
                    command_line_policy: CommandLinePolicy::Fixed,
                    ..notepad()
                },
                "commandLine",
            ),
            (
                Application {
                    file_extensions: vec!["txt".into()],
                    ..notepad()
                },
                "fileExtensions[0]",
            ),
            (
                Application {
                    folder: "a/b".into(),
                    ..notepad()
                },
                "folder",
            ),
        ] {
            let message = refused(&app);
            assert!(message.starts_with(field), "{field}: {message}");
        }
    }

    #[test]
    fn a_launch_gives_arguments_only_where_the_policy_allows_them() {
        let none = notepad();
        assert_eq!(none.launch_command_line(None).unwrap(), "");
        assert!(none.launch_command_line(Some("x.txt")).is_err());

        let any = Application {
            command_line_policy: CommandLinePolicy::Any,
            ..notepad()
        };
        assert_eq!(any.launch_command_line(Some("x.txt")).unwrap(), "x.txt");
        assert!(any.launch_command_line(Some("a\rb")).is_err());

        let fixed = Application {
            command_line_policy: CommandLinePolicy::Fixed,
            command_line: "/safe".into(),
            ..notepad()
        };
        assert_eq!(fixed.launch_command_line(None).unwrap(), "/safe");
        assert_eq!(fixed.launch_command_line(Some("/safe")).unwrap(), "/safe");
        assert!(fixed.launch_command_line(Some("/evil")).is_err());
    }

    #[test]
    fn a_group_is_checked_and_matches_users_and_groups_without_case() {
        let group = ApplicationGroup {
            host_pool: "apps".into(),
            kind: AppGroupKind::RemoteApp,
            friendly_name: String::new(),
            applications: vec!["notepad".into()],
            assigned_users: vec!["Alice@Contoso.com".into()],
            assigned_groups: vec!["Finance".into()],
            modified_ms: 0,
        };
        group.validate().unwrap();
        assert!(group.is_assigned("alice@contoso.com", &[]));
        assert!(group.is_assigned("bob@contoso.com", &["FINANCE".into()]));
        assert!(!group.is_assigned("bob@contoso.com", &["Sales".into()]));

        let desktop_with_apps = ApplicationGroup {
            kind: AppGroupKind::Desktop,
            ..group.clone()
        };
        assert!(desktop_with_apps.validate().is_err());
        let bad_alias = ApplicationGroup {
            applications: vec!["not a name".into()],
            ..group
        };
        assert!(bad_alias.validate().is_err());
    }

    #[test]
    fn a_feed_stamp_is_kept_as_camel_case_json_and_nothing_else() {
        let stamp = FeedStamp {
            set_hash: "9f86d081884c7d65".into(),
            since_ms: 1_700_000_600_000,
        };
        let json = serde_json::to_value(&stamp).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"setHash": "9f86d081884c7d65", "sinceMs": 1_700_000_600_000i64})
        );
        assert_eq!(serde_json::from_value::<FeedStamp>(json).unwrap(), stamp);
        let unknown = serde_json::json!({"setHash": "ab", "sinceMs": 1, "other": true});
        assert!(serde_json::from_value::<FeedStamp>(unknown).is_err());
        let lacking = serde_json::json!({"setHash": "ab"});
        assert!(serde_json::from_value::<FeedStamp>(lacking).is_err());
    }
}
