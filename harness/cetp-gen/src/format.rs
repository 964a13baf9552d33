//! Strings for the `format`s the jsonschema crate checks (with
//! `should_validate_formats(true)` and without its `idna` feature, as the
//! workspace builds it). Each generator makes only values that crate's
//! checker accepts; the corpus tests hold them to it.

use proptest::prelude::*;
use proptest::string::string_regex;

/// Formats jsonschema checks for draft 2020-12 in this build. A format not
/// listed is an annotation there: any string passes.
pub(crate) const CHECKED: &[&str] = &[
    "date",
    "date-time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "time",
    "uri",
    "uri-reference",
    "uri-template",
    "uuid",
];

/// Formats this build of jsonschema does not check (it would need its
/// `idna` feature) but that the suite tests: generated all the same, in
/// their ASCII subset (an ASCII hostname is an IDN hostname, an ASCII
/// address an internationalized one), so that a stricter judge accepts
/// them too.
pub(crate) const UNCHECKED_GENERATED: &[&str] = &["idn-email", "idn-hostname"];

fn re(pattern: &str) -> BoxedStrategy<String> {
    string_regex(pattern)
        .expect("the format regexes are constants of this file")
        .boxed()
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn date() -> BoxedStrategy<String> {
    (1900u32..=2100, 1u32..=12, 1u32..=31)
        .prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{:02}", d.min(days_in(y, m))))
        .boxed()
}

fn time() -> BoxedStrategy<String> {
    let offset = prop_oneof![
        Just("Z".to_string()),
        (any::<bool>(), 0u32..=23, 0u32..=59)
            .prop_map(|(plus, h, m)| format!("{}{h:02}:{m:02}", if plus { '+' } else { '-' })),
    ];
    (
        0u32..=23,
        0u32..=59,
        0u32..=59,
        proptest::option::of(re("[0-9]{1,6}")),
        offset,
    )
        .prop_map(|(h, m, s, frac, off)| {
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{h:02}:{m:02}:{s:02}{frac}{off}")
        })
        .boxed()
}

/// Labels never carry `--` in their third and fourth characters (reserved
/// for A-labels, which the hostname check decodes) and the last label starts
/// with a letter.
fn hostname() -> BoxedStrategy<String> {
    re("([a-z0-9]{1,10}\\.){0,2}[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,5})?")
}

fn uri() -> BoxedStrategy<String> {
    (
        prop_oneof![Just("https"), Just("http"), Just("ftp")],
        hostname(),
        re("(/[a-zA-Z0-9._~-]{0,8}){0,3}"),
        proptest::option::of(re("[a-z]{1,5}=[a-z0-9]{0,6}")),
    )
        .prop_map(|(scheme, host, path, query)| {
            let query = query.map(|q| format!("?{q}")).unwrap_or_default();
            format!("{scheme}://{host}{path}{query}")
        })
        .boxed()
}

/// A strategy for `name`, or None when the format is not one jsonschema
/// checks (then any string is valid for it).
pub(crate) fn strategy(name: &str) -> Option<BoxedStrategy<String>> {
    Some(match name {
        "date" => date(),
        "time" => time(),
        "date-time" => (date(), time())
            .prop_map(|(d, t)| format!("{d}T{t}"))
            .boxed(),
        "duration" => prop_oneof![
            (1u32..=999).prop_map(|n| format!("P{n}D")),
            (1u32..=52).prop_map(|n| format!("P{n}W")),
            (0u32..=23, 0u32..=59).prop_map(|(h, m)| format!("PT{h}H{m}M")),
            (0u32..=9, 1u32..=11, 1u32..=30, 0u32..=59)
                .prop_map(|(y, mo, d, s)| format!("P{y}Y{mo}M{d}DT{s}S")),
        ]
        .boxed(),
        "email" | "idn-email" => (re("[a-z0-9]{1,12}(\\.[a-z0-9]{1,6})?"), hostname())
            .prop_map(|(local, host)| format!("{local}@{host}"))
            .boxed(),
        "hostname" | "idn-hostname" => hostname(),
        "ipv4" => any::<[u8; 4]>()
            .prop_map(|o| std::net::Ipv4Addr::from(o).to_string())
            .boxed(),
        "ipv6" => any::<[u16; 8]>()
            .prop_map(|s| std::net::Ipv6Addr::from(s).to_string())
            .boxed(),
        "uri" | "iri" => uri(),
        "uri-reference" | "iri-reference" => {
            prop_oneof![uri(), re("(/[a-z0-9]{1,8}){1,3}")].boxed()
        }
        "json-pointer" => re("(/[a-z0-9]{0,6}){0,4}"),
        // A non-negative integer without leading zeros (RFC draft
        // bhutton-relative-json-pointer-00 §3), then `#` or a JSON pointer.
        "relative-json-pointer" => re("(0|[1-9][0-9]?)(#|(/[a-z0-9]{0,6}){0,3})"),
        "regex" => prop_oneof![
            Just("^[a-z]+$".to_string()),
            Just("[0-9]{2,4}".to_string()),
            re("[a-z]{1,8}"),
        ]
        .boxed(),
        "uri-template" => (hostname(), re("[a-z]{1,8}"))
            .prop_map(|(h, v)| format!("https://{h}/{{{v}}}"))
            .boxed(),
        "uuid" => any::<[u8; 16]>()
            .prop_map(|b| uuid::Uuid::from_bytes(b).to_string())
            .boxed(),
        _ => return None,
    })
}
