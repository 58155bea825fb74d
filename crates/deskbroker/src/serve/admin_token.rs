//! The admin token: the policy a token a person chose must meet (long,
//! random-looking text, never words or patterns), and the token file in
//! the data directory (generated on a first start, kept in step with a
//! token given by flag or file so that the CLI finds the one in use).

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::private::make_private;

/// The admin token in use: `--admin-token` (or `DESKBROKER_ADMIN_TOKEN`),
/// else the first line of `--admin-token-file`, checked against the policy
/// and written to the data directory's token file so that the CLI finds it;
/// else the data directory's token file, generated on a first start.
pub(super) fn admin_token(args: &super::ServeArgs) -> anyhow::Result<String> {
    let given = match (&args.admin_token, &args.admin_token_file) {
        (Some(t), _) => Some((
            t.clone(),
            "--admin-token / DESKBROKER_ADMIN_TOKEN".to_string(),
        )),
        (None, Some(file)) => {
            let first = crate::secret_file::read(file, "--admin-token-file", "the admin token")?;
            Some((first, format!("--admin-token-file {}", file.display())))
        }
        (None, None) => None,
    };
    Ok(match given {
        Some((t, source)) => {
            check_admin_token(&t).with_context(|| format!("the admin token of {source}"))?;
            keep_token_file_in_step(&args.data_dir, &t)?;
            t
        }
        None => admin_token_file(&args.data_dir)?,
    })
}

/// Fewest characters of an admin token: 32 random characters of any
/// kind people type are well over 128 bits; a generated token has 64 hex
/// digits (256 bits).
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

/// The fewest guesses (as a power of ten) an admin token may take by
/// zxcvbn's estimate of the whole token: 10^18 is about 60 bits. zxcvbn
/// counts guesses in 64 bits, so it estimates at most about 10^19 for
/// anything: it sees repeats and patterns across the whole token, but it
/// cannot tell 60 bits from 256, which [`MIN_ADMIN_TOKEN_BITS`] does.
pub const MIN_ADMIN_TOKEN_GUESSES_LOG10: f64 = 18.0;

/// The fewest bits an admin token must be worth by
/// [`admin_token_bits`]: 128, what 16 random bytes are worth, out of reach
/// of any guessing, online or offline (a store backup or a log may show a
/// hash of it one day). `openssl rand -hex 32` makes a token worth about
/// 320 by this estimate (256 in truth); a passphrase of common words is
/// worth 10 to 15 bits a word, so it would need ten or more.
pub const MIN_ADMIN_TOKEN_BITS: f64 = 128.0;

/// The longest piece of a token [`admin_token_bits`] hands zxcvbn at once:
/// short enough that zxcvbn's 64-bit count of guesses does not saturate
/// (10^16 < 2^64), so that it really picks the cheapest reading of the
/// piece (words, sequences, dates, keyboard walks) over random letters.
pub(super) const ADMIN_TOKEN_PIECE_CHARS: usize = 16;

/// An admin token must be at least [`MIN_ADMIN_TOKEN_CHARS`] characters,
/// hold no blank or control character (it travels in a header), and look
/// random: at least 10^[`MIN_ADMIN_TOKEN_GUESSES_LOG10`] guesses by
/// zxcvbn's estimate of the whole token (which sees repeats, and what
/// people do to meet a length rule: a word and a year, keyboard walks,
/// sequences), and at least [`MIN_ADMIN_TOKEN_BITS`] bits by
/// [`admin_token_bits`] (which sees passphrases of dictionary words, such
/// as `correct-horse-battery-staple-2026!`, that zxcvbn's capped count
/// cannot tell from random text).
pub(super) fn check_admin_token(token: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !token.chars().any(|c| c.is_whitespace() || c.is_control()),
        "an admin token must not contain blanks or control characters"
    );
    let n = token.chars().count();
    anyhow::ensure!(
        n >= MIN_ADMIN_TOKEN_CHARS,
        "an admin token must be at least {MIN_ADMIN_TOKEN_CHARS} characters; this one has {n} \
         (leave it unset to have one generated into DATA_DIR/admin.token)"
    );
    let guesses = zxcvbn::zxcvbn(token, &[]).guesses_log10();
    anyhow::ensure!(
        guesses >= MIN_ADMIN_TOKEN_GUESSES_LOG10,
        "this admin token is easy to guess (about 10^{guesses:.0} guesses; at least \
         10^{MIN_ADMIN_TOKEN_GUESSES_LOG10:.0} are needed): make a random one with \
         `openssl rand -hex 32`, or leave it unset to have one generated into \
         DATA_DIR/admin.token"
    );
    let bits = admin_token_bits(token);
    anyhow::ensure!(
        bits >= MIN_ADMIN_TOKEN_BITS,
        "this admin token is easy to guess: it reads as words, dates, sequences or repeats \
         worth about {bits:.0} bits, and at least {MIN_ADMIN_TOKEN_BITS:.0} bits of random \
         text are needed (a passphrase is not enough): make a random one with `openssl rand \
         -hex 32`, or leave it unset to have one generated into DATA_DIR/admin.token"
    );
    Ok(())
}

/// What a token is worth, in bits, to a guesser who knows how people make
/// tokens: the cheapest reading of it as things zxcvbn knows (dictionary
/// words, names, common passwords, dates, sequences, keyboard walks,
/// repeats, each at zxcvbn's own count of guesses) and random characters
/// (each worth log2 of the size of the character classes the token uses:
/// 26 lowercase, 26 uppercase, 10 digits, 33 others).
///
/// The token is read in pieces: each run of letters and digits (cut every
/// [`ADMIN_TOKEN_PIECE_CHARS`] characters), and each other character on
/// its own (separators). A piece seen before adds nothing, so that
/// repeated words or separators count once. The order of the pieces is
/// not counted: the estimate errs low, never high. Random hex of 64
/// digits reads as about 320 bits, of 32 digits as about 165;
/// `correct-horse-battery-staple-2026!` as about 60 (while zxcvbn's count
/// for the whole of it is capped at 10^19, as for the hex).
pub fn admin_token_bits(token: &str) -> f64 {
    use zxcvbn::matching::patterns::MatchPattern;
    let has = |is: fn(&char) -> bool| token.chars().any(|c| is(&c));
    let mut cardinality: u32 = [
        (has(char::is_ascii_lowercase), 26),
        (has(char::is_ascii_uppercase), 26),
        (has(char::is_ascii_digit), 10),
    ]
    .iter()
    .filter(|(present, _)| *present)
    .map(|(_, n)| n)
    .sum();
    if token.chars().any(|c| !c.is_ascii_alphanumeric()) {
        cardinality += 33;
    }
    let per_char = f64::from(cardinality.max(2)).log2();
    let mut pieces: Vec<String> = Vec::new();
    let mut run = String::new();
    for c in token.chars() {
        if c.is_alphanumeric() {
            run.push(c);
            if run.chars().count() == ADMIN_TOKEN_PIECE_CHARS {
                pieces.push(std::mem::take(&mut run));
            }
        } else {
            if !run.is_empty() {
                pieces.push(std::mem::take(&mut run));
            }
            pieces.push(c.to_string());
        }
    }
    if !run.is_empty() {
        pieces.push(run);
    }
    let mut seen = std::collections::HashSet::new();
    let mut bits = 0.0;
    for piece in pieces {
        if !seen.insert(piece.to_lowercase()) {
            continue;
        }
        let random = piece.chars().count() as f64 * per_char;
        if piece.chars().count() == 1 {
            bits += random;
            continue;
        }
        let reading: f64 = zxcvbn::zxcvbn(&piece, &[])
            .sequence()
            .iter()
            .map(|m| {
                let random = m.token.chars().count() as f64 * per_char;
                match m.pattern {
                    MatchPattern::BruteForce => random,
                    _ => (m.guesses.unwrap_or(1).max(1) as f64).log2().min(random),
                }
            })
            .sum();
        bits += reading.min(random);
    }
    bits
}

/// Reads `DATA_DIR/admin.token` (made 0600 if it was looser), or creates it
/// (mode 0600) with a new random token and says where it is.
pub(super) fn admin_token_file(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => {
            make_private(&path, 0o600)?;
            let t = t.trim().to_string();
            check_admin_token(&t)
                .with_context(|| format!("the admin token in {}", path.display()))?;
            return Ok(t);
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let bytes: [u8; 32] = rand::random();
    let token = hex::encode(bytes);
    write_token_file(&path, &token)?;
    eprintln!("admin token written to {}", path.display());
    Ok(token)
}

/// With a token given (`--admin-token`, `DESKBROKER_ADMIN_TOKEN`): the CLI
/// reads `DATA_DIR/admin.token` when it is given no token, so a file left by
/// an earlier run that generated its token would make every CLI command
/// fail `Unauthorized`. A file that exists is therefore made to hold the
/// token in use (mode 0600, as a generated one), and serve says so. No file
/// is created when there is none: a token given from outside is written
/// only where the data dir already kept one.
pub(super) fn keep_token_file_in_step(dir: &Path, token: &str) -> anyhow::Result<()> {
    let path = dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(t) if t.trim() == token => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    write_token_file(&path, token)?;
    eprintln!(
        "{} held an older admin token: it now holds the one given \
         (--admin-token / DESKBROKER_ADMIN_TOKEN), which the CLI reads from there",
        path.display()
    );
    Ok(())
}

/// Writes `token` to `path` with mode 0600, durably, replacing the file
/// whole (a temporary file renamed over it), so that a crash leaves the old
/// token or the new one, and a replaced file does not keep looser
/// permissions.
pub(super) fn write_token_file(path: &Path, token: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("token.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = (|| -> std::io::Result<()> {
        // A stale temporary file may have other permissions: start anew.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = options.open(&tmp)?;
        writeln!(f, "{token}")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.with_context(|| format!("cannot write {}", path.display()))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_token_must_be_random_text_not_a_passphrase() {
        for weak in [
            "correct-horse-battery-staple-2026!",
            "CorrectHorseBatteryStaple2026!CorrectHorse",
            "correcthorsebatterystaplecorrecthorsebatterystaple",
            "Winter2026!Winter2026!Winter2026!",
            "passwordpasswordpasswordpassword",
            "abcdefghijklmnopqrstuvwxyz0123456789",
            "the-quick-brown-fox-jumps-over-the-lazy-dog-1",
            "test-admin-token-0123456789-abcdefghij",
            // Random, but one piece of it repeated four times.
            "q7Xv2LpZ9kR4mWn8q7Xv2LpZ9kR4mWn8q7Xv2LpZ9kR4mWn8q7Xv2LpZ9kR4mWn8",
        ] {
            let err = check_admin_token(weak).expect_err(weak).to_string();
            assert!(
                err.contains("easy to guess") && err.contains("openssl rand -hex 32"),
                "{weak}: {err}"
            );
        }
        for strong in [
            // openssl rand -hex 32, openssl rand -hex 16
            "5f0c9e2a7b3d41e8a6c2f9d0b7e4a1c35e8f2d6b9a0c4e7f1d3b5a8c2e6f9d0a",
            "9c1e5a7f3b0d42e86a9f1c3e5b7d0a24",
            // 32 random bytes as base64url (43 characters), and base64
            "kJ3v_Qm8ZtX-2pLr7Wc9NfYb4Hs6Ae1DgVu0Ko5RiTw",
            "Zq9V+T2mL8xR4cN7bW1kP6sJ3fH0dY5gA8eU2nXrC4o=",
        ] {
            check_admin_token(strong).unwrap_or_else(|e| {
                panic!("{strong}: {e:#} ({:.0} bits)", admin_token_bits(strong))
            });
        }
    }

    /// Every token the broker generates passes its own check.
    #[test]
    fn generated_tokens_pass() {
        for _ in 0..20 {
            let bytes: [u8; 32] = rand::random();
            let token = hex::encode(bytes);
            assert!(admin_token_bits(&token) >= 200.0, "{token}");
            check_admin_token(&token).unwrap_or_else(|e| panic!("{token}: {e:#}"));
        }
    }
}
