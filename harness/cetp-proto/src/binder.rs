//! Binder's transaction limit, for devices that model it.
//!
//! A Bundle crosses processes as a `Parcel` in one Binder transaction, and
//! a transaction's data must fit the receiving process's Binder buffer:
//! `BINDER_VM_SIZE`, 1 MiB less two pages (AOSP `ProcessState.cpp`),
//! shared by every transaction in flight. An answer larger than that never
//! reaches the caller; its `call()` fails (`TransactionTooLargeException`,
//! or a `DeadObjectException` "Transaction failed on small parcel"). A
//! probe-wire device over TCP carries any size, so a Consumer scenario
//! whose premise is this limit is judged only on a device that enforces
//! it and says so (`hello`'s `binder_transaction_limit`).

use crate::bundle::{Bundle, Value};

/// The most bytes one transaction can carry: 1 MiB less two 4 KiB pages.
pub const TRANSACTION_LIMIT_BYTES: usize = 1024 * 1024 - 2 * 4096;

/// A lower estimate of the bytes `Parcel.writeBundle` writes for `b`: what
/// its keys and values take at least (strings as UTF-16 with a length and a
/// terminator, numbers at their width, each value with its type tag), not
/// Android's exact layout. A lower estimate only ever lets through a Bundle
/// a phone might refuse, never refuses one a phone would carry.
pub fn parcel_bytes(b: &Bundle) -> usize {
    // The Bundle's length prefix, magic and key count.
    let mut n = 12usize;
    for (k, v) in &b.0 {
        n = n.saturating_add(string_bytes(k.encode_utf16().count()));
        n = n.saturating_add(4 + value_bytes(v));
    }
    n
}

/// A String in a Parcel: its UTF-16 length, the units and a terminator,
/// padded to 4 bytes.
fn string_bytes(units: usize) -> usize {
    4usize.saturating_add(
        units
            .saturating_add(1)
            .saturating_mul(2)
            .next_multiple_of(4),
    )
}

fn value_bytes(v: &Value) -> usize {
    let array = |len: usize, width: usize| 4usize.saturating_add(len.saturating_mul(width));
    let strings = |a: &[String]| {
        a.iter().fold(4usize, |n, s| {
            n.saturating_add(string_bytes(s.encode_utf16().count()))
        })
    };
    match v {
        Value::Null => 0,
        Value::Bool(_) | Value::Int(_) | Value::Float(_) => 4,
        Value::Long(_) | Value::Double(_) => 8,
        Value::String(s) => string_bytes(s.encode_utf16().count()),
        Value::Utf16String(u) => string_bytes(u.len()),
        Value::IntArray(a) => array(a.len(), 4),
        Value::LongArray(a) => array(a.len(), 8),
        Value::BoolArray(a) => array(a.len(), 4),
        Value::DoubleArray(a) => array(a.len(), 8),
        Value::StringArray(a) | Value::StringList(a) => strings(a),
        Value::Bytes(a) => array(a.len(), 1).next_multiple_of(4),
        Value::Bundle(inner) => parcel_bytes(inner),
        // Binder objects and values the host cannot see into: a flat
        // object each, at least.
        Value::PendingIntent(_) | Value::Fd(_) | Value::Other { .. } => 24,
    }
}

/// Whether `b` is too large for one Binder transaction.
pub fn exceeds_transaction_limit(b: &Bundle) -> bool {
    parcel_bytes(b) > TRANSACTION_LIMIT_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(key: &str, v: Value) -> Bundle {
        let mut b = Bundle::new();
        b.insert(key, v);
        b
    }

    #[test]
    fn a_two_megabyte_description_does_not_fit_and_a_few_kilobytes_do() {
        let big = "Reads data. ".repeat(200_000);
        assert!(big.len() > 2_000_000);
        assert!(exceeds_transaction_limit(&with("data", Value::String(big))));
        // Half a million UTF-16 units are a megabyte already.
        assert!(exceeds_transaction_limit(&with(
            "data",
            Value::String("x".repeat(530_000))
        )));
        let small = with("data", Value::String("x".repeat(240_000)));
        assert!(!exceeds_transaction_limit(&small));
        assert!(parcel_bytes(&small) >= 480_000);
    }

    #[test]
    fn nested_bundles_and_arrays_count() {
        let inner = with("s", Value::StringArray(vec!["y".repeat(300_000); 2]));
        assert!(exceeds_transaction_limit(&with("b", Value::Bundle(inner))));
        assert_eq!(parcel_bytes(&Bundle::new()), 12);
        // "k": 4 + 4 (two units with the terminator), a tag, an Int.
        assert_eq!(parcel_bytes(&with("k", Value::Int(2))), 12 + 8 + 4 + 4);
    }
}
