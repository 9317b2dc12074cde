import Foundation

/// The server's key directory for end-to-end encrypted fields (F129): devices' public keys, and
/// zone keys wrapped for them. The server never sees a zone key or a private key; see
/// `Docs/Encryption.md`.
///
/// Both the in-process database and the HTTP one conform. The engine uses it when a record has
/// ``Record/encryptedValues``: it registers its device's key, fetches the wraps addressed to it,
/// makes a zone's first key, and wraps the keys it holds for the zone's other recipients (the
/// user's other devices, and the devices of the zone's accepted share participants).
///
/// ```swift
/// try await directory.registerDeviceKey(pair.publicKey)
/// let keys = try await directory.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [notes]))
/// ```
public protocol ZoneKeyDirectory: Sendable {
    /// Registers a device's public key for the signed-in user; registering it again changes
    /// nothing.
    ///
    /// - Throws: ``SyncError``: `invalidArguments` for a malformed key, `limitExceeded` past
    ///   ``Limits/maxDeviceKeysPerUser``, or a failure of the whole request.
    func registerDeviceKey(_ key: DevicePublicKey) async throws

    /// Fetches, for each zone, every wrap of its keys and the devices that should hold them.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request; a zone the user cannot read
    ///   is a `zoneNotFound` result of its own.
    func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse

    /// Saves wraps of zone keys, each for one of the zone's recipients, with a result per wrap.
    ///
    /// - Throws: ``SyncError`` for a failure of the whole request; per-wrap failures are in the
    ///   response: `zoneNotFound`, `permissionFailure` (a read-only participant),
    ///   `invalidArguments` (a recipient the zone does not have, a malformed wrap) and
    ///   `serverRecordChanged` (another key of the same version came first).
    func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse
}

/// A request for zones' wrapped keys and recipients.
public struct FetchZoneKeysRequest: Sendable, Hashable, Codable {
    /// The zones, at most 400; `nil`: every zone of the database that has a wrapped key.
    public var zoneIDs: [RecordZone.ID]?

    public init(zoneIDs: [RecordZone.ID]?) {
        self.zoneIDs = zoneIDs
    }

    /// Checks the number of zones and their IDs.
    ///
    /// - Throws: ``SyncError`` `limitExceeded` past 400 zones, `invalidArguments` for a bad zone ID.
    public func validate() throws(SyncError) {
        guard let zoneIDs else { return }
        guard zoneIDs.count <= Limits.maxItemsPerRequest else {
            throw SyncError(
                .limitExceeded, "the request names \(zoneIDs.count) zones, more than \(Limits.maxItemsPerRequest)")
        }
        for zoneID in zoneIDs { try zoneID.validate() }
    }
}

/// A zone's keys as the server keeps them.
public struct ZoneKeys: Sendable, Hashable, Codable {
    /// Every wrap of every version of the zone's key.
    public var wrappedKeys: [WrappedZoneKey]
    /// The devices that should hold the zone's key: the owner's and every accepted participant's
    /// registered devices, with their users.
    public var recipients: [DevicePublicKey]

    public init(wrappedKeys: [WrappedZoneKey] = [], recipients: [DevicePublicKey] = []) {
        self.wrappedKeys = wrappedKeys
        self.recipients = recipients
    }

    /// The latest version of the zone's key, or 0 when it has none.
    public var latestVersion: UInt32 { wrappedKeys.map(\.version).max() ?? 0 }
}

/// The keys of each zone of a ``FetchZoneKeysRequest``.
public struct FetchZoneKeysResponse: Sendable, Equatable {
    public var results: [RecordZone.ID: Result<ZoneKeys, SyncError>]

    public init(results: [RecordZone.ID: Result<ZoneKeys, SyncError>] = [:]) {
        self.results = results
    }
}

/// A request saving wraps of zone keys.
public struct SaveZoneKeysRequest: Sendable, Hashable, Codable {
    /// The wraps, at most 400, none twice.
    public var keys: [WrappedZoneKey]

    public init(keys: [WrappedZoneKey]) {
        self.keys = keys
    }

    /// Checks the number of wraps and that none appears twice (each wrap's shape is checked on
    /// its own, with a result of its own).
    ///
    /// - Throws: ``SyncError`` `limitExceeded` past 400 wraps, `invalidArguments` for a wrap named twice.
    public func validate() throws(SyncError) {
        guard keys.count <= Limits.maxItemsPerRequest else {
            throw SyncError(
                .limitExceeded, "the request saves \(keys.count) wrapped keys, more than \(Limits.maxItemsPerRequest)")
        }
        var seen = Set<WrappedZoneKey.ID>()
        for key in keys where !seen.insert(key.id).inserted {
            throw SyncError(.invalidArguments, "the request names \(key.id) twice")
        }
    }
}

/// The outcome of each wrap of a ``SaveZoneKeysRequest``.
public struct SaveZoneKeysResponse: Sendable, Equatable {
    public var results: [WrappedZoneKey.ID: Result<WrappedZoneKey, SyncError>]

    public init(results: [WrappedZoneKey.ID: Result<WrappedZoneKey, SyncError>] = [:]) {
        self.results = results
    }
}
