//! # `kiln-gotime`: Go's time, for plugins that must read it as Go does
//!
//! Helm's templates and Kyverno's JMESPath functions compute with Go's
//! `time` package: instants with a location, durations printed as
//! `1h2m3.5s`, layouts written as the reference time
//! `Mon Jan 2 15:04:05 MST 2006`. This crate is that package's behaviour,
//! checked against Go's own output ([`time`], [`layout`]); it reads no
//! clock.

pub mod layout;
pub mod time;
