import Foundation
import LogStore
import SyncModel

// The rules of shares in a modify request (Docs/Protocol.md, "Sharing"): what an owner's save of
// a share may hold (F123), and what a participant may do in a shared zone (F121, F124).
extension ServerDatabase {
    /// The most participants a share may have, the owner included.
    static let maxShareParticipants = 100

    // MARK: Participants' items

    /// The outcome of a participant's save decided by the shares alone, or `nil` to decide it as
    /// the owner's: `zoneNotFound` where nothing is shared with them (the same whether or not the
    /// zone exists), `permissionFailure` where they may only read, or may not save a share.
    func participantCheck(
        saving record: Record, _ actor: ShareActor, _ snapshot: Snapshot, _ cache: inout [RecordZone.ID: ParticipantAccess]
    ) throws -> Outcome? {
        let recordID = record.recordID
        guard Self.violation(record.validate) == nil else { return nil }  // decided (refused) as usual
        let access = try participantAccess(actor, recordID.zoneID, snapshot, &cache)
        guard !access.isEmpty, let zone = try snapshot.zone(recordID.zoneID) else {
            return .failure(Self.notShared(ownerSpelling(recordID.zoneID), with: actor.user, item: .record(recordID)))
        }
        let current = try snapshot.record(recordID, incarnation: zone.incarnation)
        if record.recordType == Share.recordType || current?.recordType == Share.recordType
            || recordID.recordName == Share.zoneWideShareRecordName
        {
            return .failure(SyncError(
                .permissionFailure, "only the owner of \(ownerSpelling(recordID.zoneID)) saves its shares; \(actor.user) may delete a share to leave it",
                item: .record(recordID)))
        }
        // The record where it is (if it exists and is shared), and where the save puts it.
        let existing = current.flatMap { $0.isTombstone ? nil : $0 }
        var permissions: [Share.Participant.Permission?] = []
        if existing != nil { permissions.append(try permission(access, onRecord: recordID.recordName, incarnation: zone.incarnation, snapshot)) }
        if existing == nil || record.isParentChanged {
            if let parent = record.parent {
                permissions.append(try permission(
                    access, onRecord: recordID.recordName, startingAt: parent.recordID.recordName, incarnation: zone.incarnation, snapshot))
            } else {
                // Without a parent, only a zone-wide share covers it (or it is a hierarchy's root).
                permissions.append(access.zoneWide ?? access.roots[recordID.recordName])
            }
        }
        return denial(permissions, recordID, actor)
    }

    /// The outcome of a participant's deletion decided by the shares alone, or `nil` to decide it
    /// as the owner's: deleting a share they take part in is leaving it (F124).
    func participantCheck(
        deleting recordID: Record.ID, _ actor: ShareActor, _ snapshot: Snapshot, _ cache: inout [RecordZone.ID: ParticipantAccess],
        now: Date
    ) throws -> Outcome? {
        guard Self.violation(recordID.validate) == nil else { return nil }
        let access = try participantAccess(actor, recordID.zoneID, snapshot, &cache)
        guard !access.isEmpty, let zone = try snapshot.zone(recordID.zoneID) else {
            return .failure(Self.notShared(ownerSpelling(recordID.zoneID), with: actor.user, item: .record(recordID)))
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
            left.applySystemFields(Self.systemFields(previous: current, modifier: actor.recordID, now: now))
            return .leave(left)
        }
        if access.zoneWide == nil,
            try snapshot.record(recordID, incarnation: zone.incarnation).map({ $0.isTombstone }) ?? true
        {
            // In a hierarchy share, a record that is not there is as unshared as one that is
            // elsewhere: the answer tells nothing of the records outside the hierarchy.
            return denial([nil], recordID, actor)
        }
        return denial([try permission(access, onRecord: recordID.recordName, incarnation: zone.incarnation, snapshot)], recordID, actor)
    }

    private func participantAccess(
        _ actor: ShareActor, _ zoneID: RecordZone.ID, _ snapshot: Snapshot, _ cache: inout [RecordZone.ID: ParticipantAccess]
    ) throws -> ParticipantAccess {
        if let known = cache[zoneID] { return known }
        let access = try access(of: actor.recordName, to: zoneID, snapshot)
        cache[zoneID] = access
        return access
    }

    /// `nil` when every permission is read-write; else the failure of the weakest.
    private func denial(_ permissions: [Share.Participant.Permission?], _ recordID: Record.ID, _ actor: ShareActor) -> Outcome? {
        if permissions.contains(where: { $0 == nil || $0 == Share.Participant.Permission.none }) {
            return .failure(SyncError(
                .permissionFailure, "\(Record.ID(recordName: recordID.recordName, zoneID: ownerSpelling(recordID.zoneID))) is not in a record hierarchy shared with \(actor.user)",
                item: .record(recordID)))
        }
        if permissions.contains(.readOnly) {
            return .failure(SyncError(
                .permissionFailure, "\(ownerSpelling(recordID.zoneID)) is shared with \(actor.user) read-only",
                item: .record(recordID)))
        }
        return nil
    }

    // MARK: Shares a request touches

    /// The users named by the shares the decided outcomes save, delete or leave, before and after
    /// (their shared databases are brought up to date after the commit).
    func sharesAffected(by outcomes: [Record.ID: Outcome], _ snapshot: Snapshot) throws -> Set<UInt64> {
        var numbers = Set<UInt64>()
        for (recordID, outcome) in outcomes {
            let after: Record?
            switch outcome {
            case .save(let record) where record.recordType == Share.recordType: after = record
            case .leave(let record): after = record
            case .delete(let recordType) where recordType == Share.recordType: after = nil
            default: continue
            }
            if let after { numbers.formUnion(try participantNumbers(of: Share(validated: after))) }
            if let zone = try snapshot.zone(recordID.zoneID), let state = try snapshot.record(recordID, incarnation: zone.incarnation),
                !state.isTombstone, state.recordType == Share.recordType
            {
                numbers.formUnion(try participantNumbers(of: Share(validated: try snapshot.savedRecord(at: state.offset))))
            }
        }
        return numbers
    }

    /// The shares rooted at deleted records (but those the request itself names), with the users
    /// each names.
    func sharesRooted(
        at deleted: [Record.ID], sparing spared: Set<Record.ID>, _ snapshot: Snapshot
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
            shares.append((shareID, try participantNumbers(of: Share(validated: try snapshot.savedRecord(at: state.offset)))))
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
        _ saved: Record, previous: Record?, zone: ZoneState, _ snapshot: Snapshot, _ plan: inout Plan
    ) throws -> Result<Record, SyncError> {
        let recordID = saved.recordID
        let zoneID = recordID.zoneID
        func failure(_ code: SyncError.Code, _ message: String) -> Result<Record, SyncError> {
            .failure(SyncError(code, message, item: .record(recordID)))
        }
        guard scope == .private else {
            return failure(.permissionFailure, "shares are saved by their owner in the private database, not the \(scope) database")
        }
        guard zoneID != .default else {
            return failure(.invalidArguments, "records of the default zone cannot be shared; share a custom zone or a hierarchy in one")
        }
        guard saved.recordType == Share.recordType else {
            return failure(.invalidArguments, "the record name \(quoted(Share.zoneWideShareRecordName)) is reserved for zone-wide shares (\(Share.recordType))")
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
                return failure(.invalidArguments, "the root of share \(recordID) is \(Share(validated: previous).rootRecordID.map { "\($0)" } ?? "none") and cannot change")
            }
            if others.contains(where: { $0.share.rootRecordID == nil }) {
                return failure(.alreadyShared, "\(zoneID) is shared whole (\(Share.zoneWideShareRecordName)); its records cannot be shared again")
            }
            let rootState = try snapshot.record(root, incarnation: zone.incarnation)
            if rootState?.recordType == Share.recordType {
                return failure(.invalidArguments, "the root of share \(recordID), \(root), is a share")
            }
            guard rootState.map({ !$0.isTombstone }) == true || plan.savedInRequest.contains(root) else {
                return failure(.referenceViolation, "the root of share \(recordID), \(root), does not exist")
            }
            if previous == nil {
                if let other = try snapshot.shareRooted(at: root.recordName, incarnation: zone.incarnation) ?? plan.newShareRoots[root],
                    other != recordID.recordName
                {
                    return failure(.alreadyShared, "\(root) already belongs to share \(quoted(other))")
                }
                // An ancestor's share covers the root already.
                var current = rootState?.parent ?? ""
                var seen = Set<String>()
                while !current.isEmpty, seen.insert(current).inserted, seen.count <= 10_000 {
                    if let other = try snapshot.shareRooted(at: current, incarnation: zone.incarnation) {
                        return failure(.alreadyShared, "\(root) already belongs to share \(quoted(other)) through its ancestor \(quoted(current))")
                    }
                    current = try snapshot.record(Record.ID(recordName: current, zoneID: zoneID), incarnation: zone.incarnation)?.parent ?? ""
                }
                plan.newShareRoots[root] = recordID.recordName
            }
        } else {
            guard recordID.recordName == Share.zoneWideShareRecordName else {
                return failure(.invalidArguments, "a share without a root record shares its zone and must be named \(quoted(Share.zoneWideShareRecordName))")
            }
            guard zone.capabilities.contains(.zoneWideSharing) else {
                return failure(.invalidArguments, "\(zoneID) cannot be shared whole: it lacks the zoneWideSharing capability")
            }
            if let other = others.first {
                return failure(.alreadyShared, "\(zoneID) already shares the record hierarchy of share \(quoted(other.name)); a zone is shared whole or by hierarchies")
            }
        }

        // Participants: the owner first, then each other user once, as the registry knows them.
        let before = previous.map { Share(validated: $0) }
        var participants = [Share.Participant(
            userIdentity: UserIdentity(userRecordName: userRecordID.recordName, emailAddress: try server.users.email(ofNumber: userNumber)),
            role: .owner, permission: .readWrite, acceptanceStatus: .accepted)]
        for invited in share.participants where invited.role != .owner {
            let identity = invited.userIdentity
            let name: String
            if let given = identity.userRecordName {
                guard try server.owner(named: given) != nil else {
                    return failure(.invalidArguments, "share \(recordID) invites \(identity), but no user has the record name \(quoted(given))")
                }
                name = given
            } else if let email = identity.emailAddress {
                do {
                    try UserIdentity.validate(emailAddress: email)
                } catch {
                    return .failure(SyncError(.invalidArguments, "share \(recordID) invites \(error.message)", item: .record(recordID)))
                }
                guard let number = try server.users.number(ofEmail: email) else {
                    return failure(.invalidArguments, "share \(recordID) invites \(identity), but no user has this e-mail address")
                }
                name = "_user\(number)"
            } else {
                return failure(.invalidArguments, "share \(recordID) invites a participant with neither a user record name nor an e-mail address")
            }
            guard name != userRecordID.recordName else {
                return failure(.invalidArguments, "share \(recordID) invites its owner, \(user), as a participant")
            }
            guard let number = try server.owner(named: name)?.number else { continue }
            let earlier = before?.participant(userRecordName: name)
            let status: Share.Participant.AcceptanceStatus =
                switch (invited.acceptanceStatus, earlier?.acceptanceStatus) {
                case (.removed, _): .removed
                case (_, .accepted?): .accepted
                default: .pending
                }
            let participant = Share.Participant(
                userIdentity: UserIdentity(userRecordName: name, emailAddress: try server.users.email(ofNumber: number)),
                role: earlier?.role == .publicUser ? .publicUser : .privateUser, permission: invited.permission,
                acceptanceStatus: status)
            if let index = participants.firstIndex(where: { $0.userIdentity.userRecordName == name }) {
                participants[index] = participant
            } else {
                participants.append(participant)
            }
        }
        guard participants.count <= Self.maxShareParticipants else {
            return failure(.tooManyParticipants, "share \(recordID) has \(participants.count) participants, more than \(Self.maxShareParticipants)")
        }
        var normalized = share
        normalized.participants = participants
        var record = normalized.record
        record[Share.FieldKey.url] = .string(
            (before?.url ?? ShareURL(owner: userNumber, secret: ShareURL.newSecret()).url).absoluteString)
        return .success(record)
    }
}
