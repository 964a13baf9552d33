//! In-process device (being written).
