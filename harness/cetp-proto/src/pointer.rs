//! JSON Pointer (RFC 6901) reference tokens and their URI-fragment form
//! (RFC 3986 §3.5), in one place: the harness names schema locations,
//! argument paths and error locations with pointers, and property names may
//! hold any character, `~` and `/` included.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::borrow::Cow;

/// A reference token as it is written in a pointer: `~` as `~0`, `/` as `~1`.
pub fn escape(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

/// A written reference token back to the name it stands for (`~1` before
/// `~0`, so that `~01` is `~1`, as RFC 6901 §4 orders it).
pub fn unescape(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    }
}

/// Appends `/token`, escaped, to `pointer`.
pub fn push(pointer: &mut String, token: &str) {
    pointer.push('/');
    pointer.push_str(&escape(token));
}

/// The names a pointer's tokens stand for (`""` has none).
pub fn tokens(pointer: &str) -> Vec<String> {
    match pointer.strip_prefix('/') {
        None => Vec::new(),
        Some(rest) => rest.split('/').map(|t| unescape(t).into_owned()).collect(),
    }
}

/// Encoded in a fragment: all but RFC 3986 `pchar` and `/` (`%` included).
const FRAGMENT_ENCODED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@')
    .remove(b'/');

/// A pointer as a URI fragment (without `#`): everything but `pchar` and `/`
/// percent-encoded, so that any property name survives a `$ref`.
pub fn to_fragment(pointer: &str) -> String {
    utf8_percent_encode(pointer, FRAGMENT_ENCODED).to_string()
}

/// A URI fragment back to the pointer it encodes; `None` when the decoded
/// bytes are not UTF-8.
pub fn from_fragment(fragment: &str) -> Option<String> {
    percent_decode_str(fragment)
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_escape_and_come_back() {
        for name in ["plain", "a/b", "~", "~1", "a~/b", "", "é/ü"] {
            assert_eq!(unescape(&escape(name)), name);
        }
        assert_eq!(escape("a/b~c"), "a~1b~0c");
        assert_eq!(unescape("~01"), "~1");
        let mut p = String::new();
        push(&mut p, "properties");
        push(&mut p, "x/y");
        assert_eq!(p, "/properties/x~1y");
        assert_eq!(tokens(&p), ["properties", "x/y"]);
        assert!(tokens("").is_empty());
        assert_eq!(tokens("/"), [""]);
    }

    #[test]
    fn fragments_keep_pchar_and_encode_the_rest() {
        assert_eq!(to_fragment("/$defs/a b/%/é"), "/$defs/a%20b/%25/%C3%A9");
        assert_eq!(to_fragment("/a-._~!$&'()*+,;=:@"), "/a-._~!$&'()*+,;=:@");
        for p in ["/$defs/a b/%/é", "/x~1y", "", "/\"q\"#"] {
            assert_eq!(from_fragment(&to_fragment(p)).as_deref(), Some(p));
        }
        assert_eq!(from_fragment("/%FF"), None);
    }
}
