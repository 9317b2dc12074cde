import Crypto
import Foundation

/// The SHA-256 of an asset's bytes: the name under which a server keeps its content, so the
/// same file saved twice is stored once (content addressing).
///
/// Written `sha256:<64 lowercase hex digits>`.
public struct AssetDigest: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The 32 bytes of the SHA-256.
    public let bytes: [UInt8]

    /// A digest from its 32 bytes.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` when `bytes` is not 32 bytes long.
    public init(bytes: [UInt8]) throws(SyncError) {
        guard bytes.count == 32 else {
            throw SyncError(.invalidArguments, "an asset digest is 32 bytes of SHA-256, not \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// Parses `sha256:<64 hex digits>` or the 64 hex digits alone.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` quoting the text.
    public init(parsing text: String) throws(SyncError) {
        let hex = text.hasPrefix("sha256:") ? String(text.dropFirst(7)) : text
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        let digits = Array(hex.utf8)
        guard digits.count == 64 else {
            throw SyncError(.invalidArguments, "\(quoted(text)) is not an asset digest (sha256: and 64 hex digits)")
        }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        for index in stride(from: 0, to: 64, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else {
                throw SyncError(.invalidArguments, "\(quoted(text)) is not an asset digest (sha256: and 64 hex digits)")
            }
            bytes.append(high << 4 | low)
        }
        self.bytes = bytes
    }

    /// The 64 lowercase hex digits.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `sha256:` and the hex digits.
    public var description: String { "sha256:" + hex }

    /// The first 12 hex digits, for messages and dumps (`sha256:1f2e3d4c5b6a…`).
    public var short: String { "sha256:" + hex.prefix(12) + "…" }

    public static func < (lhs: AssetDigest, rhs: AssetDigest) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        self = try AssetDigest(parsing: text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Computes an ``AssetDigest`` over bytes given in pieces, as they stream.
public struct AssetHasher: Sendable {
    private var hasher = SHA256()
    /// How many bytes were given.
    public private(set) var count: Int64 = 0

    public init() {}

    /// Adds the next bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bufferPointer: bytes)
        count += Int64(bytes.count)
    }

    /// Adds the next bytes.
    public mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of every byte given.
    public func finalize() -> AssetDigest {
        // SHA-256 is always 32 bytes.
        try! AssetDigest(bytes: Array(hasher.finalize()))
    }

    /// The digest of `bytes`.
    public static func digest(of bytes: some ContiguousBytes) -> AssetDigest {
        var hasher = AssetHasher()
        hasher.update(bytes)
        return hasher.finalize()
    }
}

/// A file stored apart from the record that holds it (CloudKit's `CKAsset`): its content is not
/// part of the record's 1 MB (F134) nor of a request's 2 MB (F151); each asset may hold up to
/// ``Limits/maxAssetBytes``.
///
/// An app makes one from a local file and saves the record; the engine reads the file, uploads
/// it (once per content and zone: the server keeps it under its SHA-256) and sends the record with the
/// asset's ``digest`` and ``size``. A fetched record's asset has its ``digest`` and ``size``, and
/// its ``fileURL`` is a copy in the engine's asset cache, or `nil` when the fetch skipped asset
/// contents (`shouldFetchAssetContents`).
///
/// ```swift
/// note["photo"] = .asset(Asset(fileURL: photoURL))
/// note["pages"] = .list([.asset(Asset(fileURL: page1)), .asset(Asset(fileURL: page2))])
/// ```
public struct Asset: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The local file with the asset's content: the file to upload, or the cached copy of a
    /// fetched asset; `nil` when the content is not on this device. Never sent to the server.
    public var fileURL: URL?
    /// The SHA-256 of the content, once known (after upload, or on a fetched record).
    public var digest: AssetDigest?
    /// The content's size in bytes, once known.
    public var size: Int64?

    /// An asset whose content is the file at `fileURL`, read when the record is sent.
    public init(fileURL: URL) {
        self.fileURL = fileURL
    }

    /// An asset known by its content's digest and size, with a local copy or none.
    public init(digest: AssetDigest, size: Int64, fileURL: URL? = nil) {
        self.digest = digest
        self.size = size
        self.fileURL = fileURL
    }

    /// The asset without its local file: what a server keeps and sends.
    public var withoutFile: Asset {
        var copy = self
        copy.fileURL = nil
        return copy
    }

    /// `asset sha256:1f2e…(12 bytes)` or `asset file:///…` before upload.
    public var description: String {
        var parts: [String] = []
        if let digest { parts.append(digest.short) }
        if let size { parts.append("\(size) bytes") }
        if let fileURL { parts.append(fileURL.path) }
        return "asset " + parts.joined(separator: " ")
    }
}

extension Record {
    /// Every asset of the record's fields, lists included, with its field key, in key order.
    public var assets: [(key: String, asset: Asset)] {
        var found: [(String, Asset)] = []
        for key in allKeys() {
            switch self[key] {
            case .asset(let asset)?: found.append((key, asset))
            case .list(let values)?:
                for case .asset(let asset) in values { found.append((key, asset)) }
            default: break
            }
        }
        return found
    }

    /// Whether any field holds an asset.
    public var hasAssets: Bool {
        for value in fields.values {
            switch value {
            case .asset: return true
            case .list(let values):
                if values.contains(where: { if case .asset = $0 { true } else { false } }) { return true }
            default: continue
            }
        }
        return false
    }

    /// The record with every asset without its local file: what a request carries and a server
    /// keeps (``Asset/fileURL`` is the device's business).
    public var withoutAssetFiles: Record {
        mappingAssets { _, asset in asset.withoutFile }
    }

    /// The record with every asset field changed by `transform` (lists included); keys whose
    /// values do not change keep their changed-or-not state.
    public func mappingAssets(_ transform: (String, Asset) throws -> Asset) rethrows -> Record {
        guard hasAssets else { return self }
        var copy = self
        for key in allKeys() {
            switch self[key] {
            case .asset(let asset)?:
                let new = try transform(key, asset)
                if new != asset { copy.setValueKeepingChangeState(.asset(new), forKey: key) }
            case .list(let values)?:
                var changed = false
                let mapped = try values.map { value -> RecordValue in
                    guard case .asset(let asset) = value else { return value }
                    let new = try transform(key, asset)
                    if new != asset { changed = true }
                    return .asset(new)
                }
                if changed { copy.setValueKeepingChangeState(.list(mapped), forKey: key) }
            default: break
            }
        }
        return copy
    }
}
