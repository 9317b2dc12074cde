/// A record zone: a named area of a database that groups records and has its own change feed.
///
/// Mirrors `CKRecordZone` (F128). Custom zones exist only in the private database, and a record
/// cannot be saved into a zone before the zone itself has been saved. The server sets
/// ``capabilities`` and ``share``; a zone built on the device carries neither until the server
/// returns it.
///
/// ```swift
/// let zone = RecordZone(zoneName: "Notes")
/// let response = try await database.modifyZones(saving: [zone], deleting: [])
/// ```
public struct RecordZone: Sendable, Hashable, Codable, CustomStringConvertible {
    /// What a zone supports, as an option set whose raw values match `CKRecordZone.Capabilities`.
    public struct Capabilities: OptionSet, Sendable, Hashable, Codable {
        /// The bits of the set, as in `CKRecordZone.Capabilities`.
        public let rawValue: UInt64
        /// Creates a set from its bits.
        public init(rawValue: UInt64) { self.rawValue = rawValue }

        /// The zone keeps a change feed that can be fetched with a zone change token (raw value 1).
        public static let fetchChanges = Capabilities(rawValue: 1)
        /// Changes to the zone in one request can be committed all-or-nothing (raw value 2).
        public static let atomic = Capabilities(rawValue: 2)
        /// Record hierarchies in the zone can be shared: a ``Share`` of a root record and the
        /// records reaching it through `parent` (raw value 4, F123). Check it before sharing a
        /// record, as CloudKit asks.
        public static let sharing = Capabilities(rawValue: 4)
        /// The whole zone can be shared with one zone-wide ``Share`` (raw value 8, F123).
        public static let zoneWideSharing = Capabilities(rawValue: 8)

        /// What a custom zone in the private database reports: fetchChanges, atomic, sharing and
        /// zoneWideSharing (F128), as a new custom zone does in CloudKit. The default zone
        /// reports none, and cannot be shared.
        public static let customZoneDefault: Capabilities = [.fetchChanges, .atomic, .sharing, .zoneWideSharing]
    }

    /// The zone's identity.
    public var zoneID: ID
    /// What the zone supports, as reported by the server; empty until the server returns the zone.
    public package(set) var capabilities: Capabilities
    /// The share record that shares this whole zone, if the zone is shared (F128).
    public package(set) var share: Record.Reference?

    /// Creates a zone, owned by the current user, to be saved to the server.
    ///
    /// - Parameter zoneName: The zone's name; see ``RecordZone/ID/validate()`` for the rules.
    public init(zoneName: String) {
        self.init(zoneID: ID(zoneName: zoneName))
    }

    /// Creates a zone with the given ID, to be saved to the server.
    ///
    /// - Parameter zoneID: The zone's identity.
    public init(zoneID: ID) {
        self.zoneID = zoneID
        self.capabilities = []
        self.share = nil
    }

    /// Creates a zone as the server reports it, with capabilities and an optional share.
    package init(zoneID: ID, capabilities: Capabilities, share: Record.Reference? = nil) {
        self.zoneID = zoneID
        self.capabilities = capabilities
        self.share = share
    }

    /// A one-line rendering, for example `RecordZone(zone "Notes", capabilities: 0xf)`.
    public var description: String {
        "RecordZone(\(zoneID), capabilities: 0x\(String(capabilities.rawValue, radix: 16)))"
    }
}
