import Foundation

/// The value of one field of a record.
///
/// Mirrors the value types a `CKRecord` accepts (F129): strings, integers, doubles, booleans,
/// bytes, dates, references, assets, locations and lists of these. Lists are
/// homogeneous and never nested; ``Record/validate()`` enforces it.
///
/// ```swift
/// record["title"] = .string("Groceries")
/// record["count"] = 3                                   // integer literal → .int64(3)
/// record["tags"] = .list([.string("home"), .string("food")])
/// ```
public enum RecordValue: Sendable, Hashable, Codable {
    /// A string.
    case string(String)
    /// A 64-bit signed integer.
    case int64(Int64)
    /// A double-precision floating-point number.
    case double(Double)
    /// A boolean.
    case bool(Bool)
    /// Raw bytes, counted against the record size limit (unlike assets).
    case bytes(Data)
    /// A point in time.
    case date(Date)
    /// A reference to another record in the same zone.
    case reference(Record.Reference)
    /// A file stored apart from the record (``Asset``): its content is not counted against the
    /// record size limit (F134), only its digest and size.
    case asset(Asset)
    /// A place on Earth (``Location``, CloudKit's `CLLocation` values).
    case location(Location)
    /// A list of values of one kind; lists do not nest.
    case list([RecordValue])
    /// A field of ``Record/encryptedValues``: opened on a device, sealed in every request and on
    /// every server (F129). Set it through ``Record/encryptedValues``.
    case encrypted(EncryptedValue)

    /// The approximate number of bytes this value adds to a record, used by the size limits.
    ///
    /// Strings and bytes count their UTF-8 bytes; integers, doubles and dates 8; booleans 1; a
    /// reference its record name, zone name and owner name plus 1; an asset 40 (its digest and
    /// size); a location 64 (eight numbers); a list the sum of its elements; an encrypted value its
    /// sealed size (an opened one its plaintext's size and ``SealedValue/overhead``). Asset *content* is never counted (F134).
    ///
    /// - Complexity: O(n) in the size of the value.
    public var estimatedSize: Int {
        switch self {
        case .string(let text): return text.utf8.count
        case .int64, .double, .date: return 8
        case .bool: return 1
        case .bytes(let data): return data.count
        case .reference(let reference): return reference.estimatedSize
        case .asset: return 40
        case .location: return 64
        case .list(let values): return values.reduce(0) { $0 + $1.estimatedSize }
        case .encrypted(.opened(let value)): return value.estimatedSize + SealedValue.overhead
        case .encrypted(.sealed(let sealed)): return sealed.box.count
        }
    }

    /// The kind of value, used to check that lists are homogeneous.
    var kindName: String {
        switch self {
        case .string: "string"
        case .int64: "int64"
        case .double: "double"
        case .bool: "bool"
        case .bytes: "bytes"
        case .date: "date"
        case .reference: "reference"
        case .asset: "asset"
        case .location: "location"
        case .list: "list"
        case .encrypted: "encrypted"
        }
    }
}

extension Record.Reference {
    /// The approximate number of bytes the reference adds to a record.
    var estimatedSize: Int {
        recordID.recordName.utf8.count + recordID.zoneID.zoneName.utf8.count
            + recordID.zoneID.ownerName.utf8.count + 1
    }
}

extension RecordValue: ExpressibleByStringLiteral {
    /// Creates a ``string(_:)`` value from a string literal.
    public init(stringLiteral value: String) { self = .string(value) }
}

extension RecordValue: ExpressibleByIntegerLiteral {
    /// Creates an ``int64(_:)`` value from an integer literal.
    public init(integerLiteral value: Int64) { self = .int64(value) }
}

extension RecordValue: ExpressibleByFloatLiteral {
    /// Creates a ``double(_:)`` value from a floating-point literal.
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension RecordValue: ExpressibleByBooleanLiteral {
    /// Creates a ``bool(_:)`` value from a boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}
