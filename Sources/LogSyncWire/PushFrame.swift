import SyncModel

/// A frame the server sends on a push channel: first `subscribed`, then hints.
public enum PushFrame: Sendable, Hashable, CustomStringConvertible {
    /// The channel is registered with the database: every later commit is hinted.
    case subscribed(protocolVersion: Int)
    /// A "database changed" hint.
    case hint(PushHint)

    /// A one-line rendering, such as `subscribed (protocol 1)`.
    public var description: String {
        switch self {
        case .subscribed(let version): "subscribed (protocol \(version))"
        case .hint(let hint): hint.description
        }
    }
}

extension Wire {
    /// Encodes a push frame.
    public static func encode(_ value: PushFrame, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_PushFrame()
        switch value {
        case .subscribed(let version):
            var subscribed = Logsync_Wire_Subscribed()
            subscribed.protocolVersion = Int64(version)
            message.subscribed = subscribed
        case .hint(let hint):
            var entry = Logsync_Wire_PushHint()
            entry.databaseScope = Int64(hint.databaseScope.rawValue)
            if let subscriptionID = hint.subscriptionID { entry.subscriptionID = subscriptionID.rawValue }
            if let zoneID = hint.zoneID { entry.zoneID = zoneID.proto }
            if let token = hint.changeToken { entry.changeToken = token.data }
            message.hint = entry
        }
        return format.encode(message)
    }

    /// Decodes a push frame.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong: no frame set, an unknown
    ///   scope, a token that is not a database token.
    public static func decode(
        _: PushFrame.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> PushFrame {
        try decodeMessage(bytes, format) { (message: Logsync_Wire_PushFrame) throws(SyncError) -> PushFrame in
            switch message.frame {
            case .subscribed(let subscribed)?:
                guard let version = Int(exactly: subscribed.protocolVersion) else {
                    throw SyncError(
                        .invalidArguments, "subscribed.protocol_version \(subscribed.protocolVersion) is out of range")
                }
                return .subscribed(protocolVersion: version)
            case .hint(let hint)?:
                return .hint(
                    try within("hint") { () throws(SyncError) in
                        guard let raw = Int(exactly: hint.databaseScope), let scope = DatabaseScope(rawValue: raw)
                        else {
                            throw SyncError(.invalidArguments, "database_scope \(hint.databaseScope) is not a scope")
                        }
                        return PushHint(
                            databaseScope: scope,
                            subscriptionID: hint.hasSubscriptionID
                                ? Subscription.ID(rawValue: hint.subscriptionID) : nil,
                            zoneID: hint.hasZoneID ? RecordZone.ID(proto: hint.zoneID) : nil,
                            changeToken: hint.hasChangeToken
                                ? try within("change_token") { () throws(SyncError) in
                                    try DatabaseChangeToken(data: hint.changeToken)
                                }
                                : nil)
                    })
            case nil:
                throw SyncError(.invalidArguments, "no frame is set")
            }
        }
    }
}
