import SyncModel

/// The HTTP protocol's version, its routes and its headers (Docs/Protocol.md, "HTTP").
///
/// Every operation is `POST /v1/databases/{scope}/{operation}` with the request message as its
/// body; the push channel is a WebSocket at `GET /v1/databases/{scope}/push`; asset contents
/// go up and down at `/v1/databases/{scope}/assets/{sha256}` (``assetPath(_:scope:)``). The scope is
/// `private`, `shared` or `public`; the user is never in the path, only in the bearer token.
public enum WireProtocol {
    /// The protocol version this build speaks, the `v1` of every path.
    public static let version = 1
    /// The first path component of every route.
    public static let versionPath = "v\(version)"

    /// `Authorization: Bearer <token>`.
    public static let authorizationHeader = "Authorization"
    /// The device making a request, so its own commits are not pushed back to it (F114).
    public static let deviceHeader = "LogSync-Device"
    /// On a push channel: `true` to be hinted of this device's own commits too.
    public static let receivesOwnChangesHeader = "LogSync-Receives-Own-Changes"
    /// Every response names the protocol version the server speaks.
    public static let versionHeader = "LogSync-Protocol"
    /// The header of an asset request that names its operation group (F69): the group's
    /// `logsync.model.OperationGroup` message in base64 (``Wire/encodeHeader(_:)``). The other
    /// requests carry their group in their body.
    public static let operationGroupHeader = "LogSync-Operation-Group"

    /// The path of an operation, such as `/v1/databases/private/modifyRecords`.
    public static func path(_ operation: WireOperation, scope: DatabaseScope) -> String {
        "/\(versionPath)/databases/\(scopeName(scope))/\(operation.rawValue)"
    }

    /// The path of a database's push channel, such as `/v1/databases/private/push`.
    public static func pushPath(scope: DatabaseScope) -> String {
        "/\(versionPath)/databases/\(scopeName(scope))/push"
    }

    /// A scope's name in paths.
    public static func scopeName(_ scope: DatabaseScope) -> String { scope.description }

    /// The scope a path names.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming the scopes there are.
    public static func scope(named name: String) throws(SyncError) -> DatabaseScope {
        guard let scope = DatabaseScope.allCases.first(where: { scopeName($0) == name }) else {
            throw SyncError(
                .invalidArguments,
                "there is no database scope \"\(name)\"; the scopes are \(DatabaseScope.allCases.map(scopeName).joined(separator: ", "))"
            )
        }
        return scope
    }
}

/// One operation of `CloudDatabase`, as the last component of its route.
public enum WireOperation: String, Sendable, CaseIterable, CustomStringConvertible {
    case modifyZones, fetchZones, modifyRecords, fetchDatabaseChanges, fetchZoneChanges
    case modifySubscriptions, allSubscriptions, currentUserRecordID
    /// The sharing operations (`ShareOperations`), CloudKit's container operations: the scope in
    /// their path does not matter.
    case fetchShareMetadata, acceptShares, fetchShareParticipants
    /// The key directory of encrypted fields (`ZoneKeyDirectory`, F129): a device's key is its
    /// user's (any scope registers it); zone keys are reached as zones are, through the private
    /// database for the user's own zones and the shared database for zones shared with them.
    case registerDeviceKey, fetchZoneKeys, saveZoneKeys

    /// The operation's name, such as `modifyRecords`.
    public var description: String { rawValue }

    /// Whether the operation changes the database. A modifying request whose answer is lost may
    /// have been applied, which a client reports differently from a lost read.
    public var modifies: Bool {
        switch self {
        case .modifyZones, .modifyRecords, .modifySubscriptions, .acceptShares, .registerDeviceKey, .saveZoneKeys: true
        case .fetchZones, .fetchDatabaseChanges, .fetchZoneChanges, .allSubscriptions, .currentUserRecordID,
            .fetchShareMetadata, .fetchShareParticipants, .fetchZoneKeys:
            false
        }
    }

    /// The operation a route names.
    ///
    /// - Throws: `SyncError` `invalidArguments` listing the operations there are.
    public static func named(_ name: String) throws(SyncError) -> WireOperation {
        guard let operation = WireOperation(rawValue: name) else {
            throw SyncError(
                .invalidArguments,
                "there is no operation \"\(name)\"; the operations are \(allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        return operation
    }
}
