//! The image the host runs (rule U1), sent in every heartbeat as
//! `imageVersion`: read from a file (`image_version_file`) or printed by a
//! command (`image_version_command`), each time a heartbeat is sampled, so
//! that a host reimaged in place reports its new image at once.
//!
//! A file is either a version file the image build writes (its first line)
//! or an os-release file (`/etc/os-release`: `KEY=value` lines), whose
//! `IMAGE_VERSION`, else `BUILD_ID`, else `VERSION_ID` is taken, the fields
//! os-release defines for an image's version. A command runs through
//! `sh -c` within the probes' time limit; its first line is the version.
//! A value the broker would refuse (blank, longer than 128 bytes, control
//! characters) is not sent: the last good one is, and the agent says why.

use std::path::PathBuf;

use crate::probe::{self, PROBE_TIMEOUT};

/// The most bytes of a version file or a command's output read.
const MAX_SOURCE_BYTES: usize = 64 * 1024;

/// Where the host's image version comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageVersionSource {
    /// A version file or an os-release file.
    File(PathBuf),
    /// A command whose first line of output is the version.
    Command(String),
}

/// The source and the last good version it gave.
#[derive(Debug)]
pub struct ImageVersion {
    source: ImageVersionSource,
    last_good: Option<String>,
}

impl ImageVersion {
    pub fn new(source: ImageVersionSource) -> ImageVersion {
        ImageVersion {
            source,
            last_good: None,
        }
    }

    /// Reads the version now: this reading's, or the last good one when
    /// this one failed (None if none ever worked).
    pub async fn sample(&mut self) -> Option<String> {
        match self.read().await {
            Ok(v) => self.last_good = Some(v),
            Err(e) => {
                let kept = self.last_good.as_deref().unwrap_or("none");
                tracing::warn!("image version from {:?}: {e}; sending {kept}", self.source);
            }
        }
        self.last_good.clone()
    }

    async fn read(&self) -> Result<String, String> {
        let text = match &self.source {
            ImageVersionSource::File(path) => {
                let bytes = tokio::fs::read(path).await.map_err(|e| e.to_string())?;
                if bytes.len() > MAX_SOURCE_BYTES {
                    return Err(format!("longer than {MAX_SOURCE_BYTES} bytes"));
                }
                String::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?
            }
            ImageVersionSource::Command(command) => {
                probe::run(probe::shell(command), PROBE_TIMEOUT, MAX_SOURCE_BYTES)
                    .await
                    .map_err(|e| e.to_string())?
            }
        };
        let version = version_of(&text).ok_or("no version in it")?;
        placement::validate_image_version("imageVersion", &version).map_err(|e| e.to_string())?;
        Ok(version)
    }
}

/// The version `text` holds: an os-release file's `IMAGE_VERSION`,
/// `BUILD_ID` or `VERSION_ID` (unquoted), else its first non-blank line,
/// trimmed.
pub fn version_of(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let value = line.trim().strip_prefix(key)?.strip_prefix('=')?;
            let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
            (!value.is_empty()).then(|| value.to_string())
        })
    };
    let os_release = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .all(|l| l.contains('='));
    if os_release
        && let Some(v) = ["IMAGE_VERSION", "BUILD_ID", "VERSION_ID"]
            .into_iter()
            .find_map(field)
    {
        return Some(v);
    }
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_file_gives_its_first_line_and_os_release_its_image_fields() {
        assert_eq!(version_of("2026.12.1\n").as_deref(), Some("2026.12.1"));
        assert_eq!(
            version_of("\n  golden-7  \nnotes\n").as_deref(),
            Some("golden-7")
        );
        let os_release = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n\
                          VERSION_ID=\"12\"\nID=debian\n";
        assert_eq!(version_of(os_release).as_deref(), Some("12"));
        let image = format!("{os_release}BUILD_ID=20261201\nIMAGE_VERSION='farm-2026.12'\n");
        assert_eq!(version_of(&image).as_deref(), Some("farm-2026.12"));
        let built = format!("{os_release}BUILD_ID=20261201\n");
        assert_eq!(version_of(&built).as_deref(), Some("20261201"));
        assert_eq!(version_of(""), None);
        assert_eq!(version_of("\n \n"), None);
    }

    #[tokio::test]
    async fn a_bad_reading_keeps_the_last_good_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("image-version");
        std::fs::write(&file, "v1\n").expect("write");
        let mut version = ImageVersion::new(ImageVersionSource::File(file.clone()));
        assert_eq!(version.sample().await.as_deref(), Some("v1"));
        std::fs::write(&file, "x".repeat(200)).expect("write");
        assert_eq!(version.sample().await.as_deref(), Some("v1"));
        std::fs::remove_file(&file).expect("remove");
        assert_eq!(version.sample().await.as_deref(), Some("v1"));
        std::fs::write(&file, "v2").expect("write");
        assert_eq!(version.sample().await.as_deref(), Some("v2"));
        let mut command =
            ImageVersion::new(ImageVersionSource::Command("echo v3; echo more".into()));
        assert_eq!(command.sample().await.as_deref(), Some("v3"));
        let mut failing = ImageVersion::new(ImageVersionSource::Command("exit 3".into()));
        assert_eq!(failing.sample().await, None);
    }
}
