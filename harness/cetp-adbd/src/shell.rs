//! Shell-v1 command handling: parsing the `shell[,args]:CMD` service name,
//! emulating the `; echo __rc=$?` idiom, the built-in `getprop`, and a small
//! POSIX-style word splitter that device services can use to parse what the
//! host sends (Debian's adb quotes every argument, e.g.
//! `pm 'install' '/data/local/tmp/app.apk'`).

/// A `shell` service request as named in an `OPEN` packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellRequest {
    /// Comma-separated arguments between `shell` and `:` (`v2`, `raw`, `pty`, `TERM=...`).
    pub args: Vec<String>,
    /// The command line (empty means an interactive shell).
    pub command: String,
}

/// Parse `shell:CMD` / `shell,ARG,...:CMD`. Returns `None` for other services.
pub(crate) fn parse_shell_service(service: &str) -> Option<ShellRequest> {
    let rest = service.strip_prefix("shell")?;
    let (args, command) = rest.split_once(':')?;
    let args = match args.strip_prefix(',') {
        Some(a) => a.split(',').map(str::to_owned).collect(),
        None if args.is_empty() => Vec::new(),
        None => return None, // e.g. "shellfoo:..."
    };
    Some(ShellRequest {
        args,
        command: command.to_owned(),
    })
}

/// The spellings of the exit-code probe we emulate.
const RC_PROBES: [&str; 3] = ["echo __rc=$?", "echo \"__rc=$?\"", "echo '__rc='$?"];

/// If `cmd` ends with `; echo __rc=$?` (shell v1 loses exit codes, so callers
/// ask the shell to print it), return the command before it. Shell v1 on a
/// real device runs this through `sh`; we have no `sh`, so the endpoint
/// runs the command and prints the code itself.
pub fn split_rc_probe(cmd: &str) -> Option<&str> {
    let trimmed = cmd.trim_end().trim_end_matches(';').trim_end();
    for probe in RC_PROBES {
        if let Some(before) = trimmed.strip_suffix(probe) {
            let before = before.trim_end_matches([' ', '\t']);
            if before.trim().is_empty() {
                return Some("");
            }
            if let Some(b) = before
                .strip_suffix(';')
                .or_else(|| before.strip_suffix('\n'))
            {
                return Some(b.trim());
            }
        }
    }
    None
}

/// The text `echo __rc=$?` prints for an exit code (a shell's `$?` is 0..=255).
pub fn rc_line(exit_code: i32) -> String {
    format!("__rc={}\n", exit_code & 0xff)
}

/// Split a command line into words as a POSIX shell would for simple
/// commands (the `shell-words` crate): whitespace separates words; `'...'`
/// is literal; `"..."` allows `\"`, `\\`, `\$`, `` \` `` escapes; a
/// backslash outside quotes escapes the next character. Operators (`;`,
/// `|`, `&&`, redirections) are not interpreted: they come back as
/// ordinary words. Returns `Err` for an unterminated quote.
pub fn shell_words(line: &str) -> Result<Vec<String>, String> {
    shell_words::split(line).map_err(|e| e.to_string())
}

/// Answer `getprop`, `getprop NAME` and `getprop NAME DEFAULT` from the
/// device properties, as toybox `getprop` prints them. Returns `None` when
/// `cmd` is not such a simple `getprop` (so pipelines etc. reach the service).
pub(crate) fn builtin_getprop(
    cmd: &str,
    props: impl FnOnce() -> Vec<(String, String)>,
) -> Option<Vec<u8>> {
    if cmd.contains(['|', ';', '&', '<', '>', '$', '`', '\n']) {
        return None;
    }
    let words = shell_words(cmd).ok()?;
    if words.first().map(String::as_str) != Some("getprop") || words.len() > 3 {
        return None;
    }
    let props = props();
    let out = match words.get(1) {
        None => {
            let mut sorted = props;
            sorted.sort();
            sorted
                .iter()
                .map(|(k, v)| format!("[{k}]: [{v}]\n"))
                .collect::<String>()
        }
        Some(name) => {
            let value = props
                .iter()
                .rev() // last definition wins, as in build.prop
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .or(words.get(2).map(String::as_str))
                .unwrap_or("");
            format!("{value}\n")
        }
    };
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shell_services() {
        assert_eq!(
            parse_shell_service("shell:echo hi"),
            Some(ShellRequest {
                args: vec![],
                command: "echo hi".into()
            })
        );
        assert_eq!(
            parse_shell_service("shell,v2,raw:ls -l"),
            Some(ShellRequest {
                args: vec!["v2".into(), "raw".into()],
                command: "ls -l".into()
            })
        );
        assert_eq!(parse_shell_service("shell:").unwrap().command, "");
        assert_eq!(parse_shell_service("shellx:ls"), None);
        assert_eq!(parse_shell_service("shell"), None);
        assert_eq!(parse_shell_service("sync:"), None);
    }

    #[test]
    fn rc_probe() {
        assert_eq!(split_rc_probe("echo hi; echo __rc=$?"), Some("echo hi"));
        assert_eq!(split_rc_probe("echo hi ;echo __rc=$?"), Some("echo hi"));
        assert_eq!(split_rc_probe("a; b; echo \"__rc=$?\" "), Some("a; b"));
        assert_eq!(
            split_rc_probe("pm list packages\necho __rc=$?"),
            Some("pm list packages")
        );
        assert_eq!(split_rc_probe("echo __rc=$?"), Some(""));
        assert_eq!(split_rc_probe("echo hi"), None);
        assert_eq!(split_rc_probe("xecho __rc=$?"), None);
        assert_eq!(rc_line(0), "__rc=0\n");
        assert_eq!(rc_line(256 + 3), "__rc=3\n");
        assert_eq!(rc_line(-1), "__rc=255\n");
    }

    #[test]
    fn words() {
        assert_eq!(
            shell_words("pm 'install' '/data/local/tmp/a b.apk'").unwrap(),
            vec!["pm", "install", "/data/local/tmp/a b.apk"]
        );
        assert_eq!(
            shell_words(r#"  am  start -n "x/.Y" -e k 'it'\''s' a\ b "q\"x" ''"#).unwrap(),
            vec!["am", "start", "-n", "x/.Y", "-e", "k", "it's", "a b", "q\"x", ""]
        );
        assert!(shell_words("echo 'oops").is_err());
        assert!(shell_words("echo \"oops").is_err());
        assert_eq!(shell_words("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn getprop() {
        let props = || {
            vec![
                ("ro.build.version.sdk".to_string(), "34".to_string()),
                ("ro.product.model".to_string(), "Sim".to_string()),
            ]
        };
        assert_eq!(
            builtin_getprop("getprop ro.build.version.sdk", props).unwrap(),
            b"34\n"
        );
        assert_eq!(
            builtin_getprop("getprop 'ro.product.model'", props).unwrap(),
            b"Sim\n"
        );
        assert_eq!(builtin_getprop("getprop nope", props).unwrap(), b"\n");
        assert_eq!(
            builtin_getprop("getprop nope dflt", props).unwrap(),
            b"dflt\n"
        );
        assert_eq!(
            builtin_getprop("getprop", props).unwrap(),
            b"[ro.build.version.sdk]: [34]\n[ro.product.model]: [Sim]\n"
        );
        assert_eq!(builtin_getprop("getprop | grep sdk", props), None);
        assert_eq!(builtin_getprop("echo getprop", props), None);
    }
}
