import Foundation
import LogStore

/// Turns log entries into the lines `logtool dump` prints. Pure: the same entry always gives
/// the same line, and nothing here reads a clock, a locale or the terminal.
///
/// Text (one line per entry, columns separated by two spaces):
///
/// ```
///      3  2023-11-14T22:13:20.000002Z  kind   1  size     14  08677265 6574696e 6768656c 6c6f      |.greetinghello|
/// ```
///
/// offset (right-aligned to `offsetWidth`), time (ISO 8601 UTC, microseconds), kind, payload
/// size in bytes, the first `headByteCount` payload bytes in hex (groups of four) and the same
/// bytes as printable ASCII between bars (`.` for other bytes), followed by `…` when the
/// payload is longer than the head.
///
/// JSON Lines (`--json`, one object per line, keys in this order):
///
/// ```
/// {"offset":3,"time":"2023-11-14T22:13:20.000002Z","timeMicros":1700000000000002,"kind":1,"size":14,"payloadBase64":"CGdyZWV0aW5naGVsbG8="}
/// ```
///
/// `payloadBase64` holds the *whole* payload (standard alphabet, padded), so a JSON dump loses
/// nothing; `size` is its length in bytes and `timeMicros` the exact stored time.
public struct EntryFormatter: Sendable {
    /// How many payload bytes the text line shows.
    public var headByteCount: Int
    /// The minimum width of the offset column (right-aligned).
    public var offsetWidth: Int

    public init(headByteCount: Int = 16, offsetWidth: Int = 6) {
        self.headByteCount = headByteCount
        self.offsetWidth = offsetWidth
    }

    /// The human-readable line for `entry`, without a line break.
    public func textLine(_ entry: LogEntry) -> String {
        let head = entry.payload.prefix(headByteCount)
        var line = leftPadded(entry.offset.description, width: offsetWidth)
        line += "  " + entry.time.iso8601
        line += "  kind " + leftPadded(entry.kind.description, width: 3)
        line += "  size " + leftPadded(String(entry.payload.count), width: 6)
        line += "  " + rightPadded(Self.hex(head), width: Self.hexWidth(byteCount: headByteCount))
        line += "  |" + Self.printable(head) + "|"
        if entry.payload.count > head.count { line += "…" }
        return line
    }

    /// The JSON object for `entry` on one line, without a line break.
    public func jsonLine(_ entry: LogEntry) -> String {
        var line = "{\"offset\":\(entry.offset.rawValue)"
        line += ",\"time\":\"\(entry.time.iso8601)\""
        line += ",\"timeMicros\":\(entry.time.microsecondsSince1970)"
        line += ",\"kind\":\(entry.kind.rawValue)"
        line += ",\"size\":\(entry.payload.count)"
        line += ",\"payloadBase64\":\"\(Data(entry.payload).base64EncodedString())\"}"
        return line
    }

    /// Lowercase hex in groups of four bytes: `08677265 6574696e 67`.
    public static func hex<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(hexWidth(byteCount: bytes.count))
        for (index, byte) in bytes.enumerated() {
            if index > 0 && index % 4 == 0 { text.append(UInt8(ascii: " ")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The width of `hex` for `byteCount` bytes.
    public static func hexWidth(byteCount: Int) -> Int {
        byteCount == 0 ? 0 : byteCount * 2 + (byteCount - 1) / 4
    }

    /// Printable ASCII (0x20–0x7E) as itself, every other byte as `.`.
    public static func printable<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        String(decoding: bytes.map { (0x20..<0x7F).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
    }
}

func leftPadded(_ text: String, width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

func rightPadded(_ text: String, width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}
