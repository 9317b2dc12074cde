import Foundation
import LogStore
import SyncModel

/// The rules of an owner's shares (Docs/Protocol.md, "Sharing"): what an owner's save of a share
/// may hold (F123), what a participant may do in a shared zone (F121, F124), and which users a
/// share names, whose shared databases follow the owner's changes.
///
/// A share is a record of type `cloudkit.share` in the owner's private database, in the zone it
/// shares; the owner's index finds shares by zone, root record and URL secret
/// (`DatabaseSnapshot+Sharing.swift`). A participant's reads and writes of a shared zone are the
/// owner's database's operations, checked against the shares inside the owner's transaction.
struct ShareRules {
    /// The owner rule of the owner's database, whose shares these are.
    let owner: ZoneOwnership
    /// The owner's number in the registry, which a share's URL carries.
    let ownerNumber: UInt64
    /// The registry, where the users a share names are found.
    let users: UserRegistry

    /// The rules of the shares of `database` (an owner's private database).
    init(_ database: ServerDatabase) {
        owner = database.ownership
        ownerNumber = database.userNumber
        users = database.context.users
    }

    /// The most participants a share may have, the owner included.
    static let maxShareParticipants = 100

    // MARK: Participants' items

    /// The outcome of a participant's save decided by the shares alone, or `nil` to decide it as
    /// the owner's: `zoneNotFound` where nothing is shared with them (the same whether or not the
    /// zone exists), `permissionFailure` where they may only read, or may not save a share.
    ///
    /// Where a save puts the record is judged as the request leaves the hierarchies
    /// (`hierarchy`): a new parent saved in the same request counts where the request puts it.
    func participantCheck(
        saving record: Record, _ actor: ShareActor, _ snapshot: DatabaseSnapshot,
        _ cache: inout [RecordZone.ID: ParticipantAccess], _ hierarchy: RequestHierarchy
    ) throws -> RecordModification.Outcome? {
        let recordID = record.recordID
        guard ServerDatabase.violation(record.validate) == nil else { return nil }  // decided (refused) as usual
        let access = try participantAccess(actor, recordID.zoneID, snapshot, &cache)
        guard !access.isEmpty, let zone = try snapshot.zone(recordID.zoneID) else {
            return .failure(
                Self.notShared(owner.ownerSpelling(recordID.zoneID), with: actor.user, item: .record(recordID)))
        }
        let current = try snapshot.record(recordID, incarnation: zone.incarnation)
        if record.recordType == Share.recordType || current?.recordType == Share.recordType
            || recordID.recordName == Share.zoneWideShareRecordName
        {
            return .failure(
                SyncError(
                    .permissionFailure,
                    "only the owner of \(owner.ownerSpelling(recordID.zoneID)) saves its shares; \(actor.user) may delete a share to leave it",
                    item: .record(recordID)))
        }
        // The record where it is (if it exists and is shared), and where the save puts it.
        let existing = current.flatMap { $0.isTombstone ? nil : $0 }
        var permissions: [Share.Participant.Permission?] = []
        if existing != nil {
            permissions.append(
                try snapshot.permission(access, onRecord: recordID.recordName, incarnation: zone.incarnation))
        }
        if existing == nil || record.isParentChanged {
            if let zoneWide = access.zoneWide {
                permissions.append(zoneWide)
            } else if let root = access.roots[recordID.recordName] {
                permissions.append(root)  // a hierarchy's root stays its root wherever it goes
            } else {
                let place = try hierarchy.place(
                    of: recordID.recordName, under: record.parent?.recordID.recordName ?? "", in: recordID.zoneID,
                    incarnation: zone.incarnation, snapshot,
                    isShareRoot: { try snapshot.shareRooted(at: $0, incarnation: zone.incarnation) != nil })
                permissions.append(place.flatMap { access.roots[$0.root] })
            }
        }
        return denial(permissions, recordID, actor)
    }

    /// The outcome of a participant's deletion decided by the shares alone, or `nil` to decide it
    /// as the owner's: deleting a share they take part in is leaving it (F124).
    func participantCheck(
        deleting recordID: Record.ID, _ actor: ShareActor, _ snapshot: DatabaseSnapshot,
        _ cache: inout [RecordZone.ID: ParticipantAccess],
        now: Date
    ) throws -> RecordModification.Outcome? {
        guard ServerDatabase.violation(recordID.validate) == nil else { return nil }
        let access = try participantAccess(actor, recordID.zoneID, snapshot, &cache)
        guard !access.isEmpty, let zone = try snapshot.zone(recordID.zoneID) else {
            return .failure(
                Self.notShared(owner.ownerSpelling(recordID.zoneID), with: actor.user, item: .record(recordID)))
        }
        if access.shares.contains(recordID.recordName),
            let state = try snapshot.record(recordID, incarnation: zone.incarnation), !state.isTombstone
        {
            let current = try snapshot.savedRecord(at: state.offset)
            var share = Share(validated: current)
            share.participants = share.participants.map { participant in
                guard participant.userIdentity.userRecordName == actor.recordName else { return participant }
                return Share.Participant(
                    userIdentity: participant.userIdentity, role: participant.role, permission: participant.permission,
                    acceptanceStatus: .removed)
            }
            var left = share.record
            left.applySystemFields(
                RecordModification.systemFields(previous: current, modifier: actor.recordID, now: now))
            return .leave(left)
        }
        if access.zoneWide == nil,
            try snapshot.record(recordID, incarnation: zone.incarnation).map({ $0.isTombstone }) ?? true
        {
            // In a hierarchy share, a record that is not there is as unshared as one that is
            // elsewhere: the answer tells nothing of the records outside the hierarchy.
            return denial([nil], recordID, actor)
        }
        return denial(
            [try snapshot.permission(access, onRecord: recordID.recordName, incarnation: zone.incarnation)], recordID,
            actor)
    }

    private func participantAccess(
        _ actor: ShareActor, _ zoneID: RecordZone.ID, _ snapshot: DatabaseSnapshot,
        _ cache: inout [RecordZone.ID: ParticipantAccess]
    ) throws -> ParticipantAccess {
        if let known = cache[zoneID] { return known }
        let access = try snapshot.access(of: actor.recordName, to: zoneID)
        cache[zoneID] = access
        return access
    }

    /// `nil` when every permission is read-write; else the failure of the weakest.
    private func denial(
        _ permissions: [Share.Participant.Permission?], _ recordID: Record.ID, _ actor: ShareActor
    ) -> RecordModification.Outcome? {
        if permissions.contains(where: { $0 == nil || $0 == Share.Participant.Permission.none }) {
            return .failure(
                SyncError(
                    .permissionFailure,
                    "\(Record.ID(recordName: recordID.recordName, zoneID: owner.ownerSpelling(recordID.zoneID))) is not in a record hierarchy shared with \(actor.user)",
                    item: .record(recordID)))
        }
        if permissions.contains(.readOnly) {
            return .failure(
                SyncError(
                    .permissionFailure,
                    "\(owner.ownerSpelling(recordID.zoneID)) is shared with \(actor.user) read-only",
                    item: .record(recordID)))
        }
        return nil
    }

    // MARK: Shares a request touches

    /// The users named by the shares the decided outcomes save, delete or leave, before and after
    /// (their shared databases are brought up to date after the commit).
    func sharesAffected(
        by outcomes: some Sequence<(Record.ID, RecordModification.Outcome)>, _ snapshot: DatabaseSnapshot
    ) throws -> Set<UInt64> {
        var numbers = Set<UInt64>()
        for (recordID, outcome) in outcomes {
            let after: Record?
            switch outcome {
            case .save(let record, _, _) where record.recordType == Share.recordType: after = record
            case .leave(let record): after = record
            case .delete(let recordType) where recordType == Share.recordType: after = nil
            default: continue
            }
            if let after { numbers.formUnion(try participantNumbers(of: Share(validated: after))) }
            if let zone = try snapshot.zone(recordID.zoneID),
                let state = try snapshot.record(recordID, incarnation: zone.incarnation),
                !state.isTombstone, state.recordType == Share.recordType
            {
                numbers.formUnion(
                    try participantNumbers(of: Share(validated: try snapshot.savedRecord(at: state.offset))))
            }
        }
        return numbers
    }

    /// The shares rooted at deleted records (but those the request itself names), with the users
    /// each names.
    func sharesRooted(
        at deleted: [Record.ID], sparing spared: Set<Record.ID>, _ snapshot: DatabaseSnapshot
    ) throws -> [(Record.ID, Set<UInt64>)] {
        var shares: [(Record.ID, Set<UInt64>)] = []
        var seen = Set<Record.ID>()
        for recordID in deleted {
            guard let zone = try snapshot.zone(recordID.zoneID), zone.isLive,
                let name = try snapshot.shareRooted(at: recordID.recordName, incarnation: zone.incarnation)
            else { continue }
            let shareID = Record.ID(recordName: name, zoneID: recordID.zoneID)
            guard !spared.contains(shareID), seen.insert(shareID).inserted,
                let state = try snapshot.record(shareID, incarnation: zone.incarnation), !state.isTombstone
            else { continue }
            shares.append(
                (shareID, try participantNumbers(of: Share(validated: try snapshot.savedRecord(at: state.offset)))))
        }
        return shares
    }

    // MARK: The owner's saves of shares

    /// The share the owner saves, as the server keeps it, or why it cannot be saved: a share
    /// shares the whole zone (`cloudkit.zoneshare`, no root) or one hierarchy, and a zone or
    /// record belongs to at most one share (`alreadyShared`, F123). The server sets the URL
    /// (kept from the first save), the owner, and each participant's identity and status: a new
    /// participant is pending, an accepted one stays accepted, one the owner leaves out is gone.
    func normalizedShare(
        _ saved: Record, previous: Record?, zone: ZoneState, _ snapshot: DatabaseSnapshot,
        _ plan: inout RecordModification.Plan
    ) throws -> Result<Record, SyncError> {
        let recordID = saved.recordID
        let zoneID = recordID.zoneID
        func failure(_ code: SyncError.Code, _ message: String) -> Result<Record, SyncError> {
            .failure(SyncError(code, message, item: .record(recordID)))
        }
        guard owner.scope == .private else {
            return failure(
                .permissionFailure,
                "shares are saved by their owner in the private database, not the \(owner.scope) database")
        }
        guard zoneID != .default else {
            return failure(
                .invalidArguments,
                "records of the default zone cannot be shared; share a custom zone or a hierarchy in one")
        }
        guard saved.recordType == Share.recordType else {
            return failure(
                .invalidArguments,
                "the record name \(quoted(Share.zoneWideShareRecordName)) is reserved for zone-wide shares (\(Share.recordType))"
            )
        }
        let share: Share
        do {
            share = try Share(record: saved)
        } catch {
            return .failure(error)
        }
        let others = try snapshot.shares(incarnation: zone.incarnation).filter { $0.name != recordID.recordName }
        if let root = share.rootRecordID {
            if let previous, Share(validated: previous).rootRecordID != root {
                return failure(
                    .invalidArguments,
                    "the root of share \(recordID) is \(Share(validated: previous).rootRecordID.map { "\($0)" } ?? "none") and cannot change"
                )
            }
            if others.contains(where: { $0.share.rootRecordID == nil }) {
                return failure(
                    .alreadyShared,
                    "\(zoneID) is shared whole (\(Share.zoneWideShareRecordName)); its records cannot be shared again")
            }
            let rootState = try snapshot.record(root, incarnation: zone.incarnation)
            if rootState?.recordType == Share.recordType {
                return failure(.invalidArguments, "the root of share \(recordID), \(root), is a share")
            }
            guard rootState.map({ !$0.isTombstone }) == true || plan.savedInRequest.contains(root) else {
                return failure(.referenceViolation, "the root of share \(recordID), \(root), does not exist")
            }
            // Deleting a root deletes its share (F124): a share saved by the request that deletes
            // its root would outlive it.
            if plan.deletedInRequest.contains(root) {
                return failure(
                    .referenceViolation, "the root of share \(recordID), \(root), is deleted by the same request")
            }
            if previous == nil {
                if let other = try snapshot.shareRooted(at: root.recordName, incarnation: zone.incarnation)
                    ?? plan.newShareRoots[root],
                    other != recordID.recordName
                {
                    return failure(.alreadyShared, "\(root) already belongs to share \(quoted(other))")
                }
                // A share of an ancestor covers the root already, at any depth; a share of a
                // descendant would be covered by this one (F123). The index keeps each record's
                // hierarchy; the request's own saves are judged where they put their records.
                let enclosing: String
                if plan.hierarchy.moves(root) {
                    let newRoots = plan.newShareRoots
                    enclosing =
                        try plan.hierarchy.place(
                            of: root.recordName, under: plan.hierarchy.parent(of: root) ?? "", in: zoneID,
                            incarnation: zone.incarnation, snapshot,
                            isShareRoot: {
                                try snapshot.shareRooted(at: $0, incarnation: zone.incarnation) != nil
                                    || newRoots[Record.ID(recordName: $0, zoneID: zoneID)] != nil
                            })?.root ?? ""
                } else {
                    enclosing = rootState.map { $0.isTombstone ? "" : $0.hierarchyRoot } ?? ""
                }
                if !enclosing.isEmpty, enclosing != root.recordName {
                    let other =
                        try snapshot.shareRooted(at: enclosing, incarnation: zone.incarnation)
                        ?? plan.newShareRoots[Record.ID(recordName: enclosing, zoneID: zoneID)] ?? enclosing
                    return failure(
                        .alreadyShared,
                        "\(root) already belongs to share \(quoted(other)) through its ancestor \(quoted(enclosing))")
                }
                if let state = rootState, !state.isTombstone, state.children > 0,
                    let inner = try Self.sharedDescendant(of: root.recordName, incarnation: zone.incarnation, snapshot)
                {
                    return failure(
                        .alreadyShared,
                        "\(root) has a descendant, \(quoted(inner.record)), that belongs to share \(quoted(inner.share)); a record belongs to at most one share"
                    )
                }
                plan.newShareRoots[root] = recordID.recordName
            }
        } else {
            guard recordID.recordName == Share.zoneWideShareRecordName else {
                return failure(
                    .invalidArguments,
                    "a share without a root record shares its zone and must be named \(quoted(Share.zoneWideShareRecordName))"
                )
            }
            guard zone.capabilities.contains(.zoneWideSharing) else {
                return failure(
                    .invalidArguments, "\(zoneID) cannot be shared whole: it lacks the zoneWideSharing capability")
            }
            if let other = others.first {
                return failure(
                    .alreadyShared,
                    "\(zoneID) already shares the record hierarchy of share \(quoted(other.name)); a zone is shared whole or by hierarchies"
                )
            }
        }

        // Participants: the owner first, then each other user once, as the registry knows them.
        let before = previous.map { Share(validated: $0) }
        var participants = [
            Share.Participant(
                userIdentity: UserIdentity(
                    userRecordName: owner.userRecordID.recordName, emailAddress: try users.email(ofNumber: ownerNumber)),
                role: .owner, permission: .readWrite, acceptanceStatus: .accepted)
        ]
        for invited in share.participants where invited.role != .owner {
            let identity = invited.userIdentity
            let name: String
            if let given = identity.userRecordName {
                guard try users.owner(named: given) != nil else {
                    return failure(
                        .invalidArguments,
                        "share \(recordID) invites \(identity), but no user has the record name \(quoted(given))")
                }
                name = given
            } else if let email = identity.emailAddress {
                do {
                    try UserIdentity.validate(emailAddress: email)
                } catch {
                    return .failure(
                        SyncError(
                            .invalidArguments, "share \(recordID) invites \(error.message)", item: .record(recordID)))
                }
                guard let number = try users.number(ofEmail: email) else {
                    return failure(
                        .invalidArguments, "share \(recordID) invites \(identity), but no user has this e-mail address")
                }
                name = "_user\(number)"
            } else {
                return failure(
                    .invalidArguments,
                    "share \(recordID) invites a participant with neither a user record name nor an e-mail address")
            }
            guard name != owner.userRecordID.recordName else {
                return failure(
                    .invalidArguments, "share \(recordID) invites its owner, \(owner.user), as a participant")
            }
            guard let number = try users.owner(named: name)?.number else { continue }
            let earlier = before?.participant(userRecordName: name)
            let status: Share.Participant.AcceptanceStatus =
                switch (invited.acceptanceStatus, earlier?.acceptanceStatus) {
                case (.removed, _): .removed
                case (_, .accepted?): .accepted
                default: .pending
                }
            let participant = Share.Participant(
                userIdentity: UserIdentity(userRecordName: name, emailAddress: try users.email(ofNumber: number)),
                role: earlier?.role == .publicUser ? .publicUser : .privateUser, permission: invited.permission,
                acceptanceStatus: status)
            if let index = participants.firstIndex(where: { $0.userIdentity.userRecordName == name }) {
                participants[index] = participant
            } else {
                participants.append(participant)
            }
        }
        guard participants.count <= Self.maxShareParticipants else {
            return failure(
                .tooManyParticipants,
                "share \(recordID) has \(participants.count) participants, more than \(Self.maxShareParticipants)")
        }
        var normalized = share
        normalized.participants = participants
        var record = normalized.record
        record[Share.FieldKey.url] = .string(
            (before?.url ?? ShareURL(owner: ownerNumber, secret: ShareURL.newSecret()).url).absoluteString)
        return .success(record)
    }

    /// A descendant of the record `name` that belongs to a shared hierarchy, with its share:
    /// a walk of the subtree in the index, when a share is created there.
    static func sharedDescendant(
        of name: String, incarnation: UInt64, _ snapshot: DatabaseSnapshot
    ) throws -> (record: String, share: String)? {
        var queue = [name]
        var seen: Set<String> = [name]
        while let parent = queue.popLast() {
            for child in try snapshot.children(of: parent, incarnation: incarnation) where seen.insert(child).inserted {
                guard
                    let state = try snapshot.record(
                        Record.ID(recordName: child, zoneID: .default), incarnation: incarnation)
                else { continue }
                if !state.hierarchyRoot.isEmpty {
                    let share =
                        try snapshot.shareRooted(at: state.hierarchyRoot, incarnation: incarnation)
                        ?? state.hierarchyRoot
                    return (child, share)
                }
                if state.children > 0 { queue.append(child) }
            }
        }
        return nil
    }

    // MARK: The users a share names

    /// The numbers of the users a share names (any status), but the owner.
    func participantNumbers(of share: Share) throws -> Set<UInt64> {
        Set(
            try share.participants.compactMap { participant in
                guard participant.role != .owner, let name = participant.userIdentity.userRecordName else { return nil }
                return try users.owner(named: name)?.number
            })
    }

    /// The numbers of the users any share of the zone kept as `zoneID` names.
    func participantNumbers(ofZone zoneID: RecordZone.ID, _ snapshot: DatabaseSnapshot) throws -> Set<UInt64> {
        guard zoneID != .default, let zone = try snapshot.zone(zoneID), zone.isLive else { return [] }
        var numbers = Set<UInt64>()
        for (_, share) in try snapshot.shares(incarnation: zone.incarnation) {
            numbers.formUnion(try participantNumbers(of: share))
        }
        return numbers
    }

    /// The answer for a zone that is not shared with `user`: the same whether or not the zone,
    /// or its owner, exists (Docs/Protocol.md, "Sharing").
    static func notShared(_ zoneID: RecordZone.ID, with user: UserID, item: SyncError.ItemID? = nil) -> SyncError {
        SyncError(.zoneNotFound, "\(zoneID) is not shared with \(user)", item: item ?? .zone(zoneID))
    }
}

/// A user acting on another user's database: a share participant.
struct ShareActor {
    let user: UserID
    let number: UInt64
    let recordID: Record.ID

    var recordName: String { recordID.recordName }

    /// The key under which the server keeps a participant's device's client change token in the
    /// owner's database: it starts with a NUL, which no device ID holds, so it never meets the
    /// owner's devices' keys (F159).
    func deviceKey(_ device: DeviceID?) -> DeviceID {
        DeviceID(rawValue: "\u{0}\(recordName)\u{0}\(device?.rawValue ?? "")")
    }
}
