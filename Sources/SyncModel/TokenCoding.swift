import Foundation

/// The binary layout shared by ``DatabaseChangeToken`` and ``ZoneChangeToken``.
///
/// ```
/// bytes  field
/// 2      magic "LT" (0x4C 0x54)
/// 1      format version, 2 or 3
/// 1      kind: 1 database token, 2 zone token
/// 8      the issuing database's identity, big-endian (the server's choice; 0 = unspecified)
/// 8      log offset, big-endian
/// -- zone tokens only --
/// 8      zone incarnation, big-endian
/// 8      version 3 only: the listing start, big-endian (see ZoneChangeToken.listingStart)
/// 2+n    zone name: length n (big-endian UInt16), then n bytes of UTF-8
/// 2+m    owner name: length m (big-endian UInt16), then m bytes of UTF-8
/// -- all tokens --
/// 4      CRC-32C (Castagnoli, as in log entries) of every byte before it, big-endian
/// ```
///
/// Version 1 had no database identity; it was never released and is not read. From version 2 the
/// layout is stable: a token written by one version is read by every later one. Version 3 adds
/// the listing start to zone tokens; a writer uses it only for a token that has one, so every
/// other token keeps its version-2 bytes. A reader checks length, magic, version and checksum
/// before it looks at the kind, so garbage is reported as garbage and never as a token of the
/// other kind.
enum TokenCoding {
    static let magic: [UInt8] = [0x4C, 0x54]
    /// The version written for a token without version-3 fields.
    static let version: UInt8 = 2
    /// The version of a zone token with a listing start.
    static let listingVersion: UInt8 = 3
    /// The versions read.
    static let versions: ClosedRange<UInt8> = 2...3

    /// The two kinds of token.
    enum Kind: UInt8 {
        case database = 1
        case zone = 2

        var name: String {
            switch self {
            case .database: "database token"
            case .zone: "zone token"
            }
        }
    }

    /// Header bytes (magic, version, kind) plus the offset.
    static let headerSize = 4 + 8 + 8
    /// The checksum's size.
    static let checksumSize = 4

    /// Writes a token: header, offset, kind-specific body, checksum.
    static func encode(
        kind: Kind, version: UInt8 = version, database: UInt64, offset: UInt64, body: (inout Writer) -> Void = { _ in }
    ) -> Data {
        var writer = Writer()
        writer.bytes.append(contentsOf: magic)
        writer.bytes.append(version)
        writer.bytes.append(kind.rawValue)
        writer.append(database)
        writer.append(offset)
        body(&writer)
        writer.append(TokenChecksum.crc32c(writer.bytes))
        return Data(writer.bytes)
    }

    /// Reads a token of the expected kind, checking everything, and returns its format version,
    /// its offset and a reader positioned at its kind-specific body.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the problem.
    static func decode(
        _ data: Data, expecting expected: Kind
    ) throws(SyncError) -> (version: UInt8, database: UInt64, offset: UInt64, body: Reader) {
        let bytes = [UInt8](data)
        func invalid(_ problem: String) -> SyncError {
            SyncError(.invalidArguments, "invalid \(expected.name): \(problem)")
        }
        guard bytes.count >= headerSize + checksumSize else {
            throw invalid("\(bytes.count) bytes is too short to be a change token")
        }
        guard Array(bytes[0..<2]) == magic else {
            throw invalid("not a LogSync change token (bad magic)")
        }
        guard versions.contains(bytes[2]) else {
            throw invalid(
                "change token format version \(bytes[2]) is not supported (expected \(versions.lowerBound) to \(versions.upperBound))"
            )
        }
        let payloadEnd = bytes.count - checksumSize
        var checksumReader = Reader(bytes: bytes, position: payloadEnd)
        let stored = try checksumReader.readUInt32(or: invalid("truncated"))
        guard stored == TokenChecksum.crc32c(Array(bytes[0..<payloadEnd])) else {
            throw invalid("checksum mismatch (the token is corrupted)")
        }
        guard let kind = Kind(rawValue: bytes[3]) else {
            throw invalid("unknown token kind \(bytes[3])")
        }
        guard kind == expected else {
            throw invalid("this is a \(kind.name), not a \(expected.name)")
        }
        var reader = Reader(bytes: Array(bytes[0..<payloadEnd]), position: 4)
        let database = try reader.readUInt64(or: invalid("truncated"))
        let offset = try reader.readUInt64(or: invalid("truncated"))
        return (bytes[2], database, offset, reader)
    }

    /// Appends big-endian integers and length-prefixed strings.
    struct Writer {
        var bytes: [UInt8] = []

        mutating func append(_ value: UInt64) {
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
            }
        }

        mutating func append(_ value: UInt32) {
            for shift in stride(from: 24, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
            }
        }

        /// Appends a string's UTF-8 bytes after a 2-byte length; strings longer than 65,535
        /// bytes are not representable (names are limited to 255).
        mutating func append(_ text: String) {
            let utf8 = Array(text.utf8.prefix(Int(UInt16.max)))
            bytes.append(UInt8(utf8.count >> 8))
            bytes.append(UInt8(utf8.count & 0xFF))
            bytes.append(contentsOf: utf8)
        }
    }

    /// Reads big-endian integers and length-prefixed strings, throwing a given error at the end.
    struct Reader {
        let bytes: [UInt8]
        var position: Int

        var isAtEnd: Bool { position == bytes.count }
        var remaining: Int { bytes.count - position }

        mutating func readUInt64(or error: @autoclosure () -> SyncError) throws(SyncError) -> UInt64 {
            try readBigEndian(UInt64.self, or: error())
        }

        mutating func readUInt32(or error: @autoclosure () -> SyncError) throws(SyncError) -> UInt32 {
            try readBigEndian(UInt32.self, or: error())
        }

        private mutating func readBigEndian<T: FixedWidthInteger>(
            _: T.Type, or error: @autoclosure () -> SyncError
        ) throws(SyncError) -> T {
            let size = T.bitWidth / 8
            guard remaining >= size else { throw error() }
            var value: T = 0
            for byte in bytes[position..<position + size] { value = value << 8 | T(byte) }
            position += size
            return value
        }

        mutating func readString(or error: @autoclosure () -> SyncError) throws(SyncError) -> String {
            guard remaining >= 2 else { throw error() }
            let length = Int(bytes[position]) << 8 | Int(bytes[position + 1])
            position += 2
            guard remaining >= length else { throw error() }
            let slice = bytes[position..<position + length]
            position += length
            guard let text = String(validating: slice, as: UTF8.self) else { throw error() }
            return text
        }
    }
}

/// What ``ZoneChangeToken`` and ``DatabaseChangeToken`` share: a stable binary form, which is
/// also their `Codable` form, so a token kept in JSON or a property list reads back the same.
public protocol ChangeToken: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Reads a token from its stable binary form.
    init(data: Data) throws(SyncError)
    /// The token's stable binary form.
    var data: Data { get }
}

extension ChangeToken {
    /// Decodes a token from its binary form.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let data = try container.decode(Data.self)
        do throws(SyncError) {
            self = try Self(data: data)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.message)
        }
    }

    /// Encodes the token as its binary form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data)
    }
}
