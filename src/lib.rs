//! Kiln
