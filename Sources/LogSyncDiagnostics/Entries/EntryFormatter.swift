import Foundation
import LogStore

/// Turns log entries into the lines `logtool dump` prints. Pure: the same entry always gives
/// the same line, and nothing here reads a clock, a locale or the terminal.
///
/// Text (one line per entry, columns separated by two spaces):
///
/// ```
///      3  2023-11-14T22:13:20.000002Z  kind   1  size     14  08677265 6574696e 6768656c 6c6f      |.greetinghello|
///     12  2026-05-01T09:30:00.000012Z  kind 103  size    104  recordSaved  zone=Notes record=n1 type=Note tag=12 keys=[body,title]
/// ```
///
/// offset (right-aligned to `offsetWidth`), time (ISO 8601 UTC, microseconds), kind, payload
/// size in bytes, then:
///
/// - for an entry the `decoder` describes: the kind's name and the fields as `name=value`
///   separated by spaces (a list as `[a,b]`; a value with a space, a quote, a backslash, `=`,
///   `[`, `]`, `,` or a control character, or an empty one, in double quotes with `\"`, `\\`,
///   `\n`, `\r`, `\t` and `\u{…}` escapes);
/// - for any other entry: the first `headByteCount` payload bytes in hex (groups of four) and the
///   same bytes as printable ASCII between bars (`.` for other bytes), followed by `…` when the
///   payload is longer than the head.
///
/// JSON Lines (`--json`, one object per line, keys in this order; `kindName` and `fields` only
/// for a described entry):
///
/// ```
/// {"offset":3,"time":"2023-11-14T22:13:20.000002Z","timeMicros":1700000000000002,"kind":1,"size":14,"payloadBase64":"CGdyZWV0aW5naGVsbG8="}
/// {"offset":12,…,"kind":103,"kindName":"recordSaved","size":104,"fields":{"zone":"Notes","record":"n1","type":"Note","tag":"12","keys":["body","title"]},"payloadBase64":"…"}
/// ```
///
/// `payloadBase64` holds the *whole* payload (standard alphabet, padded), so a JSON dump loses
/// nothing; `size` is its length in bytes and `timeMicros` the exact stored time. In `fields`,
/// text is a string, a count or offset a number, a list an array of strings.
public struct EntryFormatter: Sendable {
    /// How many payload bytes the text line shows.
    public var headByteCount: Int
    /// The minimum width of the offset column (right-aligned).
    public var offsetWidth: Int
    /// Describes entries whose kinds it knows (`nil`: every entry is shown as bytes).
    public var decoder: EntryDecoder?

    public init(headByteCount: Int = 16, offsetWidth: Int = 6, decoder: EntryDecoder? = .server) {
        self.headByteCount = headByteCount
        self.offsetWidth = offsetWidth
        self.decoder = decoder
    }

    /// The `decoder`'s description of `entry`, or `nil` when there is no decoder or it does not
    /// know the entry's kind.
    ///
    /// - Throws: `LogStoreError` naming the offset when the payload is not valid for its kind.
    public func describe(_ entry: LogEntry) throws(LogStoreError) -> EntryDescription? {
        try decoder?.describe(entry)
    }

    /// The human-readable line for `entry`, without a line break.
    ///
    /// - Throws: `LogStoreError` naming the offset when the decoder cannot decode the payload.
    public func textLine(_ entry: LogEntry) throws(LogStoreError) -> String {
        textLine(entry, description: try describe(entry))
    }

    /// The human-readable line for `entry` described as `description` (`nil`: show its bytes),
    /// without a line break.
    public func textLine(_ entry: LogEntry, description: EntryDescription?) -> String {
        var line = leftPadded(entry.offset.description, width: offsetWidth)
        line += "  " + entry.time.iso8601
        line += "  kind " + leftPadded(entry.kind.description, width: 3)
        line += "  size " + leftPadded(String(entry.payload.count), width: 6)
        if let description {
            line += "  " + description.kindName
            if !description.fields.isEmpty { line += "  " + Self.fieldsText(description.fields) }
            return line
        }
        let head = entry.payload.prefix(headByteCount)
        line += "  " + rightPadded(Self.hex(head), width: Self.hexWidth(byteCount: headByteCount))
        line += "  |" + Self.printable(head) + "|"
        if entry.payload.count > head.count { line += "…" }
        return line
    }

    /// The JSON object for `entry` on one line, without a line break.
    ///
    /// - Throws: `LogStoreError` naming the offset when the decoder cannot decode the payload.
    public func jsonLine(_ entry: LogEntry) throws(LogStoreError) -> String {
        jsonLine(entry, description: try describe(entry))
    }

    /// The JSON object for `entry` described as `description` (`nil`: no `kindName` and
    /// `fields`) on one line, without a line break.
    public func jsonLine(_ entry: LogEntry, description: EntryDescription?) -> String {
        var line = "{\"offset\":\(entry.offset.rawValue)"
        line += ",\"time\":\"\(entry.time.iso8601)\""
        line += ",\"timeMicros\":\(entry.time.microsecondsSince1970)"
        line += ",\"kind\":\(entry.kind.rawValue)"
        if let description { line += ",\"kindName\":" + Self.jsonString(description.kindName) }
        line += ",\"size\":\(entry.payload.count)"
        if let description { line += ",\"fields\":" + Self.jsonObject(description.fields) }
        line += ",\"payloadBase64\":\"\(Data(entry.payload).base64EncodedString())\"}"
        return line
    }

    // MARK: Fields

    /// Fields as text: `name=value` separated by single spaces.
    public static func fieldsText(_ fields: [EntryDescription.Field]) -> String {
        fields.map { $0.name + "=" + text($0.value) }.joined(separator: " ")
    }

    /// A value as text: a word (quoted when needed, see `word`), a decimal number, or a list
    /// of words as `[a,b]`.
    public static func text(_ value: EntryDescription.Value) -> String {
        value.rendered(string: word)
    }

    /// `text` unchanged when it is not empty and holds no white space, control character, `"`,
    /// `\`, `=`, `[`, `]` or `,`; otherwise in double quotes with `\"`, `\\`, `\n`, `\r`, `\t`
    /// and `\u{…}` escapes. So `name=value` pairs and lists split back unambiguously.
    public static func word(_ text: String) -> String {
        let special: Set<Unicode.Scalar> = ["\"", "\\", "=", "[", "]", ","]
        let plain =
            !text.isEmpty
            && text.unicodeScalars.allSatisfy { scalar in
                !special.contains(scalar) && !scalar.properties.isWhitespace && !isControl(scalar)
            }
        if plain { return text }
        return doubleQuoted(text) { scalar in
            isControl(scalar) ? "\\u{" + String(scalar.value, radix: 16) + "}" : nil
        }
    }

    /// Fields as a JSON object, keys in the fields' order.
    public static func jsonObject(_ fields: [EntryDescription.Field]) -> String {
        "{" + fields.map { jsonString($0.name) + ":" + json($0.value) }.joined(separator: ",") + "}"
    }

    /// A value in JSON: a string, a number or an array of strings.
    public static func json(_ value: EntryDescription.Value) -> String {
        value.rendered(string: jsonString)
    }

    /// `text` as a JSON string: `"` and `\` escaped, control characters (and U+2028, U+2029)
    /// as `\n`, `\r`, `\t`, `\b`, `\f` or `\u00XX`; everything else as itself (UTF-8).
    public static func jsonString(_ text: String) -> String {
        doubleQuoted(text) { scalar in
            switch scalar {
            case "\u{08}": return "\\b"
            case "\u{0C}": return "\\f"
            default:
                guard scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029 else { return nil }
                let digits = String(scalar.value, radix: 16)
                return "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
            }
        }
    }

    /// The escapes `word` and `jsonString` share: a quote, a backslash, a line feed, a carriage
    /// return and a tab as `\"`, `\\`, `\n`, `\r` and `\t`.
    private static let commonEscapes: [Unicode.Scalar: String] = [
        "\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    ]

    /// `text` in double quotes, each scalar escaped by `commonEscapes` or else by `escape`
    /// (`nil`: the scalar as itself).
    private static func doubleQuoted(_ text: String, escape: (Unicode.Scalar) -> String?) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            if let escaped = commonEscapes[scalar] ?? escape(scalar) {
                quoted += escaped
            } else {
                quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    // MARK: Bytes

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
