//! Escaping of Provider-controlled text for each output medium.

/// For a terminal: control characters (ANSI escape sequences, carriage
/// returns that overwrite lines, bells) and bidi overrides are shown as
/// `\u{..}` instead of being interpreted; lines are capped.
pub fn terminal(s: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max_chars * 2));
    for (n, c) in s.chars().enumerate() {
        if n >= max_chars {
            out.push('…');
            break;
        }
        let dangerous = c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}');
        if dangerous {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Words of a command line as a POSIX shell reads them back: each quoted
/// when it holds what a shell would read otherwise (a space, `$`, a
/// quote), joined by spaces. Not yet safe for any medium: the caller
/// escapes the line for its own (a word a shell cannot carry, with a NUL,
/// is left as it is and the medium's escape shows the NUL).
pub fn shell_words<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    words
        .into_iter()
        .map(|w| shlex::try_quote(w).map_or_else(|_| w.to_string(), |q| q.into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// For XML 1.0 text and attribute values: markup characters become entities;
/// characters XML 1.0 cannot carry at all (most C0 controls) become `\u{..}`.
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push_str(&format!("&#{};", c as u32)),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// For XML 1.0 text that its writer escapes for markup itself (quick-junit
/// in `junit.xml`): as for a terminal, and the two characters above the C0
/// range that XML 1.0 cannot carry at all (U+FFFE, U+FFFF) shown as
/// `\u{..}` too, since one of them makes the whole file unreadable to a
/// conforming parser.
pub fn xml_chars(s: &str, max_chars: usize) -> String {
    let t = terminal(s, max_chars);
    if !t.contains(['\u{FFFE}', '\u{FFFF}']) {
        return t;
    }
    let mut out = String::with_capacity(t.len() + 16);
    for c in t.chars() {
        match c {
            '\u{FFFE}' | '\u{FFFF}' => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// For Markdown (a pull-request comment): first as for a terminal (no
/// controls, no bidi overrides, capped), then every character Markdown or
/// the HTML it may embed gives a meaning is backslash-escaped or an entity,
/// so Provider text can neither close a table cell nor start a link, an
/// image, code or a tag.
pub fn markdown(s: &str, max_chars: usize) -> String {
    let t = terminal(s, max_chars);
    let mut out = String::with_capacity(t.len() + 8);
    for c in t.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            // Newlines are already `\u{a}`, so nothing here starts a line:
            // only the inline syntax needs escaping.
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_reads_back_as_its_words() {
        let words = [
            "--target",
            "jvm:/a b/x.jar,classpath=/c",
            "--profile",
            "it's.toml",
            "plain",
        ];
        let line = shell_words(words);
        assert_eq!(shlex::split(&line).unwrap(), words);
        assert!(line.ends_with(" plain"), "{line}");
    }

    #[test]
    fn markdown_cannot_break_out() {
        let hostile = "a|b <script>x</script> ![i](http://e/x) `c` \u{202E}\n# h";
        let shown = markdown(hostile, 200);
        assert!(!shown.contains('<') && !shown.contains('\n'));
        assert!(shown.contains("\\|") && shown.contains("\\!\\[i\\]"));
        assert!(!shown.contains('\u{202E}'));
    }

    #[test]
    fn ansi_and_bidi_are_neutralized() {
        let hostile = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}\r\u{202E}txt.exe";
        let shown = terminal(hostile, 200);
        assert!(!shown.chars().any(|c| c.is_control()));
        assert!(!shown.contains('\u{202E}'));
        assert!(shown.contains("\\u{1b}[2J"));
        assert_eq!(terminal("abcdef", 3), "abc…");
    }

    #[test]
    fn xml_chars_keeps_only_what_xml_can_carry() {
        // Found by the `reporters` fuzz target: U+FFFE from a Provider made
        // junit.xml ill-formed.
        let shown = xml_chars("a\u{fffe}b\u{ffff}\u{1b}c\u{202e}", 200);
        assert_eq!(shown, "a\\u{fffe}b\\u{ffff}\\u{1b}c\\u{202e}");
        assert_eq!(xml_chars("abcdef", 3), "abc…");
    }

    #[test]
    fn xml_markup_and_controls() {
        assert_eq!(xml("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
        assert_eq!(xml("\u{1b}\n"), "\\u{1b}&#10;");
    }
}
