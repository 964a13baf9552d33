//! Canonical text of floats and doubles.
//!
//! The digits are the shortest that read back to the same value (of the
//! value's own width: a float gets the shortest digits that read back to the
//! same float). Ties between two equally short candidates go to the one
//! closest to the exact binary value, then to an even last digit. The digits
//! come from `zmij`, the formatter serde_json uses. The layout is ours,
//! written out below, so that it stays fixed whatever a formatter does in a
//! later release, and so that a Java or Python peer can reproduce it from the
//! rule alone. For doubles it equals serde_json's output (tested).
//!
//! With the shortest digits `d1 d2 … dn` and the decimal exponent `E` of the
//! value `d1.d2…dn × 10^E`:
//! - fixed notation when `-5 <= E <= 15`: all digits with the point placed,
//!   zeros filled in, and `.0` added to an integral value (`100.0`,
//!   `0.00012`, `1.5`);
//! - scientific otherwise: `d1`, then `.d2…dn` when `n > 1`, then `e`, the
//!   sign (`+` or `-`), and `|E|` without leading zeros (`1e+16`, `1.5e-7`).
//!
//! Zero is `0.0` or `-0.0`. Floats use the same layout as doubles (unlike
//! serde_json, which switches notation at other exponents for `f32`): the
//! shortest digits of a float, read as a double, are also that double's
//! shortest digits, so a float re-encoded through an untyped JSON number
//! keeps its exact text.

use std::ops::RangeInclusive;

const FIXED: RangeInclusive<i32> = -5..=15;

/// Writes a finite double; a non-finite one is the caller's to handle.
pub(crate) fn write_f64(out: &mut Vec<u8>, v: f64) {
    let mut buf = zmij::Buffer::new();
    layout(out, buf.format_finite(v));
}

pub(crate) fn write_f32(out: &mut Vec<u8>, v: f32) {
    let mut buf = zmij::Buffer::new();
    layout(out, buf.format_finite(v));
}

/// Canonical text of a finite double.
pub fn f64_text(v: f64) -> String {
    let mut out = Vec::new();
    write_f64(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

/// Canonical text of a finite float.
pub fn f32_text(v: f32) -> String {
    let mut out = Vec::new();
    write_f32(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

/// Splits a formatter's output (any of its layouts) into sign, significant
/// digits without leading or trailing zeros, and the decimal exponent of the
/// first digit.
fn decompose(text: &str) -> (bool, Vec<u8>, i32) {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: Vec<u8> = int_part.bytes().chain(frac_part.bytes()).collect();
    let mut exp = exp + int_part.len() as i32 - 1;
    let leading = digits.iter().take_while(|&&d| d == b'0').count();
    if leading == digits.len() {
        return (negative, vec![b'0'], 0);
    }
    digits.drain(..leading);
    exp -= leading as i32;
    while digits.last() == Some(&b'0') {
        digits.pop();
    }
    (negative, digits, exp)
}

fn layout(out: &mut Vec<u8>, formatted: &str) {
    let (negative, digits, exp) = decompose(formatted);
    if negative {
        out.push(b'-');
    }
    if digits == b"0" {
        out.extend_from_slice(b"0.0");
        return;
    }
    let n = digits.len() as i32;
    if FIXED.contains(&exp) {
        if exp >= n - 1 {
            out.extend_from_slice(&digits);
            out.resize(out.len() + (exp - (n - 1)) as usize, b'0');
            out.extend_from_slice(b".0");
        } else if exp >= 0 {
            let point = (exp + 1) as usize;
            out.extend_from_slice(&digits[..point]);
            out.push(b'.');
            out.extend_from_slice(&digits[point..]);
        } else {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + (-exp - 1) as usize, b'0');
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        out.extend_from_slice(exp.unsigned_abs().to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        let cases: [(f64, &str); 14] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e-5, "0.00001"),
            (1.2e-6, "1.2e-6"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (-127111427579672.62, "-127111427579672.62"),
        ];
        for (v, text) in cases {
            assert_eq!(f64_text(v), text);
        }
        let cases32: [(f32, &str); 9] = [
            (0.1, "0.1"),
            (1e12, "1000000000000.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1e-5, "0.00001"),
            (1e-6, "1e-6"),
            (f32::MAX, "3.4028235e+38"),
            (1e-45, "1e-45"),
            // A tie between 298857.12 and 298857.13: even last digit.
            (f32::from_bits(0x4891_ED24), "298857.12"), // 298857.125 exactly
        ];
        for (v, text) in cases32 {
            assert_eq!(f32_text(v), text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn f64_matches_serde_json_and_round_trips(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            let text = f64_text(v);
            prop_assert_eq!(&text, &serde_json::to_string(&v).unwrap());
            prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), v.to_bits());
        }

        #[test]
        fn f32_round_trips_and_survives_untyped_reencoding(bits in any::<u32>()) {
            let v = f32::from_bits(bits);
            prop_assume!(v.is_finite());
            let text = f32_text(v);
            prop_assert_eq!(text.parse::<f32>().unwrap().to_bits(), v.to_bits());
            // Same digits as serde_json's float output, only the layout may differ.
            prop_assert_eq!(decompose(&text), decompose(&serde_json::to_string(&v).unwrap()));
            // Read as a double and written again, the text does not change.
            prop_assert_eq!(f64_text(text.parse::<f64>().unwrap()), text);
        }
    }
}
