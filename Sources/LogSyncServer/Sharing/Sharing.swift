import Foundation
import LogStore
import Synchronization
import SyncModel

// Sharing between users (F119–F124; Docs/Protocol.md, "Sharing").
//
// A share is a record of type `cloudkit.share` in the owner's private database, in the zone it
// shares; the owner's index finds shares by zone, root record and URL secret. The records stay in
// the owner's log: a participant's reads and writes of a shared zone are the owner's database's
// operations, checked against the share inside the owner's transaction, with the participant as
// the author. The participant's shared database keeps its own log, whose offsets are its database
// tokens: an entry when the participant joins a zone, one per propagation of changes of the
// owner's zone (coalesced), and one when the zone leaves it. Propagation runs after each commit
// to a shared zone, and again at every read of the participant's database feed, so a change the
// first pass missed (a crash between the two commits) is never lost: the owner's log is the truth.

/// A user acting on another user's database: a share participant.
struct ShareActor {
    let user: UserID
    let number: UInt64
    let recordID: Record.ID

    var recordName: String { recordID.recordName }
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

extension SyncServer {
    /// The user who owns zones named with `ownerName` (`_user<N>`, written as
    /// `currentUserRecordID()` writes it), or `nil` for any other name.
    func owner(named ownerName: String) throws -> (user: UserID, number: UInt64)? {
        guard ownerName.hasPrefix("_user"), let number = UInt64(ownerName.dropFirst(5)),
            "_user\(number)" == ownerName, let user = try users.user(number: number)
        else { return nil }
        return (user, number)
    }

    /// `user` as a share actor.
    func actor(_ user: UserID) throws -> ShareActor {
        let number = try users.number(of: user)
        return ShareActor(user: user, number: number, recordID: Record.ID(recordName: "_user\(number)", zoneID: .default))
    }

    /// Gives `user` (registered if new) an e-mail address, by which owners invite them to shares.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid user ID or address, or an address
    ///   another user has.
    public func registerUser(_ user: UserID, emailAddress: String? = nil) throws {
        _ = try users.number(of: user)
        if let emailAddress { try users.setEmail(emailAddress, of: user) }
    }

    /// The identity of the user with this e-mail address (compared without case), or `nil`.
    public func userIdentity(forEmailAddress email: String) throws -> UserIdentity? {
        guard let number = try users.number(ofEmail: email) else { return nil }
        return UserIdentity(userRecordName: "_user\(number)", emailAddress: try users.email(ofNumber: number))
    }

    /// The identity of the user with this user record name (`_user<N>`), or `nil`.
    public func userIdentity(forUserRecordName name: String) throws -> UserIdentity? {
        guard let (_, number) = try owner(named: name) else { return nil }
        return UserIdentity(userRecordName: name, emailAddress: try users.email(ofNumber: number))
    }

    // MARK: Propagation to participants' shared databases

    /// Brings `participant`'s shared database up to date with the owners' logs: an entry for each
    /// shared zone that changed since its last one, and a zone deletion for each zone no longer
    /// shared with them (with `reasons`' reason when given). Hints the participant's devices but
    /// `device`. Idempotent; serialised with every other propagation and acceptance.
    func propagateShares(to participant: UserID, reasons: [RecordZone.ID: ShareEndReason] = [:], from device: DeviceID? = nil) throws {
        let shared = try store(participant, .shared)
        let recordName = try actor(participant).recordName
        try withSharingLock {
            let zones = try shared.read { snapshot in try snapshot.sharedZones() }
            var entries: [ServerEntry] = []
            for (zoneID, state) in zones {
                let verdict: SharedZoneVerdict
                if let owner = try owner(named: zoneID.ownerName) {
                    let ownerStore = try store(owner.user, .private)
                    verdict = try ownerStore.read { snapshot in
                        try ownerStore.verdict(on: RecordZone.ID(zoneName: zoneID.zoneName), for: recordName, share: state.share, snapshot)
                    }
                } else {
                    verdict = .gone(.zoneDeleted)
                }
                switch verdict {
                case .gone(let reason):
                    entries.append(.sharedZoneLeft(zoneID, reason: reasons[zoneID] ?? reason))
                case .live(let lastChange) where lastChange > state.ownerOffset:
                    entries.append(.sharedZoneChanged(zoneID, ownerOffset: lastChange))
                case .live:
                    break
                }
            }
            guard !entries.isEmpty else { return }
            let (_, offsets) = try shared.write { _, _ in (entries, ()) }
            shared.notify(changedZones: Set(entries.compactMap(\.sharedZoneID)), through: offsets.last!, from: device)
        }
    }
}

/// Whether a zone shared with a participant still is, and how far its owner's log has gone.
enum SharedZoneVerdict {
    case live(lastChange: UInt64)
    case gone(ShareEndReason)
}

extension ServerEntry {
    /// The zone of a shared-database entry.
    var sharedZoneID: RecordZone.ID? {
        switch self {
        case .sharedZoneJoined(let zoneID, _, _), .sharedZoneChanged(let zoneID, _), .sharedZoneLeft(let zoneID, _): zoneID
        default: nil
        }
    }
}

extension ServerDatabase.Snapshot {
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
            guard let state = try record(Record.ID(recordName: name, zoneID: .default), incarnation: incarnation), !state.isTombstone
            else { return nil }
            return (name, Share(validated: try savedRecord(at: state.offset)))
        }
    }

    /// The name of the share rooted at `root`, if any.
    func shareRooted(at root: String, incarnation: UInt64) throws -> String? {
        try index.value(forKey: IndexKey.record(incarnation: incarnation, name: root), in: "shareRoots")
            .map { String(decoding: $0, as: UTF8.self) }
    }
}

extension ServerDatabase {
    /// The owner's spelling of one of this database's zones, as participants name it (F120).
    func ownerSpelling(_ kept: RecordZone.ID) -> RecordZone.ID {
        RecordZone.ID(zoneName: kept.zoneName, ownerName: userRecordID.recordName)
    }

    /// The answer for a zone that is not shared with `user`: the same whether or not the zone,
    /// or its owner, exists (Docs/Protocol.md, "Sharing").
    static func notShared(_ zoneID: RecordZone.ID, with user: UserID, item: SyncError.ItemID? = nil) -> SyncError {
        SyncError(.zoneNotFound, "\(zoneID) is not shared with \(user)", item: item ?? .zone(zoneID))
    }

    /// What `participant` (a user record name) may do in the zone kept as `zoneID`.
    func access(of participant: String, to zoneID: RecordZone.ID, _ snapshot: Snapshot) throws -> ParticipantAccess {
        var access = ParticipantAccess()
        guard zoneID != .default, let zone = try snapshot.zone(zoneID), zone.isLive else { return access }
        for (name, share) in try snapshot.shares(incarnation: zone.incarnation) {
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
    /// everything, a hierarchy share its root and the records whose parents lead to it (a
    /// deleted record by the parent it had).
    func permission(
        _ access: ParticipantAccess, onRecord name: String, startingAt parent: String? = nil, incarnation: UInt64, _ snapshot: Snapshot
    ) throws -> Share.Participant.Permission? {
        if access.shares.contains(name) { return .readOnly }
        if let zoneWide = access.zoneWide { return zoneWide }
        var current = parent ?? name
        var seen = Set<String>()
        while !current.isEmpty, seen.insert(current).inserted, seen.count <= 10_000 {
            if let permission = access.roots[current] { return permission }
            guard let state = try snapshot.record(Record.ID(recordName: current, zoneID: .default), incarnation: incarnation) else {
                return nil
            }
            current = state.parent
        }
        return nil
    }

    /// Whether the zone kept as `zoneID` is still shared with `participant` through any share,
    /// and if so the offset of its latest change; else why not (`share`: the share they joined).
    func verdict(on zoneID: RecordZone.ID, for participant: String, share: String, _ snapshot: Snapshot) throws -> SharedZoneVerdict {
        guard let zone = try snapshot.zone(zoneID), zone.isLive else { return .gone(.zoneDeleted) }
        if try !access(of: participant, to: zoneID, snapshot).isEmpty { return .live(lastChange: zone.lastChange) }
        let joined = try snapshot.shares(incarnation: zone.incarnation).first { $0.name == share }
        return joined == nil ? .gone(.shareDeleted) : .gone(.removed)
    }

    /// The numbers of the users a share names (any status), but the owner.
    func participantNumbers(of share: Share) throws -> Set<UInt64> {
        Set(try share.participants.compactMap { participant in
            guard participant.role != .owner, let name = participant.userIdentity.userRecordName else { return nil }
            return try server.owner(named: name)?.number
        })
    }

    /// The numbers of the users any share of the zone kept as `zoneID` names.
    func participantNumbers(ofZone zoneID: RecordZone.ID, _ snapshot: Snapshot) throws -> Set<UInt64> {
        guard zoneID != .default, let zone = try snapshot.zone(zoneID), zone.isLive else { return [] }
        var numbers = Set<UInt64>()
        for (_, share) in try snapshot.shares(incarnation: zone.incarnation) { numbers.formUnion(try participantNumbers(of: share)) }
        return numbers
    }

    /// After a commit of this (private) database: hints its listeners (but `device` when the
    /// owner made the commit), and brings the shared database of every participant of the changed
    /// zones, and of `affected`, up to date (F121, F124).
    func committed(
        changedZones: Set<RecordZone.ID>, through offset: LogOffset, from device: DeviceID?, actor: ShareActor? = nil,
        affected: Set<UInt64> = [], reasons: [UInt64: ShareEndReason] = [:]
    ) {
        notify(changedZones: changedZones, through: offset, from: actor == nil ? device : nil)
        guard scope == .private else { return }
        // Propagation is also done at every read of a participant's feed: a failure here delays
        // it, loses nothing.
        var numbers = affected
        if let live = try? read({ snapshot in
            try changedZones.reduce(into: Set<UInt64>()) { $0.formUnion(try participantNumbers(ofZone: $1, snapshot)) }
        }) {
            numbers.formUnion(live)
        }
        for number in numbers.sorted() {
            guard let participant = try? server.users.user(number: number), participant != user else { continue }
            let reasonByZone = reasons[number].map { reason in
                Dictionary(uniqueKeysWithValues: changedZones.map { (ownerSpelling($0), reason) })
            } ?? [:]
            try? server.propagateShares(to: participant, reasons: reasonByZone, from: actor?.number == number ? device : nil)
        }
    }
}

extension ShareActor {
    /// The key under which the server keeps a participant's device's client change token in the
    /// owner's database: it starts with a NUL, which no device ID holds, so it never meets the
    /// owner's devices' keys (F159).
    func deviceKey(_ device: DeviceID?) -> DeviceID {
        DeviceID(rawValue: "\u{0}\(recordName)\u{0}\(device?.rawValue ?? "")")
    }
}

// MARK: The shared database

extension ServerDatabase {
    /// `modifyRecords` in a participant's shared database: each record goes to its zone's
    /// owner's database, decided there with the participant as the author (F121, F122); a zone
    /// not shared with the user fails its items with `zoneNotFound`, whatever the owner holds.
    func modifySharedRecords(_ request: ModifyRecordsRequest, from device: DeviceID?) throws -> ModifyRecordsResponse {
        try request.validate()
        let actor = try server.actor(user)
        var response = ModifyRecordsResponse()
        var owners: [UserID] = []
        var requests: [UserID: ModifyRecordsRequest] = [:]
        func route(_ recordID: Record.ID) throws -> UserID? {
            if let error = Self.violation(recordID.validate) { throw error.with(requestID: request.requestID) }
            guard let owner = try server.owner(named: recordID.zoneID.ownerName), owner.user != user else {
                throw Self.notShared(recordID.zoneID, with: user, item: .record(recordID)).with(requestID: request.requestID)
            }
            if requests[owner.user] == nil {
                owners.append(owner.user)
                requests[owner.user] = ModifyRecordsRequest(
                    recordsToSave: [], recordIDsToDelete: [], savePolicy: request.savePolicy, atomically: request.atomically,
                    requestID: request.requestID, clientChangeToken: request.clientChangeToken,
                    operationGroup: request.operationGroup)
            }
            return owner.user
        }
        for record in request.recordsToSave {
            do {
                if let owner = try route(record.recordID) { requests[owner]!.recordsToSave.append(record) }
            } catch let error as SyncError {
                response.saveResults[record.recordID] = .failure(error)
            }
        }
        for recordID in request.recordIDsToDelete {
            do {
                if let owner = try route(recordID) { requests[owner]!.recordIDsToDelete.append(recordID) }
            } catch let error as SyncError {
                response.deleteResults[recordID] = .failure(error)
            }
        }
        for owner in owners {
            let answer = try server.store(owner, .private).modifyRecords(requests[owner]!, from: device, actor: actor)
            response.saveResults.merge(answer.saveResults) { _, new in new }
            response.deleteResults.merge(answer.deleteResults) { _, new in new }
        }
        return response
    }

    /// `fetchZoneChanges` in a participant's shared database: the owner's zone feed, as far as
    /// the shares let the user see it (F119).
    func fetchSharedZoneChanges(_ request: FetchZoneChangesRequest, for device: DeviceID?) throws -> FetchZoneChangesResponse {
        try request.validate()
        guard let owner = try server.owner(named: request.zoneID.ownerName), owner.user != user else {
            throw Self.notShared(request.zoneID, with: user)
        }
        return try server.store(owner.user, .private).fetchZoneChanges(request, for: device, viewer: try server.actor(user))
    }

    /// A reference to the zone-wide share of a zone, if it has one, named in `zoneID`'s spelling.
    func zoneShareReference(_ zoneID: RecordZone.ID, kept: RecordZone.ID, _ snapshot: Snapshot) throws -> Record.Reference? {
        let name: String?
        if scope == .shared {
            name = try snapshot.index.value(forKey: IndexKey.zone(kept), in: "sharedZones")
                .map { try SharedZoneState(decoding: $0).share }
        } else if let zone = try snapshot.zone(kept), zone.isLive, zone.incarnation != 0 {
            let key = IndexKey.record(incarnation: zone.incarnation, name: Share.zoneWideShareRecordName)
            name = try snapshot.index.value(forKey: key, in: "shares") == nil
                ? nil : Share.zoneWideShareRecordName
        } else {
            name = nil
        }
        guard let name, name == Share.zoneWideShareRecordName else { return nil }
        return Record.Reference(recordID: Record.ID(recordName: name, zoneID: zoneID))
    }
}

// MARK: Share URLs and acceptance

extension SyncServer {
    /// The share at `url`, as `user` may join it: where it is, the share, and the user's
    /// participation (the owner's for the owner; a new public participant's for a public share).
    private struct Located {
        let owner: ServerDatabase
        let zoneID: RecordZone.ID
        let lastChange: UInt64
        let share: Share
        let participant: Share.Participant
    }

    private func locate(_ url: URL, for user: UserID, _ read: (ServerDatabase, (ServerDatabase.Snapshot) throws -> Located) throws -> Located) throws -> Located {
        guard let parts = ShareURL(url) else {
            throw SyncError(
                .invalidArguments,
                "\(quoted(url.absoluteString)) is not a share URL: share URLs are \(ShareURL.scheme)://share/<owner>/<32 hexadecimal digits>")
        }
        let unknown = SyncError(.unknownItem, "there is no share at \(quoted(url.absoluteString)) open to \(user)")
        guard let ownerUser = try users.user(number: parts.owner) else { throw unknown }
        let owner = try store(ownerUser, .private)
        let me = try actor(user).recordName
        return try read(owner) { snapshot in
            guard let bytes = try snapshot.index.value(forKey: IndexKey.shareSecret(parts.secret), in: "shareURLs")
            else { throw unknown }
            let location = try ShareLocation(decoding: bytes)
            let zoneID = IndexKey.zoneID(from: location.zone)
            guard let zone = try snapshot.zone(zoneID), zone.isLive,
                let state = try snapshot.record(Record.ID(recordName: location.share, zoneID: zoneID), incarnation: zone.incarnation),
                !state.isTombstone
            else { throw unknown }
            let share = Share(validated: try snapshot.savedRecord(at: state.offset))
            guard share.url == parts.url else { throw unknown }
            let participant: Share.Participant
            if me == owner.userRecordID.recordName {
                participant = share.owner ?? Share.Participant(
                    userIdentity: UserIdentity(userRecordName: me), role: .owner, permission: .readWrite, acceptanceStatus: .accepted)
            } else if let listed = share.participant(userRecordName: me) {
                guard listed.acceptanceStatus != .removed, listed.permission != .none else { throw unknown }
                participant = listed
            } else if share.publicPermission != .none {
                participant = Share.Participant(
                    userIdentity: UserIdentity(userRecordName: me, emailAddress: try users.email(ofNumber: try users.number(of: user))),
                    role: .publicUser, permission: share.publicPermission, acceptanceStatus: .pending)
            } else {
                throw unknown
            }
            return Located(owner: owner, zoneID: zoneID, lastChange: zone.lastChange, share: share, participant: participant)
        }
    }

    /// The share as a participant sees it: its zone named with the owner's record name (F120).
    private func participantsView(_ located: Located) -> Share {
        Share(validated: located.share.record.renamingZone(located.zoneID, to: located.owner.ownerSpelling(located.zoneID)))
    }

    /// The metadata of the share at `url`, as `user` would join it.
    ///
    /// - Throws: `SyncError`: `invalidArguments` for a URL that is not a share URL, `unknownItem`
    ///   for a share that does not exist or is not open to `user`.
    func shareMetadata(url: URL, for user: UserID) throws -> Share.Metadata {
        let located = try locate(url, for: user) { owner, body in try owner.read(body) }
        let share = participantsView(located)
        return Share.Metadata(
            share: share, hierarchicalRootRecordID: share.rootRecordID,
            ownerIdentity: share.owner?.userIdentity ?? UserIdentity(userRecordName: located.owner.userRecordID.recordName),
            participantRole: located.participant.role, participantPermission: located.participant.permission,
            participantStatus: located.participant.acceptanceStatus)
    }

    /// Accepts shares for `user`: each zone joins the user's shared database (F119), and the
    /// owner's share records the acceptance. A share that cannot be accepted fails alone and
    /// changes nothing.
    func acceptShares(_ request: AcceptSharesRequest, for user: UserID, device: DeviceID?) throws -> AcceptSharesResponse {
        try request.validate()
        var response = AcceptSharesResponse()
        for url in request.shareURLs {
            do {
                response.results[url] = .success(try accept(url, for: user, device: device))
            } catch let error as SyncError {
                response.results[url] = .failure(error)
            }
        }
        return response
    }

    private func accept(_ url: URL, for user: UserID, device: DeviceID?) throws -> Share {
        let located = try locate(url, for: user) { owner, body in try owner.read(body) }
        if located.participant.role == .owner { return participantsView(located) }
        let actor = try actor(user)
        let shared = try store(user, .shared)
        let zoneID = located.owner.ownerSpelling(located.zoneID)
        // The participant's database first: if the owner's commit then fails, propagation finds
        // the zone not shared and removes it again; the other order could lose the zone.
        try withSharingLock {
            let joined = try shared.read { snapshot in
                try snapshot.index.value(forKey: IndexKey.zone(zoneID), in: "sharedZones") != nil
            }
            if !joined {
                let (_, offsets) = try shared.write { _, _ in
                    ([ServerEntry.sharedZoneJoined(
                        zoneID, share: Record.ID(recordName: located.share.recordID.recordName, zoneID: zoneID),
                        ownerOffset: located.lastChange)], ())
                }
                shared.notify(changedZones: [zoneID], through: offsets.last!, from: device)
            }
        }
        let now = configuration.now()
        let owner = located.owner
        let accepted: Located
        let offsets: Range<LogOffset>
        do {
            (accepted, offsets) = try owner.write { snapshot, next -> (entries: [ServerEntry], result: Located) in
                let current = try locate(url, for: user) { _, body in try body(snapshot) }
                guard current.participant.acceptanceStatus != .accepted else { return ([], current) }
                var share = current.share
                var participant = current.participant
                participant.acceptanceStatus = .accepted
                share.addParticipant(participant)
                var record = share.record
                record.applySystemFields(ServerDatabase.systemFields(previous: current.share.record, modifier: actor.recordID, now: now)
                    .with(tag: String(next)))
                return ([.recordSaved(record)], Located(
                    owner: owner, zoneID: current.zoneID, lastChange: next, share: Share(validated: record), participant: participant))
            }
        } catch {
            try? propagateShares(to: user, from: device)
            throw error
        }
        if let last = offsets.last {
            owner.committed(
                changedZones: [accepted.zoneID], through: last, from: device, actor: actor,
                affected: try owner.participantNumbers(of: accepted.share))
        }
        return participantsView(accepted)
    }
}
