import Foundation
import LogSyncServer
import LogSyncWire
import SyncModel

extension AdminOperations {
    /// A page of up to `limit` registered users after `after` with their databases' figures,
    /// the devices signed in and connected, and the page's totals (`ServerOverview`): what
    /// `GET /v1/admin/overview`, `logsync-server status` and the console show. Reads the
    /// registry's index, the sessions' index and, per user and scope, the log's end and the
    /// index's zone, share and asset tables; never the records.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a `limit` outside 1…200; storage errors.
    public func overview(
        after: UserID? = nil, limit: Int = ServerOverview.defaultUsersPerPage
    ) throws
        -> ServerOverview
    {
        guard (1...ServerOverview.maxUsersPerPage).contains(limit) else {
            throw SyncError(
                .invalidArguments, "limit must be from 1 to \(ServerOverview.maxUsersPerPage), not \(limit)")
        }
        let registered = try server.users(after: after, limit: limit)
        var totals = ServerOverview.Totals(pushChannels: server.pushListenerCount)
        var users: [ServerOverview.User] = []
        for entry in registered {
            let devices = try tokens.sessions?.sessions(of: entry.user).map(\.device.rawValue).sorted() ?? []
            var databases: [ServerOverview.Database] = []
            for scope in [DatabaseScope.private, .shared] {
                guard let summary = try server.databaseSummary(of: entry.user, scope: scope) else { continue }
                databases.append(Self.wire(summary))
            }
            let channels = server.pushListeners(of: entry.user).map { channel in
                ServerOverview.Channel(scope: WireProtocol.scopeName(channel.scope), device: channel.device?.rawValue)
            }
            totals.users += 1
            totals.sessions += devices.count
            // One environment file holds every scope of a user: counted once.
            totals.storeBytes += databases.first?.storeBytes ?? 0
            for database in databases {
                totals.entries += database.entries
                totals.zones += database.zones
                totals.shares += database.shares
                totals.assets += database.assets
                totals.assetBytes += database.assetBytes
            }
            users.append(
                ServerOverview.User(
                    user: entry.user.rawValue, email: entry.emailAddress, sessionDevices: devices,
                    channels: channels.sorted { ($0.scope, $0.device ?? "") < ($1.scope, $1.device ?? "") },
                    quota: server.quota(of: entry.user), databases: databases))
        }
        return ServerOverview(
            users: users, next: registered.count == limit ? registered.last?.user.rawValue : nil, totals: totals,
            generated: server.configuration.now())
    }

    static func wire(_ summary: DatabaseSummary) -> ServerOverview.Database {
        ServerOverview.Database(
            scope: WireProtocol.scopeName(summary.scope), entries: summary.lastOffset, lastCommit: summary.lastCommit,
            storeBytes: summary.environmentBytes, zones: summary.zones, shares: summary.shares, assets: summary.assets,
            assetBytes: summary.assetBytes, assetsCapped: summary.assetsCapped, usage: summary.usage)
    }
}
