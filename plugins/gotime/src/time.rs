//! Go's `time.Time` and `time.Duration` as templates see them: instants
//! with a location, the proleptic Gregorian calendar over Go's whole range
//! (its arithmetic wraps where Go's does), IANA time zones (`chrono-tz`),
//! durations printed and parsed as Go does.
//!
//! A time has no monotonic clock reading: Go prints one (` m=+0.001`) after
//! `time.Now()` in `{{ now }}`, a value of the process, not of the chart, so
//! a render never prints it.

use std::fmt::Write as _;
use std::rc::Rc;
use std::str::FromStr as _;

use chrono::{Offset as _, TimeZone as _};
use chrono_tz::OffsetName as _;

/// Seconds from 0001-01-01 (Go's internal epoch) to the Unix epoch.
const UNIX_TO_INTERNAL: i64 = 719_162 * SECONDS_PER_DAY;
/// Days from Go's absolute zero instant (March 1 of year -292277022400) to
/// 0001-01-01.
const ABSOLUTE_TO_INTERNAL_DAYS: i64 = 106_751_990_354_238;
/// Seconds from Go's absolute zero instant to the Unix epoch.
const UNIX_TO_ABSOLUTE: i64 = ABSOLUTE_TO_INTERNAL_DAYS * SECONDS_PER_DAY + UNIX_TO_INTERNAL;
/// Days from Go's absolute zero instant to 1970-01-01.
const ABSOLUTE_DAYS_TO_UNIX: i64 = ABSOLUTE_TO_INTERNAL_DAYS + 719_162;
const SECONDS_PER_DAY: i64 = 86_400;
/// 2100-01-01: the zone database's tables end here; later instants take
/// the rules of a year with the same calendar (Go applies the zone's rule).
const ZONE_TABLES_END: i64 = 4_102_444_800;

/// Nanoseconds per second.
pub const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Where a time is shown: Go's `*time.Location`. Go's `==` on times
/// compares these pointers ([`Time::go_eq`]): a clone is the same location.
#[derive(Debug, Clone)]
pub enum Location {
    /// `time.UTC` (Go's nil location: the zero time, `Z` offsets, `.UTC`).
    Utc,
    /// `time.Local`: a render's local zone is UTC (Helm's in a container,
    /// and Kiln's by definition), but Go tells the two apart in `eq`.
    Local,
    /// `time.FixedZone(name, offset)` (a parsed offset or abbreviation).
    Fixed(Rc<FixedZone>),
    /// An IANA zone (`time.LoadLocation`).
    Zone(chrono_tz::Tz),
}

/// A fixed zone's abbreviation and offset.
#[derive(Debug, PartialEq, Eq)]
pub struct FixedZone {
    /// The abbreviation (`""`: printed as the offset).
    pub name: Rc<str>,
    /// Seconds east of UTC.
    pub offset: i32,
}

impl FixedZone {
    /// Whether Go hands out one shared location for this zone: unnamed,
    /// whole hours from -12 to +14 (`time.FixedZone`'s cache).
    fn shared(&self) -> bool {
        self.name.is_empty()
            && self.offset % 3600 == 0
            && (-12..=14).contains(&(self.offset / 3600))
    }
}

impl Location {
    /// `time.FixedZone(name, offset)`.
    pub fn fixed(name: Rc<str>, offset: i32) -> Location {
        Location::Fixed(Rc::new(FixedZone { name, offset }))
    }

    /// Go's `==` of two `*Location`s.
    fn same(&self, other: &Location) -> bool {
        match (self, other) {
            (Location::Utc, Location::Utc) | (Location::Local, Location::Local) => true,
            (Location::Fixed(a), Location::Fixed(b)) => {
                Rc::ptr_eq(a, b) || a.shared() && b.shared() && a.offset == b.offset
            }
            (Location::Zone(a), Location::Zone(b)) => a == b,
            _ => false,
        }
    }

    /// `reflect.DeepEqual` of two `*Location`s.
    fn deep_same(&self, other: &Location) -> bool {
        match (self, other) {
            (Location::Fixed(a), Location::Fixed(b)) => a == b,
            _ => self.same(other),
        }
    }

    /// Go's `time.LoadLocation`: `""`, `UTC` and `Local` are UTC; other
    /// names are IANA zones (case-sensitive, as Go reads them from files).
    pub fn load(name: &str) -> Result<Location, String> {
        match name {
            "" | "UTC" => return Ok(Location::Utc),
            "Local" => return Ok(Location::Local),
            _ => {}
        }
        if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
            return Err(format!(
                "time: invalid location name {}",
                quote(name.as_bytes())
            ));
        }
        chrono_tz::Tz::from_str(name)
            .map(Location::Zone)
            .map_err(|_| format!("unknown time zone {name}"))
    }

    /// The zone's abbreviation and offset (seconds east) at Unix second `unix`.
    pub fn lookup(&self, unix: i64) -> (Rc<str>, i32) {
        match self {
            Location::Utc | Location::Local => (Rc::from("UTC"), 0),
            Location::Fixed(zone) => (zone.name.clone(), zone.offset),
            Location::Zone(tz) => {
                let at = table_instant(unix);
                let utc = chrono::DateTime::from_timestamp(at, 0)
                    .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC)
                    .naive_utc();
                let offset = tz.offset_from_utc_datetime(&utc);
                let seconds = offset.fix().local_minus_utc();
                // The database writes numeric abbreviations (`+03`,
                // `+0530`) that chrono-tz leaves out: made the same way.
                let name = offset
                    .abbreviation()
                    .map_or_else(|| Rc::from(numeric_abbreviation(seconds)), Rc::from);
                (name, seconds)
            }
        }
    }
}

/// The tz database's numeric abbreviation of an offset (`%z` in its
/// rules): `+03`, `-0330`, `+053015`.
fn numeric_abbreviation(offset: i32) -> String {
    let a = offset.unsigned_abs();
    let (h, m, s) = (a / 3600, a / 60 % 60, a % 60);
    let mut out = format!("{}{h:02}", if offset < 0 { '-' } else { '+' });
    if m != 0 || s != 0 {
        let _ = write!(out, "{m:02}");
    }
    if s != 0 {
        let _ = write!(out, "{s:02}");
    }
    out
}

/// The instant whose zone rules apply at `unix`: itself, or past the
/// tables' end, the same moment of a year in 2072..2100 that has the same
/// calendar (leap or not, same weekday on January 1), which is how rules
/// such as "second Sunday of March" repeat.
fn table_instant(unix: i64) -> i64 {
    if unix < ZONE_TABLES_END {
        return unix;
    }
    let days = unix.div_euclid(SECONDS_PER_DAY);
    let (year, _, _) = civil_from_days(days);
    let start = days_from_civil(year, 1, 1);
    let weekday = weekday_of(start);
    let leap = is_leap(year);
    for y in 2072..2100 {
        let s = days_from_civil(y, 1, 1);
        if is_leap(y) == leap && weekday_of(s) == weekday {
            return unix - (start - s) * SECONDS_PER_DAY;
        }
    }
    unix
}

/// Go's `time.Time` (without a monotonic reading).
#[derive(Debug, Clone)]
pub struct Time {
    /// Seconds since 0001-01-01 UTC (Go's internal seconds: sums wrap as
    /// Go's do).
    sec: i64,
    /// Nanoseconds within the second, `0..1e9`.
    nsec: u32,
    /// The location it is shown in.
    loc: Location,
}

/// A time's calendar fields in its location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    /// The year (Go's range: about ±292 billion).
    pub year: i64,
    /// 1..=12.
    pub month: u32,
    /// 1..=31.
    pub day: u32,
    /// 1..=366.
    pub yday: u32,
    /// 0 (Sunday)..=6.
    pub weekday: u32,
    /// 0..=23.
    pub hour: u32,
    /// 0..=59.
    pub minute: u32,
    /// 0..=59.
    pub second: u32,
}

impl Time {
    /// Go's zero time, 0001-01-01 00:00:00 UTC (what `toDate` returns for
    /// text it cannot parse).
    pub fn zero() -> Time {
        Time {
            sec: 0,
            nsec: 0,
            loc: Location::Utc,
        }
    }

    /// Go's `time.Unix(sec, nsec)` (in the local zone).
    pub fn unix(sec: i64, nsec: i64) -> Time {
        let sec = sec.wrapping_add(nsec.div_euclid(NANOS_PER_SECOND));
        let nsec = nsec.rem_euclid(NANOS_PER_SECOND) as u32;
        Time {
            sec: sec.wrapping_add(UNIX_TO_INTERNAL),
            nsec,
            loc: Location::Local,
        }
    }

    /// The time at midnight-based civil fields in UTC, then moved by
    /// `-offset` seconds and shown in `loc` (Go's `Date` for the ranges
    /// `Parse` accepts: years 0..=9999, fields already valid).
    pub fn from_civil_utc(
        year: i64,
        month: u32,
        day: u32,
        clock: (u32, u32, u32),
        nsec: u32,
        offset: i32,
        loc: Location,
    ) -> Time {
        let days = days_from_civil(year, month, day);
        let unix = days * SECONDS_PER_DAY
            + i64::from(clock.0) * 3600
            + i64::from(clock.1) * 60
            + i64::from(clock.2)
            - i64::from(offset);
        Time {
            sec: unix + UNIX_TO_INTERNAL,
            nsec,
            loc,
        }
    }

    /// Go's `t.Unix()`.
    pub fn unix_seconds(&self) -> i64 {
        self.sec.wrapping_sub(UNIX_TO_INTERNAL)
    }

    /// Go's `t.Nanosecond()`.
    pub fn nanosecond(&self) -> u32 {
        self.nsec
    }

    /// Go's `t.UnixNano()` (wraps outside ±292 years, as Go's does).
    pub fn unix_nano(&self) -> i64 {
        self.unix_seconds()
            .wrapping_mul(NANOS_PER_SECOND)
            .wrapping_add(i64::from(self.nsec))
    }

    /// The location.
    pub fn location(&self) -> &Location {
        &self.loc
    }

    /// Go's `t.In(loc)`.
    pub fn with_location(&self, loc: Location) -> Time {
        Time {
            loc,
            ..self.clone()
        }
    }

    /// Go's `t == u`: the same instant in the same location.
    pub fn go_eq(&self, u: &Time) -> bool {
        self.sec == u.sec && self.nsec == u.nsec && self.loc.same(&u.loc)
    }

    /// `reflect.DeepEqual(t, u)`.
    pub fn deep_eq(&self, u: &Time) -> bool {
        self.sec == u.sec && self.nsec == u.nsec && self.loc.deep_same(&u.loc)
    }

    /// Go's `t.IsZero()`.
    pub fn is_zero(&self) -> bool {
        self.sec == 0 && self.nsec == 0
    }

    /// Go's `t.Add(d)`: seconds saturate at Go's limits.
    pub fn add(&self, d: i64) -> Time {
        let mut dsec = d / NANOS_PER_SECOND;
        let mut nsec = i64::from(self.nsec) + d % NANOS_PER_SECOND;
        if nsec >= NANOS_PER_SECOND {
            dsec += 1;
            nsec -= NANOS_PER_SECOND;
        } else if nsec < 0 {
            dsec -= 1;
            nsec += NANOS_PER_SECOND;
        }
        let sum = self.sec.wrapping_add(dsec);
        let sec = if (sum > self.sec) == (dsec > 0) {
            sum
        } else if dsec > 0 {
            i64::MAX
        } else {
            -i64::MAX
        };
        Time {
            sec,
            nsec: nsec as u32,
            loc: self.loc.clone(),
        }
    }

    /// Go's `t.Truncate(d)`: rounded down to a multiple of `d` since the
    /// zero time (`d <= 0`: unchanged).
    pub fn truncate(&self, d: i64) -> Time {
        if d <= 0 {
            return self.clone();
        }
        self.add(-self.rem(d))
    }

    /// Go's `t.Round(d)`: to the nearest multiple of `d` since the zero
    /// time, halves up (`d <= 0`: unchanged).
    pub fn round(&self, d: i64) -> Time {
        if d <= 0 {
            return self.clone();
        }
        let r = self.rem(d);
        if (r as u64).wrapping_add(r as u64) < d as u64 {
            self.add(-r)
        } else {
            self.add(d - r)
        }
    }

    /// The time since Go's zero time modulo `d > 0` (Go's `div`).
    fn rem(&self, d: i64) -> i64 {
        let total = i128::from(self.sec) * i128::from(NANOS_PER_SECOND) + i128::from(self.nsec);
        total.rem_euclid(i128::from(d)) as i64
    }

    /// Go's `t.AddDate(years, months, days)`: the calendar fields moved and
    /// normalized (October 31 plus a month is December 1), the clock kept,
    /// in the same location. Years beyond Go's range wrap as Go's do.
    pub fn add_date(&self, years: i64, months: i64, days: i64) -> Time {
        // Far outside any calendar (Go wraps): clamped so that no sum overflows.
        const FAR: i64 = 1 << 40;
        let (years, months, days) = (
            years.clamp(-FAR, FAR),
            months.clamp(-FAR, FAR),
            days.clamp(-FAR, FAR),
        );
        let (_, _, c) = self.civil();
        let month0 = i64::from(c.month) - 1 + months;
        let year = c.year.clamp(-FAR, FAR) + years + month0.div_euclid(12);
        let month = (month0.rem_euclid(12) + 1) as u32;
        let day = days_from_civil(year, month, 1) + i64::from(c.day) - 1 + days;
        let local = day
            .wrapping_mul(SECONDS_PER_DAY)
            .wrapping_add(i64::from(c.hour * 3600 + c.minute * 60 + c.second));
        // The offset in force at that wall time (Go's `Date`).
        let (_, guess) = self.loc.lookup(local);
        let (_, offset) = self.loc.lookup(local.wrapping_sub(i64::from(guess)));
        Time {
            sec: local
                .wrapping_sub(i64::from(offset))
                .wrapping_add(UNIX_TO_INTERNAL),
            nsec: self.nsec,
            loc: self.loc.clone(),
        }
    }

    /// Go's `t.Sub(u)`: saturates at the Duration limits.
    pub fn sub(&self, u: &Time) -> i64 {
        let d = (i128::from(self.sec) - i128::from(u.sec)) * i128::from(NANOS_PER_SECOND)
            + i128::from(self.nsec)
            - i128::from(u.nsec);
        d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }

    /// The zone abbreviation, offset and calendar fields in the location
    /// (Go's `locabs` and `absDate`, wrapping as Go's unsigned arithmetic does).
    pub fn civil(&self) -> (Rc<str>, i32, Civil) {
        let unix = self.unix_seconds();
        let (name, offset) = self.loc.lookup(unix);
        let abs = unix
            .wrapping_add(i64::from(offset))
            .wrapping_add(UNIX_TO_ABSOLUTE) as u64;
        let days = (abs / SECONDS_PER_DAY as u64) as i64 - ABSOLUTE_DAYS_TO_UNIX;
        let secs = (abs % SECONDS_PER_DAY as u64) as u32;
        let (year, month, day) = civil_from_days(days);
        let yday = (days - days_from_civil(year, 1, 1) + 1) as u32;
        let civil = Civil {
            year,
            month,
            day,
            yday,
            weekday: weekday_of(days),
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
        };
        (name, offset, civil)
    }

    /// Go's `t.String()` without the monotonic clock reading.
    pub fn go_string(&self) -> String {
        crate::layout::format(self, "2006-01-02 15:04:05.999999999 -0700 MST")
    }

    /// Go's `MarshalJSON`/`MarshalText` text: RFC 3339 with nanoseconds;
    /// an error for a year outside 0..=9999, as Go's.
    pub fn rfc3339_nano(&self) -> Result<String, String> {
        let (_, _, c) = self.civil();
        if !(0..=9999).contains(&c.year) {
            return Err("Time.MarshalJSON: year outside of range [0,9999]".into());
        }
        Ok(crate::layout::format(
            self,
            "2006-01-02T15:04:05.999999999Z07:00",
        ))
    }
}

/// Whether `year` is a Gregorian leap year.
pub fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in `month` of `year`.
pub fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// 0 (Sunday)..=6 of a day counted from 1970-01-01 (a Thursday).
fn weekday_of(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day counted from 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Go's internal `quote` of the time package (errors of `Parse` and
/// `ParseDuration`): bytes outside printable ASCII as `\xNN`.
pub fn quote(s: &[u8]) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s {
        if !(b' '..0x80).contains(&b) {
            let _ = write!(out, "\\x{b:02x}");
        } else {
            if b == b'"' || b == b'\\' {
                out.push('\\');
            }
            out.push(b as char);
        }
    }
    out.push('"');
    out
}

/// Go's `Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub fn duration_string(d: i64) -> String {
    let neg = d < 0;
    let mut u = d.unsigned_abs();
    let mut out = String::new();
    if u < NANOS_PER_SECOND as u64 {
        if u == 0 {
            return "0s".into();
        }
        let (prec, unit) = if u < 1_000 {
            (0, "ns")
        } else if u < 1_000_000 {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (int, frac) = split_fraction(u, prec);
        let _ = write!(out, "{}{int}{frac}{unit}", if neg { "-" } else { "" });
        return out;
    }
    let (secs, frac) = split_fraction(u, 9);
    u = secs;
    let s = u % 60;
    u /= 60;
    if neg {
        out.push('-');
    }
    if u > 0 {
        let m = u % 60;
        let h = u / 60;
        if h > 0 {
            let _ = write!(out, "{h}h");
        }
        let _ = write!(out, "{m}m");
    }
    let _ = write!(out, "{s}{frac}s");
    out
}

/// `v / 10^prec` and its fraction as `.ddd` without trailing zeros (empty
/// when zero): Go's `fmtFrac`.
fn split_fraction(v: u64, prec: u32) -> (u64, String) {
    let p = 10u64.pow(prec);
    let (int, frac) = (v / p, v % p);
    if frac == 0 {
        return (int, String::new());
    }
    let digits = format!("{frac:0width$}", width = prec as usize);
    (int, format!(".{}", digits.trim_end_matches('0')))
}

/// Go's `Duration.Round(m)`.
pub fn duration_round(d: i64, m: i64) -> i64 {
    if m <= 0 {
        return d;
    }
    let less_than_half = |x: i64| (x as u64).wrapping_add(x as u64) < m as u64;
    let mut r = d % m;
    if d < 0 {
        r = -r;
        if less_than_half(r) {
            return d + r;
        }
        let d1 = d.wrapping_sub(m).wrapping_add(r);
        if d1 < d { d1 } else { i64::MIN }
    } else {
        if less_than_half(r) {
            return d - r;
        }
        let d1 = d.wrapping_add(m).wrapping_sub(r);
        if d1 > d { d1 } else { i64::MAX }
    }
}

/// Go's `time.ParseDuration`: `300ms`, `-1.5h`, `2h45m`.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let orig = text.as_bytes();
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (v, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = before != s.len();
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before = s.len();
            let (ff, sc, rest) = leading_fraction(s);
            (f, scale, s) = (ff, sc, rest);
            post = before != s.len();
        }
        if !pre && !post {
            return Err(invalid());
        }
        let i = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if i == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let (u, rest) = s.split_at(i);
        s = rest;
        let unit: u64 = match u {
            b"ns" => 1,
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(u),
                    quote(orig)
                ));
            }
        };
        if v > (1u64 << 63) / unit {
            return Err(invalid());
        }
        let mut v = v * unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > 1 << 63 {
                return Err(invalid());
            }
        }
        // Go's uint64 sum wraps (2^63 + 2^63 is 0), and so does this one.
        total = total.wrapping_add(v);
        if total > 1 << 63 {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((total as i64).wrapping_neg());
    }
    if total > i64::MAX as u64 {
        return Err(invalid());
    }
    Ok(total as i64)
}

/// Go's `leadingInt`: the leading digits; None on overflow.
pub fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > (1 << 63) / 10 {
            return None;
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > 1 << 63 {
            return None;
        }
        i += 1;
    }
    Some((x, &s[i..]))
}

/// Go's `leadingFraction`: digits after a point, precision dropped once
/// it would overflow.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > (i64::MAX as u64) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > 1 << 63 {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, &s[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_round_trips() {
        for days in [-719_162, -1, 0, 1, 11_016, 2_932_896, -2_932_897] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-719_162), (1, 1, 1));
    }

    // Expected strings from Go (time.Duration.String).
    #[test]
    fn durations_print_as_go() {
        for (d, want) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (NANOS_PER_SECOND, "1s"),
            (95 * NANOS_PER_SECOND, "1m35s"),
            (3_600 * NANOS_PER_SECOND, "1h0m0s"),
            (-90 * NANOS_PER_SECOND - 5, "-1m30.000000005s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (i64::MAX, "2562047h47m16.854775807s"),
        ] {
            assert_eq!(duration_string(d), want, "{d}");
        }
    }

    #[test]
    fn durations_parse_as_go() {
        assert_eq!(parse_duration("1.5h"), Ok(5_400 * NANOS_PER_SECOND));
        assert_eq!(parse_duration("-0"), Ok(0));
        assert_eq!(parse_duration("1h2m3s4ms5us6ns"), Ok(3_723_004_005_006));
        assert_eq!(parse_duration("-9223372036854775808ns"), Ok(i64::MIN));
        assert_eq!(
            parse_duration("9223372036854775808ns"),
            Err("time: invalid duration \"9223372036854775808ns\"".into())
        );
        assert_eq!(
            parse_duration("1d"),
            Err("time: unknown unit \"d\" in duration \"1d\"".into())
        );
        assert_eq!(
            parse_duration("12"),
            Err("time: missing unit in duration \"12\"".into())
        );
        assert_eq!(
            parse_duration(".s"),
            Err("time: invalid duration \".s\"".into())
        );
        assert_eq!(
            parse_duration("99999999999999999999h"),
            Err("time: invalid duration \"99999999999999999999h\"".into())
        );
    }

    #[test]
    fn rounding_saturates_as_go() {
        assert_eq!(
            duration_round(1_499_999_999, NANOS_PER_SECOND),
            NANOS_PER_SECOND
        );
        assert_eq!(
            duration_round(1_500_000_000, NANOS_PER_SECOND),
            2 * NANOS_PER_SECOND
        );
        assert_eq!(
            duration_round(-1_500_000_000, NANOS_PER_SECOND),
            -2 * NANOS_PER_SECOND
        );
        assert_eq!(duration_round(i64::MAX, NANOS_PER_SECOND), i64::MAX);
        assert_eq!(duration_round(i64::MIN, NANOS_PER_SECOND), i64::MIN);
    }

    #[test]
    fn adding_saturates_and_extremes_do_not_panic() {
        let t = Time::unix(i64::MAX, 0).add(i64::MAX);
        let _ = t.civil();
        let t = Time::unix(i64::MIN, -1).add(i64::MIN);
        let _ = t.civil();
        // Go's internal seconds wrap for Unix(MaxInt64): the difference
        // saturates by comparing the (wrapped) instants, as Go's Sub does.
        assert_eq!(Time::zero().sub(&Time::unix(i64::MAX, 0)), i64::MAX);
        assert_eq!(Time::zero().sub(&Time::unix(1 << 40, 0)), i64::MIN);
    }
}
