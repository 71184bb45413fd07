//! A usage-limit notice as an agent prints it, and the reset time it names.
//!
//! Claude Code prints the reset as local wall-clock time, floored to the minute, with a
//! date when it is not today and usually the zone in parentheses: `You've hit your
//! session limit · resets 5:08pm (UTC)`, `… resets Dec 7, 2:09pm (UTC)`, `… resets Sep
//! 15 at 7pm`, `… resets Mon 12:00am` (../shared/notes/claude-code-sessions.md §3.1). The
//! reset read here is the end of the named minute, so waiting for it never ends early.
//! Zones are looked up by the caller (this crate reads no time-zone database).

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan as _};
use serde::Serialize;

/// A limit notice seen on an agent's screen or in its hook report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitNotice {
    /// The notice's line, as shown.
    pub text: String,
    /// When the limit resets, when the notice says and the time could be placed.
    pub resets_at: Option<Timestamp>,
}

/// Finds the zone a notice names (`None`: the notice names none, the machine's own).
pub type ZoneOf<'a> = &'a dyn Fn(Option<&str>) -> Option<TimeZone>;

impl LimitNotice {
    /// Reads `line`, seen at `now`: its reset placed at the first such wall-clock minute
    /// that has not yet ended.
    pub fn read(line: &str, now: Timestamp, zone_of: ZoneOf<'_>) -> Self {
        let resets_at = Reset::parse(line).and_then(|reset| {
            let zone = zone_of(reset.zone.as_deref())?;
            reset.next_end(now, &zone)
        });
        Self { text: line.trim().to_owned(), resets_at }
    }
}

/// The reset a notice names, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reset {
    time: Time,
    day: Day,
    zone: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Day {
    /// No date: today, or tomorrow once today's has passed.
    Next,
    Weekday(Weekday),
    /// Month and day: this year, or next once this year's has passed.
    Date(i8, i8),
}

const MONTHS: [&str; 12] =
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Monday),
    ("tue", Weekday::Tuesday),
    ("wed", Weekday::Wednesday),
    ("thu", Weekday::Thursday),
    ("fri", Weekday::Friday),
    ("sat", Weekday::Saturday),
    ("sun", Weekday::Sunday),
];

impl Reset {
    fn parse(line: &str) -> Option<Self> {
        let (_, rest) = line.split_once("resets ")?;
        let (rest, zone) = match rest.split_once('(') {
            Some((before, zone)) => {
                (before, zone.split_once(')').map(|(zone, _)| zone.trim().to_owned()))
            }
            None => (rest, None),
        };
        let words: Vec<String> = rest
            .split([' ', ','])
            .filter(|word| !word.is_empty() && *word != "at")
            .map(str::to_ascii_lowercase)
            .collect();
        let (clock, before) = words.split_last()?;
        let time = clock_time(clock)?;
        let day = match before {
            [] => Day::Next,
            [name] => Day::Weekday(WEEKDAYS.iter().find(|(day, _)| name.starts_with(day))?.1),
            [month, day] => {
                let month = MONTHS.iter().position(|m| month.starts_with(m))?;
                Day::Date(i8::try_from(month + 1).ok()?, day.parse().ok()?)
            }
            _ => return None,
        };
        Some(Self { time, day, zone })
    }

    /// The end of the first named minute in `zone` that has not ended at `now`.
    fn next_end(&self, now: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let today = now.to_zoned(zone.clone()).date();
        let end = |date: Date| -> Option<Timestamp> {
            let start = date.to_datetime(self.time).to_zoned(zone.clone()).ok()?.timestamp();
            Some(start + SignedDuration::from_secs(60))
        };
        let first = match self.day {
            Day::Next => today,
            Day::Weekday(weekday) => match today.weekday() == weekday {
                true => today,
                false => today.nth_weekday(1, weekday).ok()?,
            },
            Day::Date(month, day) => Date::new(today.year(), month, day).ok()?,
        };
        let at = end(first)?;
        if at > now {
            return Some(at);
        }
        let later = match self.day {
            Day::Next => first.checked_add(1.day()).ok()?,
            Day::Weekday(_) => first.checked_add(1.week()).ok()?,
            Day::Date(month, day) => Date::new(today.year() + 1, month, day).ok()?,
        };
        end(later)
    }
}

/// `5pm`, `5:08pm`, `12:00am` (or a 24-hour `17:08`).
fn clock_time(word: &str) -> Option<Time> {
    let (digits, half) = match (word.strip_suffix("am"), word.strip_suffix("pm")) {
        (Some(digits), _) => (digits, Some(0)),
        (_, Some(digits)) => (digits, Some(12)),
        _ => (word, None),
    };
    let (hour, minute) = digits.split_once(':').unwrap_or((digits, "0"));
    let (hour, minute): (i8, i8) = (hour.parse().ok()?, minute.parse().ok()?);
    let hour = match half {
        Some(_) if !(1..=12).contains(&hour) => return None,
        Some(offset) => hour % 12 + offset,
        None => hour,
    };
    Time::new(hour, minute, 0, 0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(_: Option<&str>) -> Option<TimeZone> {
        Some(TimeZone::UTC)
    }

    fn read_at(line: &str, now: &str) -> Option<String> {
        let now: Timestamp = now.parse().unwrap();
        LimitNotice::read(line, now, &utc).resets_at.map(|t| t.to_string())
    }

    #[test]
    fn a_reset_is_the_end_of_the_minute_it_names_next() {
        let line = "You've hit your session limit · resets 5:08pm (UTC)";
        assert_eq!(read_at(line, "2026-12-04T16:00:00Z").as_deref(), Some("2026-12-04T17:09:00Z"));
        assert_eq!(
            read_at(line, "2026-12-04T17:08:30Z").as_deref(),
            Some("2026-12-04T17:09:00Z"),
            "floored to the minute: not yet over"
        );
        assert_eq!(read_at(line, "2026-12-04T17:10:00Z").as_deref(), Some("2026-12-05T17:09:00Z"));
        let line = "You've hit your weekly limit · resets Dec 7, 2:09pm (UTC)";
        assert_eq!(read_at(line, "2026-12-04T16:00:00Z").as_deref(), Some("2026-12-07T14:10:00Z"));
        let line = "You've hit your weekly limit · resets Sep 15 at 7pm";
        assert_eq!(read_at(line, "2026-12-04T16:00:00Z").as_deref(), Some("2027-09-15T19:01:00Z"));
        // 2026-12-04 is a Friday.
        let line = "You've hit your weekly limit · resets Mon 12:00am";
        assert_eq!(read_at(line, "2026-12-04T16:00:00Z").as_deref(), Some("2026-12-07T00:01:00Z"));
        let line = "5-hour limit reached ∙ resets 5am";
        assert_eq!(read_at(line, "2026-12-04T16:00:00Z").as_deref(), Some("2026-12-05T05:01:00Z"));
    }

    #[test]
    fn a_notice_without_a_readable_reset_keeps_its_text() {
        for line in [
            "API Error: Request rejected (429) · rate limited",
            "resets soon",
            "resets 13pm",
            "resets 25:00",
        ] {
            assert_eq!(read_at(line, "2026-12-04T16:00:00Z"), None, "{line}");
        }
        let zone_of = |zone: Option<&str>| {
            (zone == Some("Europe/Rome")).then_some(TimeZone::fixed(jiff::tz::offset(1)))
        };
        let now: Timestamp = "2026-12-04T16:00:00Z".parse().unwrap();
        let rome = LimitNotice::read("resets 11:20pm (Europe/Rome)", now, &zone_of);
        assert_eq!(rome.resets_at.map(|t| t.to_string()).as_deref(), Some("2026-12-04T22:21:00Z"));
        let unknown = LimitNotice::read("resets 11:20pm (Mars/Olympus)", now, &zone_of);
        assert_eq!(unknown.resets_at, None, "an unknown zone places no time");
    }
}
