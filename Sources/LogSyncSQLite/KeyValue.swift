import Foundation

/// A value of a ``SyncedKeyValueStore``: what a property list holds.
///
/// ```swift
/// try settings.set("dark", forKey: "theme")
/// try settings.set(["size": 14, "font": "Menlo"], forKey: "editor")
/// ```
///
/// A value is stored as JSON with a type tag (`{"string":"dark"}`, `{"int":14}`), keys sorted,
/// so the same value is always the same bytes: setting a key to the value it holds changes only
/// its modification date, and sizes are counted the same on every device. A double that is not
/// finite is tagged as text (`{"double":"nan"}`); a date is its seconds since 2001-01-01 (exact);
/// data is its Base64 text.
public enum KeyValue: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Text.
    case string(String)
    /// A 64-bit integer (`longLong` in `NSUbiquitousKeyValueStore`).
    case int(Int64)
    /// A double.
    case double(Double)
    /// A Boolean.
    case bool(Bool)
    /// Bytes.
    case data(Data)
    /// A date.
    case date(Date)
    /// A list of values.
    case array([KeyValue])
    /// Values by text keys.
    case dictionary([String: KeyValue])

    private enum Tag: String, CodingKey {
        case string, int, double, bool, data, date, array, dictionary
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Tag.self)
        switch self {
        case .string(let text): try container.encode(text, forKey: .string)
        case .int(let number): try container.encode(number, forKey: .int)
        case .double(let number): try Self.encode(number, .double, &container)
        case .bool(let flag): try container.encode(flag, forKey: .bool)
        case .data(let bytes): try container.encode(bytes.base64EncodedString(), forKey: .data)
        case .date(let date): try Self.encode(date.timeIntervalSinceReferenceDate, .date, &container)
        case .array(let values): try container.encode(values, forKey: .array)
        case .dictionary(let values): try container.encode(values, forKey: .dictionary)
        }
    }

    private static func encode(_ number: Double, _ tag: Tag, _ container: inout KeyedEncodingContainer<Tag>) throws {
        if number.isFinite {
            try container.encode(number, forKey: tag)
        } else {
            try container.encode(number.isNaN ? "nan" : number > 0 ? "inf" : "-inf", forKey: tag)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Tag.self)
        guard container.allKeys.count == 1, let tag = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "a value is an object of one type tag, not of \(container.allKeys.count)"))
        }
        switch tag {
        case .string: self = .string(try container.decode(String.self, forKey: tag))
        case .int: self = .int(try container.decode(Int64.self, forKey: tag))
        case .double: self = .double(try Self.decodeNumber(container, tag))
        case .bool: self = .bool(try container.decode(Bool.self, forKey: tag))
        case .data:
            guard let bytes = Data(base64Encoded: try container.decode(String.self, forKey: tag)) else {
                throw DecodingError.dataCorruptedError(
                    forKey: tag, in: container, debugDescription: "data that is not Base64")
            }
            self = .data(bytes)
        case .date: self = .date(Date(timeIntervalSinceReferenceDate: try Self.decodeNumber(container, tag)))
        case .array: self = .array(try container.decode([KeyValue].self, forKey: tag))
        case .dictionary: self = .dictionary(try container.decode([String: KeyValue].self, forKey: tag))
        }
    }

    private static func decodeNumber(_ container: KeyedDecodingContainer<Tag>, _ tag: Tag) throws -> Double {
        if let number = try? container.decode(Double.self, forKey: tag) { return number }
        switch try container.decode(String.self, forKey: tag) {
        case "nan": return .nan
        case "inf": return .infinity
        case "-inf": return -.infinity
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: tag, in: container, debugDescription: "\"\(other)\" is not a number")
        }
    }

    /// The value's stored bytes: JSON with a type tag, keys sorted.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    public var description: String {
        switch self {
        case .string(let text): "\"\(text)\""
        case .int(let number): "\(number)"
        case .double(let number): "\(number)"
        case .bool(let flag): "\(flag)"
        case .data(let bytes): "\(bytes.count) bytes"
        case .date(let date): "\(date)"
        case .array(let values): "[\(values.map(\.description).joined(separator: ", "))]"
        case .dictionary(let values):
            "[\(values.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", "))]"
        }
    }
}

extension KeyValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: KeyValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, KeyValue)...) {
        self = .dictionary(Dictionary(elements) { _, last in last })
    }
}
