import SyncModel

extension SyncEngine {
    /// Why the engine syncs: on its own schedule or because the app asked (F59).
    ///
    /// Mirrors `CKSyncEngine.SyncReason`; raw values match `CKSyncEngineSyncReason`.
    public enum SyncReason: Int, Sendable, Hashable, CaseIterable {
        /// The engine's scheduler started the sync (automatic sync, a push, a retry).
        case scheduled = 0
        /// The app called `sendChanges()` or `fetchChanges()`.
        case manual = 1
    }

    // MARK: Sending

    /// What one send attempt is for: why it runs and with which options (F60).
    ///
    /// Mirrors `CKSyncEngine.SendChangesContext`. The engine makes one per attempt and hands the
    /// same value to `willSendChanges`, `nextRecordZoneChangeBatch` and `didSendChanges`.
    public struct SendChangesContext: Sendable, Hashable, CustomStringConvertible {
        /// Why the send runs.
        public let reason: SyncReason
        /// The options of the send, copied when it started (F71).
        public let options: SendChangesOptions

        /// Creates a context; only the engine does.
        package init(reason: SyncReason, options: SendChangesOptions) {
            self.reason = reason
            self.options = options
        }

        /// A one-line rendering, such as `SendChangesContext(manual, scope zoneIDs [zone "Notes"])`.
        public var description: String { "SendChangesContext(\(reason), \(options.fields))" }
    }

    /// The options of a send (F62): which pending changes it covers, and the operation group its
    /// requests belong to (F69).
    ///
    /// Mirrors `CKSyncEngine.SendChangesOptions`.
    /// A value: changing it after `sendChanges(_:)` was called does not change that send (F71).
    ///
    /// ```swift
    /// try await engine.sendChanges(SyncEngine.SendChangesOptions(scope: .zoneIDs([notesZoneID])))
    /// ```
    public struct SendChangesOptions: Sendable, Hashable, CustomStringConvertible {
        /// Which pending changes to send; ``Scope/all`` by default.
        public var scope: Scope
        /// The group every request of the send belongs to, for the server's telemetry (F69); with
        /// `nil` (the default) the engine makes one for the send (``SyncEngine`` documents it).
        public var operationGroup: OperationGroup?

        /// Creates options.
        ///
        /// - Parameters:
        ///   - scope: Which pending changes to send.
        ///   - operationGroup: The group of the send's requests, or `nil` for a default group.
        public init(scope: Scope = .all, operationGroup: OperationGroup? = nil) {
            self.scope = scope
            self.operationGroup = operationGroup
        }

        /// A one-line rendering, such as `SendChangesOptions(scope all)`.
        public var description: String { "SendChangesOptions(\(fields))" }

        /// The options in one line, without the type name; contexts show them too.
        var fields: String {
            guard let operationGroup else { return "scope \(scope)" }
            return "scope \(scope), \(operationGroup)"
        }

        /// Which pending record changes a send covers (F63, F68).
        ///
        /// Mirrors `CKSyncEngine.SendChangesOptions.Scope`. The engine does not filter the
        /// batches itself: the delegate builds them from the pending changes the scope contains
        /// (F13); changes outside it stay pending.
        public enum Scope: Sendable, Hashable, CustomStringConvertible {
            /// Every pending change.
            case all
            /// The changes to records in these zones.
            case zoneIDs([RecordZone.ID])
            /// The changes to records in every zone but these.
            case allExcluding([RecordZone.ID])
            /// The changes to these records.
            case recordIDs([Record.ID])

            /// Whether the scope covers changes to the record with this ID.
            ///
            /// - Complexity: O(n) in the IDs listed in the scope.
            public func contains(_ recordID: Record.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(recordID.zoneID)
                case .allExcluding(let zoneIDs): !zoneIDs.contains(recordID.zoneID)
                case .recordIDs(let recordIDs): recordIDs.contains(recordID)
                }
            }

            /// Whether the scope covers this pending change: whether it covers its record.
            ///
            /// - Complexity: O(n) in the IDs listed in the scope.
            public func contains(_ pendingChange: PendingRecordZoneChange) -> Bool {
                contains(pendingChange.recordID)
            }

            /// Whether the scope covers some records of the zone with this ID.
            ///
            /// For ``recordIDs(_:)``, whether one of the records listed is in the zone (spec
            /// choice: CKSyncEngine's send scope has no zone test).
            ///
            /// - Complexity: O(n) in the IDs listed in the scope.
            public func contains(_ zoneID: RecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                case .allExcluding(let zoneIDs): !zoneIDs.contains(zoneID)
                case .recordIDs(let recordIDs): recordIDs.contains { $0.zoneID == zoneID }
                }
            }

            /// The case name and its IDs, such as `zoneIDs [zone "Notes"]`.
            public var description: String {
                switch self {
                case .all: "all"
                case .zoneIDs(let ids): "zoneIDs \(describeItems(ids))"
                case .allExcluding(let ids): "allExcluding \(describeItems(ids))"
                case .recordIDs(let ids): "recordIDs \(describeItems(ids))"
                }
            }
        }
    }

    // MARK: Fetching

    /// What one fetch attempt is for: why it runs and with which options (F61).
    ///
    /// Mirrors `CKSyncEngine.FetchChangesContext`. The engine makes one per attempt and hands the
    /// same value to `willFetchChanges`, `nextFetchChangesOptions` and `didFetchChanges`.
    public struct FetchChangesContext: Sendable, Hashable, CustomStringConvertible {
        /// Why the fetch runs.
        public let reason: SyncReason
        /// The options of the fetch, copied when it started (F71).
        public let options: FetchChangesOptions

        /// Creates a context; only the engine does.
        package init(reason: SyncReason, options: FetchChangesOptions) {
            self.reason = reason
            self.options = options
        }

        /// A one-line rendering, such as `FetchChangesContext(scheduled, scope all)`.
        public var description: String { "FetchChangesContext(\(reason), \(options.fields))" }
    }

    /// The options of a fetch (F64): which zones' record changes it fetches, in which order, and
    /// how each zone is fetched (F72).
    ///
    /// Mirrors `CKSyncEngine.FetchChangesOptions`, with the per-zone configurations CKSyncEngine
    /// keeps private (F72) made public.
    /// A value: changing it after `fetchChanges(_:)` was called does not change that fetch (F71).
    ///
    /// ```swift
    /// var options = SyncEngine.FetchChangesOptions()
    /// options.prioritizedZoneIDs = [inboxZoneID]       // fetched first, if it has changes
    /// options.zoneConfigurations[photosZoneID] = .init(shouldFetchAssetContents: false)
    /// try await engine.fetchChanges(options)
    /// ```
    public struct FetchChangesOptions: Sendable, Hashable, CustomStringConvertible {
        /// Which zones' record changes to fetch; ``Scope/all`` by default (F67). The database
        /// changes are always fetched.
        public var scope: Scope
        /// Zones to fetch first, in this order; `[]` by default (F66). Zones without changes
        /// and zones outside ``scope`` are ignored.
        public var prioritizedZoneIDs: [RecordZone.ID]
        /// How a zone without an entry in ``zoneConfigurations`` is fetched: asset contents
        /// downloaded, the engine's page size (F72).
        public var defaultZoneConfiguration: ZoneConfiguration
        /// How particular zones are fetched, overriding ``defaultZoneConfiguration``; `[:]` by
        /// default (F72).
        public var zoneConfigurations: [RecordZone.ID: ZoneConfiguration]
        /// The group every request of the fetch belongs to, for the server's telemetry (F69); with
        /// `nil` (the default) the engine makes one for the fetch. Read when the fetch starts: a
        /// group the delegate's `nextFetchChangesOptions` returns later is not used.
        public var operationGroup: OperationGroup?

        /// Creates options.
        ///
        /// - Parameters:
        ///   - scope: Which zones' record changes to fetch.
        ///   - prioritizedZoneIDs: Zones to fetch first, in this order.
        ///   - defaultZoneConfiguration: How zones without a configuration of their own are fetched.
        ///   - zoneConfigurations: How particular zones are fetched.
        ///   - operationGroup: The group of the fetch's requests, or `nil` for a default group.
        public init(
            scope: Scope = .all, prioritizedZoneIDs: [RecordZone.ID] = [],
            defaultZoneConfiguration: ZoneConfiguration = ZoneConfiguration(),
            zoneConfigurations: [RecordZone.ID: ZoneConfiguration] = [:], operationGroup: OperationGroup? = nil
        ) {
            self.operationGroup = operationGroup
            self.scope = scope
            self.prioritizedZoneIDs = prioritizedZoneIDs
            self.defaultZoneConfiguration = defaultZoneConfiguration
            self.zoneConfigurations = zoneConfigurations
        }

        /// The configuration the zone `zoneID` is fetched with: its own, else the default.
        public func zoneConfiguration(for zoneID: RecordZone.ID) -> ZoneConfiguration {
            zoneConfigurations[zoneID] ?? defaultZoneConfiguration
        }

        /// A one-line rendering, such as `FetchChangesOptions(scope all, prioritized [zone "Inbox"])`.
        public var description: String { "FetchChangesOptions(\(fields))" }

        /// The options in one line, without the type name; contexts show them too. Zone
        /// configurations appear only when some differ from the defaults.
        var fields: String {
            var parts = ["scope \(scope)"]
            if !prioritizedZoneIDs.isEmpty { parts.append("prioritized \(describeItems(prioritizedZoneIDs))") }
            if defaultZoneConfiguration != ZoneConfiguration() { parts.append("default \(defaultZoneConfiguration)") }
            if !zoneConfigurations.isEmpty {
                let zones = zoneConfigurations.sorted { $0.key.description < $1.key.description }.map {
                    "\($0.key): \($0.value)"
                }
                parts.append("zones \(describeItems(zones))")
            }
            if let operationGroup { parts.append(operationGroup.description) }
            return parts.joined(separator: ", ")
        }

        /// How one zone's record changes are fetched (F72).
        ///
        /// Mirrors CKSyncEngine's private `CKSyncEngineFetchChangesZoneConfiguration`
        /// (`shouldFetchAssetContents`, `resultsLimit`); `desiredKeys` is not offered.
        ///
        /// ```swift
        /// options.zoneConfigurations[photos] = .init(shouldFetchAssetContents: false, resultsLimit: 50)
        /// ```
        public struct ZoneConfiguration: Sendable, Hashable, CustomStringConvertible {
            /// Whether the engine downloads the content of each fetched asset into its asset
            /// cache before delivering the records (`true`, the default), so that every fetched
            /// `Asset` has a `fileURL`; with `false` fetched assets carry their digest and size
            /// only, and ``SyncEngine/fetchAssetContents(_:in:)`` downloads one when wanted.
            public var shouldFetchAssetContents: Bool
            /// The most record changes to ask for per request of this zone, or `nil` for the
            /// engine's ``SyncEngine/Configuration/fetchResultsLimit`` (itself `nil` for the
            /// server's page size).
            public var resultsLimit: Int?

            /// Creates a configuration.
            ///
            /// - Parameters:
            ///   - shouldFetchAssetContents: Whether asset contents are downloaded with the records.
            ///   - resultsLimit: The most record changes per request, or `nil` for the engine's.
            public init(shouldFetchAssetContents: Bool = true, resultsLimit: Int? = nil) {
                self.shouldFetchAssetContents = shouldFetchAssetContents
                self.resultsLimit = resultsLimit
            }

            /// A one-line rendering, such as `ZoneConfiguration(no asset contents, resultsLimit 10)`.
            public var description: String {
                var parts = [shouldFetchAssetContents ? "asset contents" : "no asset contents"]
                if let resultsLimit { parts.append("resultsLimit \(resultsLimit)") }
                return "ZoneConfiguration(\(parts.joined(separator: ", ")))"
            }
        }

        /// Which zones a fetch covers (F65, F67).
        ///
        /// Mirrors `CKSyncEngine.FetchChangesOptions.Scope`. Zones outside the scope with
        /// changes on the server stay in ``State/zoneIDsWithUnfetchedServerChanges``.
        public enum Scope: Sendable, Hashable, CustomStringConvertible {
            /// Every zone.
            case all
            /// These zones.
            case zoneIDs([RecordZone.ID])
            /// Every zone but these.
            case allExcluding([RecordZone.ID])

            /// Whether the scope covers the zone with this ID.
            ///
            /// - Complexity: O(n) in the IDs listed in the scope.
            public func contains(_ zoneID: RecordZone.ID) -> Bool {
                switch self {
                case .all: true
                case .zoneIDs(let zoneIDs): zoneIDs.contains(zoneID)
                case .allExcluding(let zoneIDs): !zoneIDs.contains(zoneID)
                }
            }

            /// The case name and its IDs, such as `allExcluding [zone "Photos"]`.
            public var description: String {
                switch self {
                case .all: "all"
                case .zoneIDs(let ids): "zoneIDs \(describeItems(ids))"
                case .allExcluding(let ids): "allExcluding \(describeItems(ids))"
                }
            }
        }
    }
}
