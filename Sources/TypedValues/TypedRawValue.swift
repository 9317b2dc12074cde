/// A value that gives one raw value a type of its own — a log offset, an entry kind, a device,
/// request or subscription ID, a change offset — so that two meanings of the same raw type cannot
/// be mixed up.
///
/// Conforming types declare their stored `rawValue`, a non-failable `init(rawValue:)` and, where
/// they print, a `description`; the unlabelled initializer, the string-literal initializer and the
/// single-value `Codable` form (the raw value alone) come from here. A module of its own, below
/// both the log (LogStore) and the model (SyncModel), so that the model needs no storage module
/// to have it.
public protocol TypedRawValue: RawRepresentable, Hashable, Sendable, Codable
where RawValue: Hashable & Sendable & Codable {
    init(rawValue: RawValue)
}

extension TypedRawValue {
    /// Wraps a raw value.
    public init(_ rawValue: RawValue) { self.init(rawValue: rawValue) }

    /// Decodes the raw value alone.
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(RawValue.self))
    }

    /// Encodes the raw value alone.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension TypedRawValue where Self: CustomStringConvertible, RawValue: CustomStringConvertible {
    /// The raw value's text; a type with a richer rendering (an ID's kind and quotes) declares
    /// its own.
    public var description: String { rawValue.description }
}

extension TypedRawValue where Self: ExpressibleByStringLiteral, RawValue == String {
    /// Wraps a string literal.
    public init(stringLiteral value: String) { self.init(rawValue: value) }
}
