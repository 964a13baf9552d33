//! Reference Consumer (being written).
