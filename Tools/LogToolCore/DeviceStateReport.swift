import Foundation
import LogStore
import LogSync
import LogSyncTesting

/// What `logtool replay` prints: a device log's engine state after one offset
/// (`DeviceLog.state(at:)`), in plain aligned text.
///
/// IDs are written as in `dump`'s lists: a zone by its name (`Notes`, or `Notes@_bob` when its
/// owner is not the current user), a record as `zone/name` (`Notes/n1`).
public enum DeviceStateReport {
    /// The lines, each ending in a line break.
    public static func text(_ state: DeviceState) -> String {
        var lines: [(String, String)] = []
        func list(_ label: String, _ items: [String]) {
            if items.isEmpty {
                lines.append((label, "none"))
            } else {
                lines.append((label, "\(items.count)"))
                for (index, item) in items.enumerated() { lines.append(("", "\(index + 1). \(item)")) }
            }
        }
        lines.append(("state at offset", String(state.offset.rawValue)))
        list("pending record changes", state.pendingRecordZoneChanges.map(change))
        list("pending database changes", state.pendingDatabaseChanges.map(change))
        list("in-flight record changes", state.inFlightRecordZoneChanges.map(change))
        lines.append(("untracked changes", state.hasPendingUntrackedChanges ? "yes" : "no"))
        lines.append(("unfetched zones", ids(state.zoneIDsWithUnfetchedServerChanges)))
        lines.append(("known zones", ids(state.knownZoneIDs)))
        lines.append(("database token", state.databaseChangeToken.map { "present, offset \($0.offset)" } ?? "none"))
        lines.append(("delivered through", state.deliveredOffset.map { String($0.rawValue) } ?? "none"))
        lines.append(("account", account(state.account)))
        lines.append(("subscription", state.subscriptionID?.rawValue ?? "none"))
        let width = lines.map(\.0.count).max()! + 1
        return lines.map { label, value in
            rightPadded(label.isEmpty ? "" : label + ":", width: width) + "  " + value + "\n"
        }.joined()
    }

    /// `save Notes/n1`, `delete Notes/n2`.
    public static func change(_ change: SyncEngine.PendingRecordZoneChange) -> String {
        switch change {
        case .saveRecord(let id): "save " + record(id)
        case .deleteRecord(let id): "delete " + record(id)
        }
    }

    /// `save Notes`, `delete Trash`.
    public static func change(_ change: SyncEngine.PendingDatabaseChange) -> String {
        switch change {
        case .saveZone(let zone): "save " + self.zone(zone.zoneID)
        case .deleteZone(let id): "delete " + zone(id)
        }
    }

    /// `Notes`, or `Notes@owner` when the owner is not the current user.
    public static func zone(_ id: RecordZone.ID) -> String {
        id.ownerName == RecordZone.ID.defaultOwnerName ? id.zoneName : id.zoneName + "@" + id.ownerName
    }

    /// `Notes/n1`.
    public static func record(_ id: Record.ID) -> String { zone(id.zoneID) + "/" + id.recordName }

    static func ids(_ zones: [RecordZone.ID]) -> String {
        zones.isEmpty ? "none" : "\(zones.count): " + zones.map(zone).joined(separator: ", ")
    }

    static func account(_ account: DeviceState.Account) -> String {
        switch account {
        case .never: "never checked"
        case .signedOut: "signed out"
        case .user(let id): "user \(id.recordName)"
        }
    }
}
