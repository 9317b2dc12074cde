import Foundation
import KeyValueLog
import LogStore
import LogToolCore
import Testing

@testable import LogSyncDiagnostics

@Suite("EntryFormatter")
struct EntryFormatterTests {
    static let greeting = LogEntry(
        offset: 3, kind: 1, time: EntryTime(microsecondsSince1970: 1_700_000_000_000_002),
        payload: KeyValueEntry.set(key: "greeting", value: Array("hello".utf8)).newEntry.payload)

    @Test func textLineOfAShortPayload() throws {
        #expect(
            try EntryFormatter().textLine(Self.greeting)
                == "     3  2023-11-14T22:13:20.000002Z  kind   1  size     14  08677265 6574696e 6768656c 6c6f      |.greetinghello|"
        )
    }

    @Test func textLineOfALongPayloadShowsSixteenBytesAndAnEllipsis() throws {
        let entry = LogEntry(
            offset: 12, kind: 3, time: .init(microsecondsSince1970: 0),
            payload: Array("abcdefghijklmnopqrstuvwxyz".utf8))
        #expect(
            try EntryFormatter().textLine(entry)
                == "    12  1970-01-01T00:00:00.000000Z  kind   3  size     26  61626364 65666768 696a6b6c 6d6e6f70  |abcdefghijklmnop|…"
        )
    }

    @Test func textLineOfAnEmptyPayload() throws {
        let entry = LogEntry(offset: 1, kind: 65535, time: .init(microsecondsSince1970: 0), payload: [])
        #expect(
            try EntryFormatter().textLine(entry)
                == "     1  1970-01-01T00:00:00.000000Z  kind 65535  size      0                                       ||"
        )
    }

    @Test func columnsLineUpForEveryPayloadLength() throws {
        let lines = try (0...20).map { length in
            try EntryFormatter().textLine(
                LogEntry(
                    offset: 1, kind: 1, time: .init(microsecondsSince1970: 0),
                    payload: Array(repeating: 0x41, count: length)))
        }
        let barColumns = Set(lines.map { line in line.distance(from: line.startIndex, to: line.firstIndex(of: "|")!) })
        #expect(barColumns.count == 1)
    }

    @Test func offsetColumnWidens() throws {
        let entry = LogEntry(offset: 12_345_678, kind: 1, time: .init(microsecondsSince1970: 0), payload: [1])
        #expect(try EntryFormatter().textLine(entry).hasPrefix("12345678  1970"))
        #expect(try EntryFormatter(offsetWidth: 10).textLine(entry).hasPrefix("  12345678  1970"))
    }

    @Test func headByteCountIsConfigurable() throws {
        let entry = LogEntry(offset: 1, kind: 1, time: .init(microsecondsSince1970: 0), payload: Array("abcdef".utf8))
        #expect(try EntryFormatter(headByteCount: 4).textLine(entry).hasSuffix("size      6  61626364  |abcd|…"))
    }

    @Test func jsonLine() throws {
        let line = try EntryFormatter().jsonLine(Self.greeting)
        #expect(
            line
                == #"{"offset":3,"time":"2023-11-14T22:13:20.000002Z","timeMicros":1700000000000002,"kind":1,"size":14,"payloadBase64":"CGdyZWV0aW5naGVsbG8="}"#
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["offset"] as? Int == 3)
        #expect(object["size"] as? Int == 14)
        #expect(Data(base64Encoded: try #require(object["payloadBase64"] as? String)) == Data(Self.greeting.payload))
    }

    @Test(arguments: [0, 1, 2, 3, 17, 255, 4096])
    func jsonLineRoundTripsThePayload(length: Int) throws {
        let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let entry = LogEntry(offset: 9, kind: 2, time: .init(microsecondsSince1970: -5), payload: payload)
        let decoded = try JSONDecoder().decode(DumpedEntry.self, from: Data(try EntryFormatter().jsonLine(entry).utf8))
        #expect(
            decoded
                == DumpedEntry(
                    offset: 9, time: "1969-12-31T23:59:59.999995Z", timeMicros: -5, kind: 2, size: length,
                    payloadBase64: Data(payload).base64EncodedString()))
        #expect(Data(base64Encoded: decoded.payloadBase64) == Data(payload))
    }

    @Test(
        arguments: [
            ([], ""),
            ([0x00], "00"),
            ([0xde, 0xad, 0xbe, 0xef], "deadbeef"),
            ([0, 1, 2, 3, 4], "00010203 04"),
            (Array(0..<16), "00010203 04050607 08090a0b 0c0d0e0f"),
        ] as [([UInt8], String)])
    func hex(bytes: [UInt8], expected: String) {
        #expect(EntryFormatter.hex(bytes) == expected)
    }

    @Test func hexWidthIsTheWidthOfHex() {
        for count in 0...40 {
            #expect(
                EntryFormatter.hexWidth(byteCount: count) == EntryFormatter.hex(Array(repeating: 0, count: count)).count
            )
        }
    }

    @Test func printableKeepsOnlyPrintableASCII() {
        #expect(EntryFormatter.printable([0x41, 0x00, 0x7F, 0x20, 0x7E, 0x1F, 0x80, 0xFF]) == "A.. ~...")
        #expect(EntryFormatter.printable(Array("é|x".utf8)) == "..|x")
    }
}

/// One line of `logtool dump --json`.
struct DumpedEntry: Decodable, Equatable {
    var offset: UInt64
    var time: String
    var timeMicros: Int64
    var kind: UInt16
    var size: Int
    var payloadBase64: String
}
