//! Small deterministic helpers: the seeded token generator and UTC dates.

use cetp_proto::canonical::sha256_hex;
use sha2::{Digest, Sha256};
use std::sync::{Mutex, MutexGuard};

/// A hash-based generator: every output is SHA-256 of a secret derived from
/// the seed, a purpose label and a counter. Outputs are reproducible from the
/// seed (runs replay exactly) and unpredictable without it (§2.2: session
/// tokens must not be guessable).
#[derive(Clone, Debug)]
pub(crate) struct DetRng {
    secret: [u8; 32],
    counter: u64,
}

impl DetRng {
    pub(crate) fn new(seed: u64) -> Self {
        let mut h = Sha256::new();
        h.update(b"cetp-reference/provider-secret/");
        h.update(seed.to_le_bytes());
        DetRng {
            secret: h.finalize().into(),
            counter: 0,
        }
    }

    /// 64 lowercase hex digits.
    pub(crate) fn hex(&mut self, purpose: &str) -> String {
        self.counter += 1;
        let mut input = Vec::with_capacity(32 + purpose.len() + 9);
        input.extend_from_slice(&self.secret);
        input.extend_from_slice(purpose.as_bytes());
        input.push(0);
        input.extend_from_slice(&self.counter.to_le_bytes());
        sha256_hex(&input)
    }

    /// `len` characters of RFC 4648 base32 in lowercase (`a-z2-7`), at
    /// most 51 (the 256 bits of one draw).
    pub(crate) fn base32(&mut self, purpose: &str, len: usize) -> String {
        const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
        let bytes = hex::decode(self.hex(purpose)).unwrap_or_default();
        let bit = |i: usize| (bytes[i / 8] >> (7 - i % 8)) & 1;
        (0..len.min(51))
            .map(|c| {
                let v = (0..5).fold(0usize, |acc, k| (acc << 1) | usize::from(bit(c * 5 + k)));
                char::from(ALPHABET[v])
            })
            .collect()
    }

    /// 43 characters of unpadded base64url: one 256-bit draw.
    pub(crate) fn base64url(&mut self, purpose: &str) -> String {
        use base64::Engine as _;
        let bytes = hex::decode(self.hex(purpose)).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A random (version 4) UUID. The variant nibble is always `8`: the
    /// reference has drawn its ids that way from the start, and recorded
    /// runs keep their ids.
    pub(crate) fn uuid(&mut self) -> String {
        let mut b = [0u8; 16];
        b.copy_from_slice(&hex::decode(self.hex("uuid")).unwrap_or_else(|_| vec![0; 32])[..16]);
        b[8] &= 0x0f;
        uuid::Builder::from_random_bytes(b).into_uuid().to_string()
    }
}

/// RFC 3339 UTC timestamp (second precision) of Unix epoch milliseconds,
/// clamped to the years 1970..=9999 that keep RFC 3339's four-digit form.
pub(crate) fn rfc3339_utc(ms: i64) -> String {
    let ms = ms.clamp(0, 253_402_300_799_999);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A poisoned lock only means another call panicked mid-way; the state it
/// guards is still the best we have, and a Provider must keep answering.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_788_350_400_000), "2026-09-02T12:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(-5), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(i64::MAX), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn rng_is_seeded() {
        let mut a = DetRng::new(7);
        let mut b = DetRng::new(7);
        let mut c = DetRng::new(8);
        let (x, y, z) = (a.hex("t"), b.hex("t"), c.hex("t"));
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert_ne!(a.hex("t"), x);
        assert!(cetp_proto::envelope::is_uuid(&a.uuid()));
    }

    #[test]
    fn encodings() {
        let mut r = DetRng::new(1);
        let b32 = r.base32("t", 10);
        assert_eq!(b32.len(), 10);
        assert!(b32
            .bytes()
            .all(|c| c.is_ascii_lowercase() || (b'2'..=b'7').contains(&c)));
        assert_eq!(r.base32("t", 99).len(), 51);
        let b64 = r.base64url("t");
        assert_eq!(b64.len(), 43);
        assert!(b64
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        // The first character carries the top six bits of the draw.
        let mut again = DetRng::new(1);
        again.hex("t");
        again.hex("t");
        let first = u8::from_str_radix(&again.hex("t")[..2], 16).unwrap() >> 2;
        assert_eq!(
            b64.as_bytes()[0],
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[first as usize]
        );
    }
}
