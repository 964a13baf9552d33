//! ADB transport packets: a 24-byte little-endian header followed by a payload.
//!
//! The header is `command, arg0, arg1, data_length, data_check, magic` where
//! `magic == command ^ 0xffff_ffff`. `data_check` is the byte-sum of the payload
//! for protocol versions before [`VERSION_SKIP_CHECKSUM`]; newer peers may send
//! anything (usually 0 or the sum) and receivers must not check it.
//!
//! Everything here is written for hostile input: decoding never panics, it
//! returns a [`PacketError`] for a bad magic, a payload larger than the agreed
//! maximum, a truncated buffer or a wrong checksum.

use tokio::io::{AsyncRead, AsyncReadExt};

/// `SYNC` (obsolete, never sent by current peers).
pub const A_SYNC: u32 = 0x434e_5953;
/// `CNXN`: connection handshake (arg0 = version, arg1 = max payload, payload = banner).
pub const A_CNXN: u32 = 0x4e58_4e43;
/// `AUTH`: authentication (we never require it, so we never send it).
pub const A_AUTH: u32 = 0x4854_5541;
/// `OPEN`: open a stream (arg0 = opener's local id, payload = service name).
pub const A_OPEN: u32 = 0x4e45_504f;
/// `OKAY`: stream opened / data acknowledged (arg0 = sender's local id, arg1 = receiver's id).
pub const A_OKAY: u32 = 0x5941_4b4f;
/// `CLSE`: stream closed (arg0 = sender's local id or 0 for a refused OPEN).
pub const A_CLSE: u32 = 0x4553_4c43;
/// `WRTE`: stream data.
pub const A_WRTE: u32 = 0x4554_5257;
/// `STLS`: switch to TLS (we never send it, so a well-behaved host never sends it either).
pub const A_STLS: u32 = 0x534c_5453;

/// The oldest protocol version (checksummed payloads, 4 KiB max payload).
pub const A_VERSION_MIN: u32 = 0x0100_0000;
/// From this version on, receivers skip payload checksum verification.
pub const VERSION_SKIP_CHECKSUM: u32 = 0x0100_0001;
/// The protocol version we speak.
pub const A_VERSION: u32 = 0x0100_0001;

/// Size of the fixed packet header.
pub const HEADER_LEN: usize = 24;

/// Errors decoding a packet. None of them is a panic: the connection that
/// produced one is simply ended.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PacketError {
    /// The `magic` field is not `command ^ 0xffffffff`: the peer is not
    /// speaking ADB, or the stream lost framing.
    #[error("bad magic {magic:#010x} for command {command:#010x}")]
    BadMagic {
        /// The command field.
        command: u32,
        /// The magic field as received.
        magic: u32,
    },
    /// The payload length exceeds the negotiated maximum; refusing it bounds memory use.
    #[error("payload length {len} exceeds maximum {max}")]
    TooLarge {
        /// Length announced in the header.
        len: u32,
        /// The maximum in force.
        max: u32,
    },
    /// Fewer bytes are available than the header announces.
    #[error("truncated packet: need {needed} bytes, have {have}")]
    Truncated {
        /// Bytes needed for the full packet.
        needed: usize,
        /// Bytes available.
        have: usize,
    },
    /// The payload byte-sum does not match (only checked for old protocol versions).
    #[error("checksum mismatch: header says {expected:#x}, payload sums to {actual:#x}")]
    BadChecksum {
        /// Checksum from the header.
        expected: u32,
        /// Checksum computed over the payload.
        actual: u32,
    },
}

/// Errors reading a packet from a byte stream.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The packet is malformed.
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// The underlying stream failed or ended (clean EOF before a header is `UnexpectedEof` too).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The parsed fixed header of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Command (`A_CNXN`, `A_OPEN`, ...).
    pub command: u32,
    /// First argument.
    pub arg0: u32,
    /// Second argument.
    pub arg1: u32,
    /// Payload length.
    pub data_length: u32,
    /// Payload checksum (byte sum), meaningful only for old versions.
    pub data_check: u32,
}

impl Header {
    /// Parse and validate a header: checks the magic and that the payload
    /// length is at most `max_payload`.
    pub fn parse(buf: &[u8; HEADER_LEN], max_payload: u32) -> Result<Header, PacketError> {
        let word = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let command = word(0);
        let magic = word(20);
        if magic != command ^ 0xffff_ffff {
            return Err(PacketError::BadMagic { command, magic });
        }
        let data_length = word(12);
        if data_length > max_payload {
            return Err(PacketError::TooLarge {
                len: data_length,
                max: max_payload,
            });
        }
        Ok(Header {
            command,
            arg0: word(4),
            arg1: word(8),
            data_length,
            data_check: word(16),
        })
    }
}

/// One ADB packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Command (`A_CNXN`, `A_OPEN`, ...).
    pub command: u32,
    /// First argument.
    pub arg0: u32,
    /// Second argument.
    pub arg1: u32,
    /// Payload bytes.
    pub payload: Vec<u8>,
}

/// Sum of payload bytes, the pre-[`VERSION_SKIP_CHECKSUM`] checksum.
pub fn checksum(data: &[u8]) -> u32 {
    data.iter()
        .fold(0u32, |acc, &b| acc.wrapping_add(u32::from(b)))
}

/// Render a command word as its four ASCII letters, for diagnostics.
pub fn command_name(command: u32) -> String {
    command
        .to_le_bytes()
        .iter()
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

impl Packet {
    /// A packet with the given fields.
    pub fn new(command: u32, arg0: u32, arg1: u32, payload: Vec<u8>) -> Packet {
        Packet {
            command,
            arg0,
            arg1,
            payload,
        }
    }

    /// The 24-byte header for this packet. We always fill in the byte-sum
    /// checksum: old peers require it and new ones ignore it.
    pub fn header_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        // Payloads are bounded by the negotiated max payload (< 4 GiB) by construction.
        let len = u32::try_from(self.payload.len()).unwrap_or(u32::MAX);
        for (i, v) in [
            self.command,
            self.arg0,
            self.arg1,
            len,
            checksum(&self.payload),
            self.command ^ 0xffff_ffff,
        ]
        .into_iter()
        .enumerate()
        {
            h[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        h
    }

    /// Header followed by payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN + self.payload.len());
        v.extend_from_slice(&self.header_bytes());
        v.extend_from_slice(&self.payload);
        v
    }

    /// Decode one packet from the start of `buf`, returning it and the number
    /// of bytes consumed. `verify_checksum` should be true only when the
    /// protocol version in force is below [`VERSION_SKIP_CHECKSUM`].
    pub fn decode(
        buf: &[u8],
        max_payload: u32,
        verify_checksum: bool,
    ) -> Result<(Packet, usize), PacketError> {
        let Some(head) = buf.get(..HEADER_LEN) else {
            return Err(PacketError::Truncated {
                needed: HEADER_LEN,
                have: buf.len(),
            });
        };
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(head);
        let h = Header::parse(&hb, max_payload)?;
        let total = HEADER_LEN + h.data_length as usize;
        let Some(payload) = buf.get(HEADER_LEN..total) else {
            return Err(PacketError::Truncated {
                needed: total,
                have: buf.len(),
            });
        };
        if verify_checksum {
            let actual = checksum(payload);
            if actual != h.data_check {
                return Err(PacketError::BadChecksum {
                    expected: h.data_check,
                    actual,
                });
            }
        }
        Ok((
            Packet::new(h.command, h.arg0, h.arg1, payload.to_vec()),
            total,
        ))
    }
}

/// Read one packet from `r`. `verify_checksum` decides, from the header,
/// whether the byte-sum must match (the caller knows the negotiated version;
/// for a `CNXN` the version is in the packet itself).
pub async fn read_packet<R, F>(
    r: &mut R,
    max_payload: u32,
    verify_checksum: F,
) -> Result<Packet, ReadError>
where
    R: AsyncRead + Unpin,
    F: FnOnce(&Header) -> bool,
{
    let mut hb = [0u8; HEADER_LEN];
    r.read_exact(&mut hb).await?;
    let h = Header::parse(&hb, max_payload)?;
    let mut payload = vec![0u8; h.data_length as usize];
    r.read_exact(&mut payload).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ReadError::Packet(PacketError::Truncated {
                needed: HEADER_LEN + h.data_length as usize,
                have: HEADER_LEN,
            })
        } else {
            ReadError::Io(e)
        }
    })?;
    if verify_checksum(&h) {
        let actual = checksum(&payload);
        if actual != h.data_check {
            return Err(PacketError::BadChecksum {
                expected: h.data_check,
                actual,
            }
            .into());
        }
    }
    Ok(Packet::new(h.command, h.arg0, h.arg1, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_constants_spell_their_names() {
        for (c, n) in [
            (A_SYNC, "SYNC"),
            (A_CNXN, "CNXN"),
            (A_AUTH, "AUTH"),
            (A_OPEN, "OPEN"),
            (A_OKAY, "OKAY"),
            (A_CLSE, "CLSE"),
            (A_WRTE, "WRTE"),
            (A_STLS, "STLS"),
        ] {
            assert_eq!(command_name(c), n);
        }
    }

    #[test]
    fn encode_matches_known_host_cnxn() {
        // Header captured from Debian's adb 29.0.6 connecting to a socket.
        let banner = b"host::features=remount_shell,abb_exec,abb,apex,fixed_push_mkdir,ls_v2,stat_v2,fixed_push_symlink_timestamp,cmd,shell_v2".to_vec();
        assert_eq!(banner.len(), 119);
        let p = Packet::new(A_CNXN, 0x0100_0001, 0x0010_0000, banner);
        let bytes = p.encode();
        assert_eq!(&bytes[0..4], b"CNXN");
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 119);
        assert_eq!(
            u32::from_le_bytes(bytes[16..20].try_into().unwrap()),
            0x2e40
        );
        assert_eq!(
            u32::from_le_bytes(bytes[20..24].try_into().unwrap()),
            0xb1a7_b1bc
        );
    }

    #[test]
    fn roundtrip() {
        let p = Packet::new(A_WRTE, 7, 9, (0..=255u8).cycle().take(5000).collect());
        let mut bytes = p.encode();
        bytes.extend_from_slice(b"trailing");
        let (q, used) = Packet::decode(&bytes, 1 << 20, true).unwrap();
        assert_eq!(q, p);
        assert_eq!(used, HEADER_LEN + 5000);
        // An empty payload round-trips too.
        let e = Packet::new(A_OKAY, 1, 2, vec![]);
        assert_eq!(Packet::decode(&e.encode(), 0, true).unwrap(), (e, 24));
    }

    #[test]
    fn bad_magic_is_an_error() {
        let mut bytes = Packet::new(A_OPEN, 1, 0, b"shell:ls\0".to_vec()).encode();
        bytes[20] ^= 1;
        assert!(matches!(
            Packet::decode(&bytes, 4096, false),
            Err(PacketError::BadMagic {
                command: A_OPEN,
                ..
            })
        ));
        // Pure garbage.
        assert!(matches!(
            Packet::decode(&[0xffu8; 64], 4096, false),
            Err(PacketError::BadMagic { .. })
        ));
    }

    #[test]
    fn oversize_length_is_an_error_before_reading_payload() {
        let mut bytes = Packet::new(A_WRTE, 1, 2, vec![]).encode();
        bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            Packet::decode(&bytes, 256 * 1024, false),
            Err(PacketError::TooLarge {
                len: u32::MAX,
                max: 256 * 1024
            })
        );
        let p = Packet::new(A_WRTE, 1, 2, vec![0; 4097]);
        assert!(matches!(
            Packet::decode(&p.encode(), 4096, false),
            Err(PacketError::TooLarge { len: 4097, .. })
        ));
    }

    #[test]
    fn truncated_is_an_error() {
        let bytes = Packet::new(A_WRTE, 1, 2, vec![1, 2, 3, 4]).encode();
        for cut in 0..bytes.len() {
            let r = Packet::decode(&bytes[..cut], 4096, true);
            assert!(
                matches!(r, Err(PacketError::Truncated { have, .. }) if have == cut),
                "cut {cut}: {r:?}"
            );
        }
    }

    #[test]
    fn checksum_checked_only_when_asked() {
        let mut bytes = Packet::new(A_WRTE, 1, 2, vec![1, 2, 3]).encode();
        bytes[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert!(Packet::decode(&bytes, 4096, false).is_ok());
        assert_eq!(
            Packet::decode(&bytes, 4096, true),
            Err(PacketError::BadChecksum {
                expected: 0,
                actual: 6
            })
        );
    }

    #[tokio::test]
    async fn read_packet_handles_malformed_streams() {
        let good = Packet::new(A_OKAY, 3, 4, b"xy".to_vec()).encode();
        let mut r = &good[..];
        assert_eq!(
            read_packet(&mut r, 10, |_| true).await.unwrap(),
            Packet::new(A_OKAY, 3, 4, b"xy".to_vec())
        );
        // Truncated payload.
        let mut r = &good[..good.len() - 1];
        assert!(matches!(
            read_packet(&mut r, 10, |_| true).await,
            Err(ReadError::Packet(PacketError::Truncated { .. }))
        ));
        // Truncated header.
        let mut r = &good[..10];
        assert!(matches!(
            read_packet(&mut r, 10, |_| true).await,
            Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof
        ));
        // Oversize.
        let mut r = &good[..];
        assert!(matches!(
            read_packet(&mut r, 1, |_| true).await,
            Err(ReadError::Packet(PacketError::TooLarge { len: 2, max: 1 }))
        ));
        // Bad checksum, verified.
        let mut bad = good.clone();
        bad[16] ^= 0x55;
        let mut r = &bad[..];
        assert!(matches!(
            read_packet(&mut r, 10, |_| true).await,
            Err(ReadError::Packet(PacketError::BadChecksum { .. }))
        ));
        let mut r = &bad[..];
        assert!(read_packet(&mut r, 10, |_| false).await.is_ok());
    }
}
