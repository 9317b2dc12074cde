import Foundation
import LogStore
import LogToolCore
import Testing

@testable import LogSyncDiagnostics

@Suite("EntryTime.iso8601")
struct EntryTimeFormatTests {
    @Test(
        arguments: [
            (0, "1970-01-01T00:00:00.000000Z"),
            (1, "1970-01-01T00:00:00.000001Z"),
            (-1, "1969-12-31T23:59:59.999999Z"),
            (1_700_000_000_123_456, "2023-11-14T22:13:20.123456Z"),
            (951_782_400_000_000, "2000-02-29T00:00:00.000000Z"),
            (951_868_799_999_999, "2000-02-29T23:59:59.999999Z"),
            (253_402_300_799_999_999, "9999-12-31T23:59:59.999999Z"),
            (253_402_300_800_000_000, "+010000-01-01T00:00:00.000000Z"),
            (-62_167_219_200_000_000, "0000-01-01T00:00:00.000000Z"),
            (-62_167_219_200_000_001, "-000001-12-31T23:59:59.999999Z"),
            (Int64.max, "+294247-01-10T04:00:54.775807Z"),
            (Int64.min, "-290308-12-21T19:59:05.224192Z"),
        ] as [(Int64, String)])
    func knownTimes(micros: Int64, expected: String) {
        #expect(EntryTime(microsecondsSince1970: micros).iso8601 == expected)
    }

    @Test func agreesWithFoundationToTheSecond() {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        // 1900 to 2100 in steps of a little over 23 days, hitting every day of the month and hour.
        for seconds in stride(from: Int64(-2_208_988_800), through: 4_102_444_800, by: 2_000_003) {
            let micros = seconds * 1_000_000 + 123_456
            let text = EntryTime(microsecondsSince1970: micros).iso8601
            let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            #expect(text == expected.dropLast() + ".123456Z", "at \(seconds) s")
        }
    }

    @Test func isAlwaysTwentySevenCharactersForFourDigitYears() {
        for micros in [Int64(0), 1_234_567, 1_700_000_000_000_000, -1_000_000_000_000_000] {
            #expect(EntryTime(microsecondsSince1970: micros).iso8601.count == 27)
        }
    }
}
