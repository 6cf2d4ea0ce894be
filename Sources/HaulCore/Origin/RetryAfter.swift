import FoundationEssentials
import HaulLoop

/// Retry-After (RFC 9110 10.2.3): delay-seconds or an HTTP date.
enum RetryAfter {
    static func seconds(_ value: String, now: Date = Date()) -> Double? {
        let trimmed = value.trimmingSpaces()
        if let seconds = Double(trimmed), seconds >= 0, seconds.isFinite { return seconds }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

/// HTTP dates (RFC 9110 5.6.7): IMF-fixdate, which servers send, and the two obsolete forms recipients must still
/// read, RFC 850 and asctime. Always GMT.
///
/// Written here, not Foundation's: this toolchain's Foundation (Swift 6.3) has no `Date.HTTPFormatStyle`, and
/// `DateFormatter` would link FoundationInternationalization and its ICU data into a binary that needs neither.
public enum HTTPDate {
    /// `Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT` or `Sun Nov  6 08:49:37 1994`.
    public static func parse(_ text: String) -> Date? {
        let words = text.split(separator: " ", omittingEmptySubsequences: true)
        let day: Int, month: Int, year: Int, time: Substring
        if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT" {
            // IMF-fixdate: day-name "," SP day SP month SP year SP time SP "GMT"
            guard let d = number(words[1], digits: 2), let m = monthNumber(words[2]),
                let y = number(words[3], digits: 4)
            else { return nil }
            (day, month, year, time) = (d, m, y, words[4])
        } else if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT" {
            // rfc850-date: day-name-l "," SP day "-" month "-" 2DIGIT SP time SP "GMT"
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, let d = number(parts[0], digits: 2), let m = monthNumber(parts[1]),
                let yy = number(parts[2], digits: 2)
            else { return nil }
            // 70-99 as 19xx, the rest as 20xx: RFC 9110's "not more than 50 years ahead" until 2050.
            (day, month, year, time) = (d, m, yy < 70 ? 2000 + yy : 1900 + yy, words[2])
        } else if words.count == 5 {
            // asctime-date: day-name SP month SP ( 2DIGIT / ( SP 1DIGIT ) ) SP time SP year
            guard let m = monthNumber(words[1]), words[2].count <= 2, let d = number(words[2], digits: words[2].count),
                let y = number(words[4], digits: 4)
            else { return nil }
            (day, month, year, time) = (d, m, y, words[3])
        } else {
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, let hour = number(clock[0], digits: 2), let minute = number(clock[1], digits: 2),
            let second = number(clock[2], digits: 2), hour < 24, minute < 60, second <= 60,
            day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    /// `date` as IMF-fixdate, the form servers send: `Sun, 06 Nov 1994 08:49:37 GMT`.
    public static func format(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let (year, month, day) = civil(days)
        let weekday = ((days % 7) + 10) % 7  // 1970-01-01 was a Thursday
        let rest = seconds - days * 86_400
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekdays[weekday]), \(two(day)) \(monthNames[month - 1]) \(year) \(two(rest / 3600)):"
            + "\(two(rest / 60 % 60)):\(two(rest % 60)) GMT"
    }

    private static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// The date of day `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civil(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    private static func monthNumber(_ word: Substring) -> Int? {
        guard word.utf8.count == 3 else { return nil }
        let lowered = String(decoding: word.utf8.map(ASCII.lower), as: UTF8.self)
        return months.firstIndex(of: lowered).map { $0 + 1 }
    }

    /// A number of exactly `digits` ASCII digits.
    private static func number(_ text: Substring, digits: Int) -> Int? {
        guard digits > 0, text.utf8.count == digits,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return Int(text)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
