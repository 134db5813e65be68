//! Which leaderwatch a binary is: its version and the commit it was built from (set by
//! build.rs). A sitting's Job says it in its first log line, and refuses to run when the
//! machine that made the Job is another build (`measure --expect-build`): the laptop writes
//! the Job's arguments, so the two must be the same code.

use std::fmt;

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit the binary was built from, or `unknown` (a build without git and without the
/// Dockerfile's `LEADERWATCH_COMMIT` argument).
pub const COMMIT: &str = env!("LEADERWATCH_COMMIT");
/// What `--version` prints after the name.
pub const LONG_VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " commit ", env!("LEADERWATCH_COMMIT"));

/// A build: `VERSION+COMMIT` on a command line, `leaderwatch VERSION commit COMMIT` in a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub version: String,
    pub commit: String,
}

/// How an image's build compares with the one that made its Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    Same,
    /// Same version, and one side does not know its commit: it may be other code.
    CommitUnknown,
    Differs,
}

const UNKNOWN: &str = "unknown";
const LINE_PREFIX: &str = "leaderwatch ";

impl Build {
    /// This binary's.
    pub fn this() -> Build {
        Build { version: VERSION.to_owned(), commit: COMMIT.to_owned() }
    }

    /// `VERSION+COMMIT`, as [`Display`](fmt::Display) writes it.
    pub fn parse(s: &str) -> Result<Build, String> {
        match s.split_once('+') {
            Some((v, c)) if !v.is_empty() && !c.is_empty() && !c.contains(char::is_whitespace) => {
                Ok(Build { version: v.to_owned(), commit: c.to_owned() })
            }
            _ => Err(format!("{s:?} is not VERSION+COMMIT (e.g. 0.1.0+{COMMIT})")),
        }
    }

    /// The log line a Job starts with.
    pub fn line(&self) -> String {
        format!("{LINE_PREFIX}{} commit {}", self.version, self.commit)
    }

    /// The build a log line says, if it is such a line (the kubelet's timestamp removed).
    pub fn from_line(l: &str) -> Option<Build> {
        let (v, c) = l.trim().strip_prefix(LINE_PREFIX)?.split_once(" commit ")?;
        (!v.is_empty() && !c.is_empty() && !c.contains(' '))
            .then(|| Build { version: v.to_owned(), commit: c.to_owned() })
    }

    pub fn agrees(&self, other: &Build) -> Agreement {
        if self.version != other.version {
            Agreement::Differs
        } else if self.commit == UNKNOWN || other.commit == UNKNOWN {
            Agreement::CommitUnknown
        } else if self.commit == other.commit {
            Agreement::Same
        } else {
            Agreement::Differs
        }
    }
}

impl fmt::Display for Build {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{}", self.version, self.commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(v: &str, c: &str) -> Build {
        Build { version: v.into(), commit: c.into() }
    }

    #[test]
    fn a_build_reads_back_from_its_flag_value_and_its_log_line() {
        let this = Build::this();
        assert_eq!(Build::parse(&this.to_string()), Ok(this.clone()));
        assert_eq!(Build::from_line(&this.line()), Some(this.clone()));
        assert_eq!(Build::from_line("  leaderwatch 0.1.0 commit abc \n"), Some(b("0.1.0", "abc")));
        assert_eq!(Build::from_line("preflight PASS x"), None);
        assert!(Build::parse("0.1.0").is_err());
        assert!(Build::parse("+abc").is_err());
        assert!(Build::parse("0.1.0+").is_err());
    }

    #[test]
    fn builds_agree_only_on_the_same_version_and_commit() {
        assert_eq!(b("0.1.0", "a").agrees(&b("0.1.0", "a")), Agreement::Same);
        assert_eq!(b("0.1.0", "a").agrees(&b("0.1.0", "b")), Agreement::Differs);
        assert_eq!(b("0.1.0", "a").agrees(&b("0.2.0", "a")), Agreement::Differs);
        assert_eq!(b("0.1.0", "unknown").agrees(&b("0.1.0", "a")), Agreement::CommitUnknown);
        assert_eq!(b("0.1.0", "unknown").agrees(&b("0.2.0", "unknown")), Agreement::Differs);
    }
}
