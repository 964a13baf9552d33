//! Reference Provider (being written).
