import Foundation
import LogStore
import SyncModel

// What a database's index says of sharing (Docs/Protocol.md, "Sharing"): an owner's shares and
// who they let do what, a participant's shared zones.

extension DatabaseSnapshot {
    /// Every zone shared with this (shared) database's user, with what the index keeps of it.
    func sharedZones() throws -> [(RecordZone.ID, SharedZoneState)] {
        var zones: [(RecordZone.ID, SharedZoneState)] = []
        try index.forEach(in: "sharedZones") { key, value in
            zones.append((IndexKey.zoneID(from: Array(key)), try SharedZoneState(decoding: Array(value))))
            return true
        }
        return zones
    }

    /// The live share records of a zone incarnation: name → share.
    func shares(incarnation: UInt64) throws -> [(name: String, share: Share)] {
        var names: [String] = []
        let prefix = bigEndian(incarnation)
        try index.forEach(in: "shares", from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            names.append(String(decoding: key[8...], as: UTF8.self))
            return true
        }
        return try names.compactMap { name in
            guard let state = try record(Record.ID(recordName: name, zoneID: .default), incarnation: incarnation),
                !state.isTombstone
            else { return nil }
            return (name, Share(validated: try savedRecord(at: state.offset)))
        }
    }

    /// The name of the share rooted at `root`, if any.
    func shareRooted(at root: String, incarnation: UInt64) throws -> String? {
        try index.value(forKey: IndexKey.record(incarnation: incarnation, name: root), in: "shareRoots")
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// What `participant` (a user record name) may do in the zone kept as `zoneID`.
    func access(of participant: String, to zoneID: RecordZone.ID) throws -> ParticipantAccess {
        var access = ParticipantAccess()
        guard zoneID != .default, let zone = try zone(zoneID), zone.isLive else { return access }
        for (name, share) in try shares(incarnation: zone.incarnation) {
            guard let member = share.participant(userRecordName: participant), member.role != .owner,
                member.acceptanceStatus == .accepted, member.permission != .none
            else { continue }
            access.shares.insert(name)
            if let root = share.rootRecordID {
                access.roots[root.recordName] = member.permission
            } else {
                access.zoneWide = member.permission
            }
        }
        return access
    }

    /// The permission `access` gives on the record named `name` of a zone incarnation, or `nil`
    /// when the record is not shared: a share record is read-only, a zone-wide share covers
    /// everything, a hierarchy share the records of its hierarchy (a deleted record by the
    /// place it had), as the index keeps each record's place (F123).
    func permission(
        _ access: ParticipantAccess, onRecord name: String, incarnation: UInt64
    ) throws -> Share.Participant.Permission? {
        if access.shares.contains(name) { return .readOnly }
        if let zoneWide = access.zoneWide { return zoneWide }
        guard let state = try record(Record.ID(recordName: name, zoneID: .default), incarnation: incarnation) else {
            return nil
        }
        return access.roots[state.hierarchyRoot]
    }

    /// The live records whose parent is the record named `name` of a zone incarnation.
    func children(of name: String, incarnation: UInt64) throws -> [String] {
        var names: [String] = []
        let prefix = IndexKey.children(incarnation: incarnation, parent: name)
        try index.forEach(in: "children", from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            names.append(String(decoding: key[prefix.count...], as: UTF8.self))
            return true
        }
        return names
    }

    /// Whether the zone kept as `zoneID` is still shared with `participant` through any share,
    /// and if so the offset of its latest change; else why not (`share`: the share they joined).
    func verdict(on zoneID: RecordZone.ID, for participant: String, share: String) throws -> SharedZoneVerdict {
        guard let zone = try zone(zoneID), zone.isLive else { return .gone(.zoneDeleted) }
        if try !access(of: participant, to: zoneID).isEmpty { return .live(lastChange: zone.lastChange) }
        let joined = try shares(incarnation: zone.incarnation).first { $0.name == share }
        return joined == nil ? .gone(.shareDeleted) : .gone(.removed)
    }

    /// A reference to the zone-wide share of a zone, if it has one, named in `zoneID`'s spelling.
    func zoneShareReference(_ zoneID: RecordZone.ID, kept: RecordZone.ID) throws -> Record.Reference? {
        let name: String?
        if scope == .shared {
            name = try index.value(forKey: IndexKey.zone(kept), in: "sharedZones")
                .map { try SharedZoneState(decoding: $0).share }
        } else if let zone = try zone(kept), zone.isLive, zone.incarnation != 0 {
            let key = IndexKey.record(incarnation: zone.incarnation, name: Share.zoneWideShareRecordName)
            name =
                try index.value(forKey: key, in: "shares") == nil
                ? nil : Share.zoneWideShareRecordName
        } else {
            name = nil
        }
        guard let name, name == Share.zoneWideShareRecordName else { return nil }
        return Record.Reference(recordID: Record.ID(recordName: name, zoneID: zoneID))
    }
}

/// How a record's latest change shows in the zone feed of a participant of hierarchy shares
/// (F123): as it is, not at all, or as a deletion (it left one of their hierarchies).
enum HierarchyVisibility {
    case shown
    case hidden
    case left
}

extension ParticipantAccess {
    /// How the record named `name`, in state `state`, shows to a participant with this access
    /// (no zone-wide share), whose token is before the record's row: a record that left one of
    /// their hierarchies is a deletion every time its row is read, so a participant may be told
    /// more than once, never less.
    func visibility(ofRecord name: String, _ state: RecordState?) -> HierarchyVisibility {
        if shares.contains(name) { return .shown }
        guard let state else { return .hidden }
        if roots[state.hierarchyRoot] != nil { return .shown }
        // Whatever the token: a later change outside the hierarchy moves the record's row past
        // the exit's offset, and a participant whose token passed that offset after the row left
        // it never read the exit there (F123).
        if state.exits.contains(where: { roots[$0.root] != nil }) { return .left }
        return .hidden
    }
}

/// What a participant may do in one zone of the owner's: through a zone-wide share, or through
/// hierarchy shares (their roots), as the owner's index says at one snapshot.
struct ParticipantAccess {
    /// The permission of a zone-wide share that lists the participant as accepted.
    var zoneWide: Share.Participant.Permission?
    /// Root record name → the permission of the hierarchy share rooted there.
    var roots: [String: Share.Participant.Permission] = [:]
    /// The names of the share records that give access (readable, never writable).
    var shares: Set<String> = []

    var isEmpty: Bool { zoneWide == nil && roots.isEmpty }
}

/// Whether a zone shared with a participant still is, and how far its owner's log has gone.
enum SharedZoneVerdict {
    case live(lastChange: UInt64)
    case gone(ShareEndReason)
}
