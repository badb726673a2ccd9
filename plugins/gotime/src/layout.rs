//! Go's time layouts (`Time.Format`, `time.ParseInLocation`): the
//! reference time `Mon Jan 2 15:04:05 MST 2006` written the way the output
//! should look, element by element as Go's `nextStdChunk` finds them, with
//! Go's parse errors word for word.
//!
//! Everything works on bytes, as Go does: a layout or value that is not
//! ASCII never splits a character badly (Go's slices are byte slices).

use std::rc::Rc;

use crate::time::{Location, Time, days_in, is_leap, leading_int, quote};

/// One element of a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Std {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PmUpper,
    PmLower,
    Tz,
    Iso8601Tz,
    Iso8601SecondsTz,
    Iso8601ShortTz,
    Iso8601ColonTz,
    Iso8601ColonSecondsTz,
    NumTz,
    NumSecondsTz,
    NumShortTz,
    NumColonTz,
    NumColonSecondsTz,
    /// `.000`: this many digits (Go keeps 12 bits of the count), trailing
    /// zeros kept; the separator (`.` or `,`).
    FracZeros(usize, u8),
    /// `.999`: trailing zeros dropped.
    FracNines(usize, u8),
}

impl Std {
    fn is_iso(self) -> bool {
        matches!(
            self,
            Std::Iso8601Tz
                | Std::Iso8601SecondsTz
                | Std::Iso8601ShortTz
                | Std::Iso8601ColonTz
                | Std::Iso8601ColonSecondsTz
        )
    }
}

/// Go's weekday names, Sunday first.
pub const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
/// Go's month names.
pub const LONG_MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn starts_lower(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_lowercase)
}

fn digit_at(s: &[u8], i: usize) -> bool {
    s.get(i).is_some_and(u8::is_ascii_digit)
}

/// Go's `nextStdChunk`: the text before the first element, the element,
/// and the rest.
fn next_chunk(layout: &[u8]) -> (&[u8], Option<Std>, &[u8]) {
    let at =
        |i: usize, s: &str| layout.len() >= i + s.len() && &layout[i..i + s.len()] == s.as_bytes();
    for i in 0..layout.len() {
        let found = |std: Std, len: usize| (&layout[..i], Some(std), &layout[i + len..]);
        match layout[i] {
            b'J' if at(i, "Jan") => {
                if at(i, "January") {
                    return found(Std::LongMonth, 7);
                }
                if !starts_lower(&layout[i + 3..]) {
                    return found(Std::Month, 3);
                }
            }
            b'M' if layout.len() >= i + 3 => {
                if at(i, "Mon") {
                    if at(i, "Monday") {
                        return found(Std::LongWeekDay, 6);
                    }
                    if !starts_lower(&layout[i + 3..]) {
                        return found(Std::WeekDay, 3);
                    }
                }
                if at(i, "MST") {
                    return found(Std::Tz, 3);
                }
            }
            b'0' => {
                if let Some(&d) = layout.get(i + 1)
                    && (b'1'..=b'6').contains(&d)
                {
                    let std = [
                        Std::ZeroMonth,
                        Std::ZeroDay,
                        Std::ZeroHour12,
                        Std::ZeroMinute,
                        Std::ZeroSecond,
                        Std::Year,
                    ][usize::from(d - b'1')];
                    return found(std, 2);
                }
                if at(i, "002") {
                    return found(Std::ZeroYearDay, 3);
                }
            }
            b'1' => {
                if layout.get(i + 1) == Some(&b'5') {
                    return found(Std::Hour, 2);
                }
                return found(Std::NumMonth, 1);
            }
            b'2' => {
                if at(i, "2006") {
                    return found(Std::LongYear, 4);
                }
                return found(Std::Day, 1);
            }
            b'_' => {
                if layout.get(i + 1) == Some(&b'2') {
                    // `_2006` is a literal `_` and the year.
                    if at(i + 1, "2006") {
                        return (&layout[..=i], Some(Std::LongYear), &layout[i + 5..]);
                    }
                    return found(Std::UnderDay, 2);
                }
                if at(i, "__2") {
                    return found(Std::UnderYearDay, 3);
                }
            }
            b'3' => return found(Std::Hour12, 1),
            b'4' => return found(Std::Minute, 1),
            b'5' => return found(Std::Second, 1),
            b'P' if layout.get(i + 1) == Some(&b'M') => return found(Std::PmUpper, 2),
            b'p' if layout.get(i + 1) == Some(&b'm') => return found(Std::PmLower, 2),
            b'-' => {
                for (text, std) in [
                    ("-070000", Std::NumSecondsTz),
                    ("-07:00:00", Std::NumColonSecondsTz),
                    ("-0700", Std::NumTz),
                    ("-07:00", Std::NumColonTz),
                    ("-07", Std::NumShortTz),
                ] {
                    if at(i, text) {
                        return found(std, text.len());
                    }
                }
            }
            b'Z' => {
                for (text, std) in [
                    ("Z070000", Std::Iso8601SecondsTz),
                    ("Z07:00:00", Std::Iso8601ColonSecondsTz),
                    ("Z0700", Std::Iso8601Tz),
                    ("Z07:00", Std::Iso8601ColonTz),
                    ("Z07", Std::Iso8601ShortTz),
                ] {
                    if at(i, text) {
                        return found(std, text.len());
                    }
                }
            }
            c @ (b'.' | b',') => {
                if let Some(&ch) = layout.get(i + 1)
                    && (ch == b'0' || ch == b'9')
                {
                    let mut j = i + 1;
                    while j < layout.len() && layout[j] == ch {
                        j += 1;
                    }
                    if !digit_at(layout, j) {
                        let n = (j - (i + 1)) & 0xfff;
                        let std = if ch == b'0' {
                            Std::FracZeros(n, c)
                        } else {
                            Std::FracNines(n, c)
                        };
                        return (&layout[..i], Some(std), &layout[j..]);
                    }
                }
            }
            _ => {}
        }
    }
    (layout, None, &[])
}

/// Go's `appendInt`: `x` in decimal, zero-padded to `width` digits.
fn append_int(out: &mut Vec<u8>, x: i64, width: usize) {
    if x < 0 {
        out.push(b'-');
    }
    let digits = x.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push(b'0');
    }
    out.extend_from_slice(digits.as_bytes());
}

/// Go's `Time.Format(layout)`.
pub fn format(t: &Time, layout: &str) -> String {
    let (name, offset, c) = t.civil();
    let mut out: Vec<u8> = Vec::with_capacity(layout.len() + 10);
    let mut layout = layout.as_bytes();
    while !layout.is_empty() {
        let (prefix, std, suffix) = next_chunk(layout);
        out.extend_from_slice(prefix);
        let Some(std) = std else { break };
        layout = suffix;
        let hour12 = match c.hour % 12 {
            0 => 12,
            h => h,
        };
        match std {
            Std::Year => append_int(&mut out, c.year.abs() % 100, 2),
            Std::LongYear => append_int(&mut out, c.year, 4),
            Std::Month => out.extend_from_slice(&LONG_MONTHS[c.month as usize - 1].as_bytes()[..3]),
            Std::LongMonth => out.extend_from_slice(LONG_MONTHS[c.month as usize - 1].as_bytes()),
            Std::NumMonth => append_int(&mut out, c.month.into(), 0),
            Std::ZeroMonth => append_int(&mut out, c.month.into(), 2),
            Std::WeekDay => out.extend_from_slice(&LONG_DAYS[c.weekday as usize].as_bytes()[..3]),
            Std::LongWeekDay => out.extend_from_slice(LONG_DAYS[c.weekday as usize].as_bytes()),
            Std::Day => append_int(&mut out, c.day.into(), 0),
            Std::UnderDay => {
                if c.day < 10 {
                    out.push(b' ');
                }
                append_int(&mut out, c.day.into(), 0);
            }
            Std::ZeroDay => append_int(&mut out, c.day.into(), 2),
            Std::UnderYearDay => {
                if c.yday < 100 {
                    out.push(b' ');
                    if c.yday < 10 {
                        out.push(b' ');
                    }
                }
                append_int(&mut out, c.yday.into(), 0);
            }
            Std::ZeroYearDay => append_int(&mut out, c.yday.into(), 3),
            Std::Hour => append_int(&mut out, c.hour.into(), 2),
            Std::Hour12 => append_int(&mut out, hour12.into(), 0),
            Std::ZeroHour12 => append_int(&mut out, hour12.into(), 2),
            Std::Minute => append_int(&mut out, c.minute.into(), 0),
            Std::ZeroMinute => append_int(&mut out, c.minute.into(), 2),
            Std::Second => append_int(&mut out, c.second.into(), 0),
            Std::ZeroSecond => append_int(&mut out, c.second.into(), 2),
            Std::PmUpper => out.extend_from_slice(if c.hour >= 12 { b"PM" } else { b"AM" }),
            Std::PmLower => out.extend_from_slice(if c.hour >= 12 { b"pm" } else { b"am" }),
            Std::Tz if !name.is_empty() => out.extend_from_slice(name.as_bytes()),
            Std::Tz => {
                let zone = offset / 60;
                out.push(if zone < 0 { b'-' } else { b'+' });
                append_int(&mut out, i64::from(zone.abs() / 60), 2);
                append_int(&mut out, i64::from(zone.abs() % 60), 2);
            }
            Std::FracZeros(n, sep) | Std::FracNines(n, sep) => {
                let trim = matches!(std, Std::FracNines(..));
                if trim && (n == 0 || t.nanosecond() == 0) {
                    continue;
                }
                let mark = out.len();
                out.push(sep);
                append_int(&mut out, t.nanosecond().into(), 9);
                if n < 9 {
                    out.truncate(out.len() - 9 + n);
                }
                if trim {
                    while out.len() > mark && out.last() == Some(&b'0') {
                        out.pop();
                    }
                    if out.len() == mark + 1 {
                        out.pop();
                    }
                }
            }
            zone_std => {
                if offset == 0 && zone_std.is_iso() {
                    out.push(b'Z');
                    continue;
                }
                let zone = offset / 60;
                let abs_offset = offset.abs();
                out.push(if zone < 0 { b'-' } else { b'+' });
                let zone = zone.abs();
                append_int(&mut out, i64::from(zone / 60), 2);
                if matches!(
                    zone_std,
                    Std::Iso8601ColonTz
                        | Std::NumColonTz
                        | Std::Iso8601ColonSecondsTz
                        | Std::NumColonSecondsTz
                ) {
                    out.push(b':');
                }
                if !matches!(zone_std, Std::NumShortTz | Std::Iso8601ShortTz) {
                    append_int(&mut out, i64::from(zone % 60), 2);
                }
                if matches!(
                    zone_std,
                    Std::Iso8601SecondsTz
                        | Std::NumSecondsTz
                        | Std::NumColonSecondsTz
                        | Std::Iso8601ColonSecondsTz
                ) {
                    if matches!(
                        zone_std,
                        Std::NumColonSecondsTz | Std::Iso8601ColonSecondsTz
                    ) {
                        out.push(b':');
                    }
                    append_int(&mut out, i64::from(abs_offset % 60), 2);
                }
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A failed element (Go's `errBad`, never printed itself).
struct Bad;

/// Go's `atoi` of the time package: an optional sign and digits only.
fn atoi(s: &[u8]) -> Result<i64, Bad> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (x, rest) = leading_int(digits).ok_or(Bad)?;
    if !rest.is_empty() {
        return Err(Bad);
    }
    let x = x as i64;
    Ok(if neg { x.wrapping_neg() } else { x })
}

/// Go's `getnum`: one or two digits (`fixed`: exactly two).
fn getnum(s: &[u8], fixed: bool) -> Result<(i64, &[u8]), Bad> {
    if !digit_at(s, 0) {
        return Err(Bad);
    }
    if !digit_at(s, 1) {
        if fixed {
            return Err(Bad);
        }
        return Ok((i64::from(s[0] - b'0'), &s[1..]));
    }
    Ok((
        i64::from(s[0] - b'0') * 10 + i64::from(s[1] - b'0'),
        &s[2..],
    ))
}

/// Go's `getnum3`: one to three digits (`fixed`: exactly three).
fn getnum3(s: &[u8], fixed: bool) -> Result<(i64, &[u8]), Bad> {
    let mut n = 0;
    let mut i = 0;
    while i < 3 && digit_at(s, i) {
        n = n * 10 + i64::from(s[i] - b'0');
        i += 1;
    }
    if i == 0 || fixed && i != 3 {
        return Err(Bad);
    }
    Ok((n, &s[i..]))
}

/// Go's `skip`: the literal `prefix`, runs of spaces matching runs.
fn skip<'a>(mut value: &'a [u8], mut prefix: &[u8]) -> Result<&'a [u8], &'a [u8]> {
    let cutspace = |s: &'a [u8]| -> &'a [u8] {
        let n = s.iter().take_while(|&&c| c == b' ').count();
        &s[n..]
    };
    while let Some(&p) = prefix.first() {
        if p == b' ' {
            if value.first().is_some_and(|&c| c != b' ') {
                return Err(value);
            }
            let n = prefix.iter().take_while(|&&c| c == b' ').count();
            prefix = &prefix[n..];
            value = cutspace(value);
            continue;
        }
        if value.first() != Some(&p) {
            return Err(value);
        }
        prefix = &prefix[1..];
        value = &value[1..];
    }
    Ok(value)
}

/// Go's `lookup`: the table entry `val` starts with, ignoring ASCII case.
fn lookup<'a>(
    table: &[&str],
    prefix_len: Option<usize>,
    val: &'a [u8],
) -> Result<(usize, &'a [u8]), Bad> {
    for (i, v) in table.iter().enumerate() {
        let v = &v.as_bytes()[..prefix_len.unwrap_or(v.len())];
        if val.len() >= v.len() && val[..v.len()].eq_ignore_ascii_case(v) {
            return Ok((i, &val[v.len()..]));
        }
    }
    Err(Bad)
}

fn comma_or_period(b: u8) -> bool {
    b == b'.' || b == b','
}

/// Go's `parseNanoseconds`: `value[..nbytes]` is a separator and digits.
fn parse_nanoseconds(value: &[u8], nbytes: usize) -> Result<i64, Result<&'static str, Bad>> {
    if !value.first().copied().is_some_and(comma_or_period) {
        return Err(Err(Bad));
    }
    let nbytes = nbytes.min(10);
    let ns = atoi(&value[1..nbytes]).map_err(Err)?;
    if ns < 0 {
        return Err(Ok("fractional second"));
    }
    Ok(ns * 10i64.pow((10 - nbytes) as u32))
}

/// Go's `parseSignedOffset`: the length of `+hh`/`-hh` (hours up to 23), 0
/// when there is none.
fn parse_signed_offset(value: &[u8]) -> usize {
    if !matches!(value.first(), Some(b'-' | b'+')) {
        return 0;
    }
    match leading_int(&value[1..]) {
        Some((x, rest)) if rest.len() != value.len() - 1 && x <= 23 => value.len() - rest.len(),
        _ => 0,
    }
}

/// Go's `parseTimeZone`: the length of a zone abbreviation at the start.
fn parse_time_zone(value: &[u8]) -> Option<usize> {
    if value.len() < 3 {
        return None;
    }
    if value.starts_with(b"ChST") || value.starts_with(b"MeST") {
        return Some(4);
    }
    if value.starts_with(b"GMT") {
        let rest = &value[3..];
        return Some(if rest.is_empty() {
            3
        } else {
            3 + parse_signed_offset(rest)
        });
    }
    if value[0] == b'+' || value[0] == b'-' {
        let n = parse_signed_offset(value);
        return (n > 0).then_some(n);
    }
    let upper = value
        .iter()
        .take(6)
        .take_while(|c| c.is_ascii_uppercase())
        .count();
    match upper {
        5 if value[4] == b'T' => Some(5),
        4 if value[3] == b'T' || value.starts_with(b"WITA") => Some(4),
        3 => Some(3),
        _ => None,
    }
}

/// Days before month `m` (1..=13) of a common year.
fn days_before(m: i64) -> i64 {
    (1..m).map(|k| i64::from(days_in(k as u32, 1))).sum()
}

/// Go's `time.ParseInLocation(layout, value, time.Local)` (Local is UTC).
pub fn parse(layout_text: &str, value_text: &str) -> Result<Time, String> {
    let (alayout, avalue) = (layout_text.as_bytes(), value_text.as_bytes());
    let parse_error = |layout_elem: &[u8], value_elem: &[u8]| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            quote(avalue),
            quote(alayout),
            quote(value_elem),
            quote(layout_elem)
        )
    };
    let message = |m: &str| format!("parsing time {}{m}", quote(avalue));
    let mut layout = alayout;
    let mut value = avalue;
    let (mut am, mut pm) = (false, false);
    let (mut year, mut month, mut day, mut yday) = (0i64, -1i64, -1i64, -1i64);
    let (mut hour, mut min, mut sec, mut nsec) = (0i64, 0i64, 0i64, 0i64);
    let mut utc = false;
    let mut zone_offset: i64 = -1;
    let mut zone_name: &[u8] = b"";
    loop {
        let (prefix, std, suffix) = next_chunk(layout);
        let stdstr = &layout[prefix.len()..layout.len() - suffix.len()];
        value = skip(value, prefix).map_err(|v| parse_error(prefix, v))?;
        let Some(std) = std else {
            if !value.is_empty() {
                return Err(message(&format!(": extra text: {}", quote(value))));
            }
            break;
        };
        layout = suffix;
        let hold = value;
        let mut range: Option<&str> = None;
        let result: Result<(), Bad> = (|| {
            match std {
                Std::Year => {
                    if value.len() < 2 {
                        return Err(Bad);
                    }
                    let p;
                    (p, value) = value.split_at(2);
                    year = atoi(p)?;
                    year += if year >= 69 { 1900 } else { 2000 };
                }
                Std::LongYear => {
                    if value.len() < 4 || !digit_at(value, 0) {
                        return Err(Bad);
                    }
                    let p;
                    (p, value) = value.split_at(4);
                    year = atoi(p)?;
                }
                Std::Month | Std::LongMonth => {
                    let short = (std == Std::Month).then_some(3);
                    let (m, rest) = lookup(&LONG_MONTHS, short, value)?;
                    (month, value) = (m as i64 + 1, rest);
                }
                Std::NumMonth | Std::ZeroMonth => {
                    (month, value) = getnum(value, std == Std::ZeroMonth)?;
                    if month <= 0 || month > 12 {
                        range = Some("month");
                    }
                }
                Std::WeekDay | Std::LongWeekDay => {
                    let short = (std == Std::WeekDay).then_some(3);
                    (_, value) = lookup(&LONG_DAYS, short, value)?;
                }
                Std::Day | Std::UnderDay | Std::ZeroDay => {
                    if std == Std::UnderDay && value.first() == Some(&b' ') {
                        value = &value[1..];
                    }
                    (day, value) = getnum(value, std == Std::ZeroDay)?;
                }
                Std::UnderYearDay | Std::ZeroYearDay => {
                    for _ in 0..2 {
                        if std == Std::UnderYearDay && value.first() == Some(&b' ') {
                            value = &value[1..];
                        }
                    }
                    (yday, value) = getnum3(value, std == Std::ZeroYearDay)?;
                }
                Std::Hour => {
                    (hour, value) = getnum(value, false)?;
                    if !(0..24).contains(&hour) {
                        range = Some("hour");
                    }
                }
                Std::Hour12 | Std::ZeroHour12 => {
                    (hour, value) = getnum(value, std == Std::ZeroHour12)?;
                    if !(0..=12).contains(&hour) {
                        range = Some("hour");
                    }
                }
                Std::Minute | Std::ZeroMinute => {
                    (min, value) = getnum(value, std == Std::ZeroMinute)?;
                    if !(0..60).contains(&min) {
                        range = Some("minute");
                    }
                }
                Std::Second | Std::ZeroSecond => {
                    (sec, value) = getnum(value, std == Std::ZeroSecond)?;
                    if !(0..60).contains(&sec) {
                        range = Some("second");
                        return Ok(());
                    }
                    // A fraction the layout does not name is read too.
                    if value.len() >= 2 && comma_or_period(value[0]) && digit_at(value, 1) {
                        if let (_, Some(Std::FracZeros(..) | Std::FracNines(..)), _) =
                            next_chunk(layout)
                        {
                            return Ok(());
                        }
                        let mut n = 2;
                        while digit_at(value, n) {
                            n += 1;
                        }
                        let parsed = parse_nanoseconds(value, n);
                        value = &value[n..];
                        match parsed {
                            Ok(ns) => nsec = ns,
                            Err(Ok(r)) => range = Some(r),
                            Err(Err(bad)) => return Err(bad),
                        }
                    }
                }
                Std::PmUpper | Std::PmLower => {
                    if value.len() < 2 {
                        return Err(Bad);
                    }
                    let p;
                    (p, value) = value.split_at(2);
                    let (pm_text, am_text): (&[u8], &[u8]) = if std == Std::PmUpper {
                        (b"PM", b"AM")
                    } else {
                        (b"pm", b"am")
                    };
                    if p == pm_text {
                        pm = true;
                    } else if p == am_text {
                        am = true;
                    } else {
                        return Err(Bad);
                    }
                }
                Std::Tz => {
                    if value.starts_with(b"UTC") {
                        utc = true;
                        value = &value[3..];
                        return Ok(());
                    }
                    let n = parse_time_zone(value).ok_or(Bad)?;
                    (zone_name, value) = value.split_at(n);
                }
                Std::FracZeros(n, _) => {
                    let ndigit = 1 + n;
                    if value.len() < ndigit {
                        return Err(Bad);
                    }
                    let parsed = parse_nanoseconds(value, ndigit);
                    value = &value[ndigit..];
                    match parsed {
                        Ok(ns) => nsec = ns,
                        Err(Ok(r)) => range = Some(r),
                        Err(Err(bad)) => return Err(bad),
                    }
                }
                Std::FracNines(..) => {
                    if value.len() < 2 || !comma_or_period(value[0]) || !digit_at(value, 1) {
                        return Ok(());
                    }
                    let mut i = 0;
                    while digit_at(value, i + 1) {
                        i += 1;
                    }
                    let parsed = parse_nanoseconds(value, 1 + i);
                    value = &value[1 + i..];
                    match parsed {
                        Ok(ns) => nsec = ns,
                        Err(Ok(r)) => range = Some(r),
                        Err(Err(bad)) => return Err(bad),
                    }
                }
                zone_std => {
                    if zone_std.is_iso() && value.first() == Some(&b'Z') {
                        value = &value[1..];
                        utc = true;
                        return Ok(());
                    }
                    let (sign, hh, mm, ss): (u8, &[u8], &[u8], &[u8]);
                    match zone_std {
                        Std::Iso8601ColonTz | Std::NumColonTz => {
                            if value.len() < 6 || value[3] != b':' {
                                return Err(Bad);
                            }
                            (sign, hh, mm, ss) = (value[0], &value[1..3], &value[4..6], b"00");
                            value = &value[6..];
                        }
                        Std::NumShortTz | Std::Iso8601ShortTz => {
                            if value.len() < 3 {
                                return Err(Bad);
                            }
                            (sign, hh, mm, ss) = (value[0], &value[1..3], b"00", b"00");
                            value = &value[3..];
                        }
                        Std::Iso8601ColonSecondsTz | Std::NumColonSecondsTz => {
                            if value.len() < 9 || value[3] != b':' || value[6] != b':' {
                                return Err(Bad);
                            }
                            (sign, hh, mm, ss) =
                                (value[0], &value[1..3], &value[4..6], &value[7..9]);
                            value = &value[9..];
                        }
                        Std::Iso8601SecondsTz | Std::NumSecondsTz => {
                            if value.len() < 7 {
                                return Err(Bad);
                            }
                            (sign, hh, mm, ss) =
                                (value[0], &value[1..3], &value[3..5], &value[5..7]);
                            value = &value[7..];
                        }
                        _ => {
                            if value.len() < 5 {
                                return Err(Bad);
                            }
                            (sign, hh, mm, ss) = (value[0], &value[1..3], &value[3..5], b"00");
                            value = &value[5..];
                        }
                    }
                    let (h, _) = getnum(hh, true)?;
                    let (m, _) = getnum(mm, true)?;
                    let (s, _) = getnum(ss, true)?;
                    if h > 24 {
                        range = Some("time zone offset hour");
                    }
                    if m > 60 {
                        range = Some("time zone offset minute");
                    }
                    if s > 60 {
                        range = Some("time zone offset second");
                    }
                    zone_offset = (h * 60 + m) * 60 + s;
                    match sign {
                        b'+' => {}
                        b'-' => zone_offset = -zone_offset,
                        _ => return Err(Bad),
                    }
                }
            }
            Ok(())
        })();
        if let Some(r) = range {
            return Err(message(&format!(": {r} out of range")));
        }
        if result.is_err() {
            return Err(parse_error(stdstr, hold));
        }
    }
    if pm && hour < 12 {
        hour += 12;
    } else if am && hour == 12 {
        hour = 0;
    }
    if yday >= 0 {
        let (mut m, mut d) = (0, 0);
        if is_leap(year) {
            if yday == 31 + 29 {
                (m, d) = (2, 29);
            } else if yday > 31 + 29 {
                yday -= 1;
            }
        }
        if !(1..=365).contains(&yday) {
            return Err(message(": day-of-year out of range"));
        }
        if m == 0 {
            m = (yday - 1) / 31 + 1;
            if days_before(m + 1) < yday {
                m += 1;
            }
            d = yday - days_before(m);
        }
        if month >= 0 && month != m {
            return Err(message(": day-of-year does not match month"));
        }
        month = m;
        if day >= 0 && day != d {
            return Err(message(": day-of-year does not match day"));
        }
        day = d;
    } else {
        if month < 0 {
            month = 1;
        }
        if day < 0 {
            day = 1;
        }
    }
    if day < 1 || day > i64::from(days_in(month as u32, year)) {
        return Err(message(": day out of range"));
    }
    let build = |offset: i64, loc: Location| {
        Time::from_civil_utc(
            year,
            month as u32,
            day as u32,
            (hour as u32, min as u32, sec as u32),
            nsec as u32,
            offset as i32,
            loc,
        )
    };
    if utc {
        return Ok(build(0, Location::Utc));
    }
    let name: Rc<str> = Rc::from(String::from_utf8_lossy(zone_name).as_ref());
    if zone_offset != -1 {
        // The local zone (UTC) when it matches, else a fixed zone.
        if zone_offset == 0 && (zone_name.is_empty() || zone_name == b"UTC") {
            return Ok(build(0, Location::Local));
        }
        return Ok(build(
            zone_offset,
            Location::fixed(name, zone_offset as i32),
        ));
    }
    if !zone_name.is_empty() {
        // An abbreviation the local zone (UTC) does not know: the clock as
        // written, shown with that name (and GMT's hours).
        let mut offset = 0i64;
        if zone_name.len() > 3 && zone_name.starts_with(b"GMT") {
            offset = atoi(&zone_name[3..]).unwrap_or(0) * 3600;
        }
        return Ok(build(0, Location::Utc).with_location(Location::fixed(name, offset as i32)));
    }
    Ok(build(0, Location::Local))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(layout: &str, value: &str) -> String {
        match parse(layout, value) {
            Ok(t) => t.go_string(),
            Err(e) => e,
        }
    }

    // Expected strings from Go 1.25 (Helm v4.2.3's toDate/mustToDate).
    #[test]
    fn parses_as_go() {
        assert_eq!(
            t("2006-01-02", "2024-03-05"),
            "2024-03-05 00:00:00 +0000 UTC"
        );
        assert_eq!(
            t("2006-01-02 MST", "2024-03-05 PST"),
            "2024-03-05 00:00:00 +0000 PST"
        );
        assert_eq!(
            t("2006-01-02 MST", "2024-07-05 GMT+3"),
            "2024-07-05 03:00:00 +0300 GMT+3"
        );
        assert_eq!(
            t("2006-01-02 -0700", "2024-07-05 +0530"),
            "2024-07-05 00:00:00 +0530 +0530"
        );
        assert_eq!(
            t("2006", "x"),
            "parsing time \"x\" as \"2006\": cannot parse \"x\" as \"2006\""
        );
        assert_eq!(
            t("2006-01-02", "2024-02-30"),
            "parsing time \"2024-02-30\": day out of range"
        );
        assert_eq!(
            t("2006", "2024 tail"),
            "parsing time \"2024 tail\": extra text: \" tail\""
        );
    }

    #[test]
    fn hostile_layouts_do_not_panic() {
        let long = ".".repeat(5000) + &"0".repeat(5000);
        for layout in [
            "",
            "_",
            "__",
            "_2006",
            "Z",
            "-07",
            ".0",
            ",9",
            "Jan",
            "January",
            "Mon",
            "PM",
            long.as_str(),
            "é2006",
            "2006é",
            "MST MST",
        ] {
            let _ = format(&Time::unix(i64::MAX, 0), layout);
            let _ = format(&Time::unix(i64::MIN, 0), layout);
            for value in [
                "",
                "é",
                "2024",
                "+",
                "-",
                "GMT+",
                "GMT+99",
                "99999999999999999999",
                ".",
                ",1",
            ] {
                let _ = parse(layout, value);
            }
        }
    }

    /// Layouts and values drawn from the characters Go's layouts and
    /// parser react to (a fixed-seed generator): no input panics, as a
    /// panic is a trap of the wasm component.
    #[test]
    fn random_layouts_and_values_never_panic() {
        const PIECES: &[&str] = &[
            "2006",
            "06",
            "Jan",
            "January",
            "01",
            "1",
            "Mon",
            "Monday",
            "2",
            "_2",
            "02",
            "__2",
            "002",
            "15",
            "3",
            "03",
            "4",
            "04",
            "5",
            "05",
            "PM",
            "pm",
            "MST",
            "Z0700",
            "Z070000",
            "Z07",
            "Z07:00",
            "Z07:00:00",
            "-0700",
            "-070000",
            "-07",
            "-07:00",
            "-07:00:00",
            ".0",
            ".000",
            ".9",
            ".999",
            ",000",
            ",9",
            "_",
            " ",
            "-",
            "+",
            ":",
            ".",
            ",",
            "Z",
            "GMT",
            "UTC",
            "ChST",
            "WITA",
            "é",
            "\u{ff}",
            "9",
            "0",
            "24",
            "60",
            "99",
            "366",
            "AM",
        ];
        fn step(state: &mut u64) -> u64 {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            *state
        }
        fn text(state: &mut u64, n: u64) -> String {
            (0..n)
                .map(|_| PIECES[(step(state) % PIECES.len() as u64) as usize])
                .collect()
        }
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            let n = 1 + step(&mut state) % 6;
            let layout = text(&mut state, n);
            let value = text(&mut state, n);
            let _ = parse(&layout, &value);
            let _ = parse(&value, &layout);
            let _ = format(&Time::unix(0x7fff_ffff_ffff, 123_456_789), &layout);
        }
    }
}
