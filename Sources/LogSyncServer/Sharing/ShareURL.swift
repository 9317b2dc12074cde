import Foundation
import LogStore
import SyncModel

/// A share's URL: `logsync://share/<owner's user number>/<secret>`.
///
/// The secret is 128 random bits in hexadecimal, drawn when the owner first saves the share; the
/// owner's number says whose database holds it. A URL is all a participant needs to find a share,
/// and nothing else reaches one: a guessed secret finds nothing.
package struct ShareURL: Hashable, Sendable {
    package let owner: UInt64
    package let secret: String

    package static let scheme = "logsync"

    package init(owner: UInt64, secret: String) {
        self.owner = owner
        self.secret = secret
    }

    /// The parts of a share URL, or `nil` for a URL of another form.
    package init?(_ url: URL) {
        let text = url.absoluteString
        let prefix = "\(Self.scheme)://share/"
        guard text.hasPrefix(prefix) else { return nil }
        let parts = text.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let owner = UInt64(parts[0]), owner > 0, parts[0].first != "0",
            parts[1].count == 32, parts[1].allSatisfy({ $0.isHexDigit && !$0.isUppercase })
        else { return nil }
        self.owner = owner
        self.secret = String(parts[1])
    }

    package var url: URL { URL(string: "\(Self.scheme)://share/\(owner)/\(secret)")! }

    /// A new random secret: 128 bits from the system's generator, in lowercase hexadecimal.
    package static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let word = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - word.count) + word
        }.joined()
    }
}

/// What the `shares` table keeps of a share record: its URL secret and its root record's name
/// ("" for a zone-wide share).
struct ShareKeys: Hashable, IndexValue {
    var secret: String
    var root: String

    func write(to writer: inout ByteWriter) {
        writer.string(secret)
        writer.string(root)
    }
}

extension ShareKeys {
    static let what = "share keys"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        secret = try reader.string()
        root = try reader.string()
    }
}

/// Where the `shareURLs` table finds a share: its zone's key and its record name.
struct ShareLocation: Hashable, IndexValue {
    var zone: [UInt8]
    var share: String

    func write(to writer: inout ByteWriter) {
        writer.data(zone)
        writer.string(share)
    }
}

extension ShareLocation {
    static let what = "share location"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        zone = try reader.data()
        share = try reader.string()
    }
}

/// A zone shared with the participant whose shared database this is: the share record's name,
/// and the owner's log offset of the latest change of the zone this database has recorded.
struct SharedZoneState: Hashable, IndexValue {
    var share: String
    var ownerOffset: UInt64

    /// What a shared zone reports to a participant: a change feed and atomic commits; sharing
    /// it again is the owner's.
    static let capabilities: RecordZone.Capabilities = [.fetchChanges, .atomic]

    func write(to writer: inout ByteWriter) {
        writer.string(share)
        writer.u64(ownerOffset)
    }
}

extension SharedZoneState {
    static let what = "shared zone state"

    init(reading reader: inout ByteReader) throws(LogStoreError) {
        share = try reader.string()
        ownerOffset = try reader.u64()
    }
}
