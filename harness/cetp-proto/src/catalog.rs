//! Requirement catalog (being written).
