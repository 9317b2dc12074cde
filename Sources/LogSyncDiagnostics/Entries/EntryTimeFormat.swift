import LogStore

extension EntryTime {
    /// The time in ISO 8601 UTC with microseconds, for example `2023-11-14T22:13:20.123456Z`.
    ///
    /// A pure function of the stored microseconds (no `DateFormatter`, no time zone, no locale),
    /// exact for every `Int64` value: years outside 0000–9999 use ISO 8601's expanded form with
    /// a sign and six digits (`+292277-…`, `-000001-…`).
    public var iso8601: String {
        let microsPerDay: Int64 = 86_400_000_000
        let micros = microsecondsSince1970
        // Floor division, so times before 1970 land on the right day.
        var days = micros / microsPerDay
        var within = micros % microsPerDay
        if within < 0 {
            days -= 1
            within += microsPerDay
        }
        let (year, month, day) = Self.civilDate(daysSince1970: days)
        let seconds = within / 1_000_000
        let fraction = within % 1_000_000

        var text = ""
        text.reserveCapacity(27)
        if (0...9999).contains(year) {
            text += padded(year, width: 4)
        } else {
            text += year < 0 ? "-" : "+"
            text += padded(year.magnitude, width: 6)
        }
        text += "-" + padded(month, width: 2) + "-" + padded(day, width: 2)
        text += "T" + padded(seconds / 3600, width: 2) + ":" + padded(seconds / 60 % 60, width: 2)
        text += ":" + padded(seconds % 60, width: 2) + "." + padded(fraction, width: 6) + "Z"
        return text
    }

    /// The proleptic Gregorian date of a day number (days since 1970-01-01), after Howard
    /// Hinnant's `civil_from_days`.
    static func civilDate(daysSince1970: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = daysSince1970 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153  // March = 0
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// `value` in decimal, left-padded with zeros to `width` digits.
func padded<T: BinaryInteger>(_ value: T, width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
