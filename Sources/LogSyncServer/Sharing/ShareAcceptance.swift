import Foundation
import LogStore
import SyncModel

/// A user joining shares by their URLs (F119, F120; Docs/Protocol.md, "Sharing"): a share's
/// metadata as the user would join it, and the acceptance, which adds the zone to the user's
/// shared database and records it in the owner's share.
struct ShareAcceptance {
    /// The owners' databases and the user's shared database, the registry, the clock and the
    /// sharing lock.
    let context: ServerContext
    /// The user who joins.
    let user: UserID

    /// The share at `url`, as `user` may join it: where it is, the share, and the user's
    /// participation (the owner's for the owner; a new public participant's for a public share).
    private struct Located {
        let owner: ServerDatabase
        let zoneID: RecordZone.ID
        let lastChange: UInt64
        let share: Share
        let participant: Share.Participant
    }

    private func locate(
        _ url: URL, _ read: (ServerDatabase, (DatabaseSnapshot) throws -> Located) throws -> Located
    ) throws -> Located {
        guard let parts = ShareURL(url) else {
            throw SyncError(
                .invalidArguments,
                "\(quoted(url.absoluteString)) is not a share URL: share URLs are \(ShareURL.scheme)://share/<owner>/<32 hexadecimal digits>"
            )
        }
        let unknown = SyncError(.unknownItem, "there is no share at \(quoted(url.absoluteString)) open to \(user)")
        guard let ownerUser = try context.users.user(number: parts.owner) else { throw unknown }
        let owner = try context.database(ownerUser, .private)
        let me = try context.users.actor(user).recordName
        return try read(owner) { snapshot in
            guard let bytes = try snapshot.index.value(forKey: IndexKey.shareSecret(parts.secret), in: "shareURLs")
            else { throw unknown }
            let location = try ShareLocation(decoding: bytes)
            let zoneID = IndexKey.zoneID(from: location.zone)
            guard let zone = try snapshot.zone(zoneID), zone.isLive,
                let state = try snapshot.record(
                    Record.ID(recordName: location.share, zoneID: zoneID), incarnation: zone.incarnation),
                !state.isTombstone
            else { throw unknown }
            let share = Share(validated: try snapshot.savedRecord(at: state.offset))
            guard share.url == parts.url else { throw unknown }
            let participant: Share.Participant
            if me == owner.userRecordID.recordName {
                participant =
                    share.owner
                    ?? Share.Participant(
                        userIdentity: UserIdentity(userRecordName: me), role: .owner, permission: .readWrite,
                        acceptanceStatus: .accepted)
            } else if let listed = share.participant(userRecordName: me) {
                guard listed.acceptanceStatus != .removed, listed.permission != .none else { throw unknown }
                participant = listed
            } else if share.publicPermission != .none {
                participant = Share.Participant(
                    userIdentity: UserIdentity(
                        userRecordName: me,
                        emailAddress: try context.users.email(ofNumber: try context.users.number(of: user))),
                    role: .publicUser, permission: share.publicPermission, acceptanceStatus: .pending)
            } else {
                throw unknown
            }
            return Located(
                owner: owner, zoneID: zoneID, lastChange: zone.lastChange, share: share, participant: participant)
        }
    }

    /// The share as a participant sees it: its zone named with the owner's record name (F120).
    private func participantsView(_ located: Located) -> Share {
        Share(
            validated: located.share.record.renamingZone(
                located.zoneID, to: located.owner.ownership.ownerSpelling(located.zoneID)))
    }

    /// The metadata of the share at `url`, as `user` would join it.
    ///
    /// - Throws: `SyncError`: `invalidArguments` for a URL that is not a share URL, `unknownItem`
    ///   for a share that does not exist or is not open to `user`.
    func metadata(url: URL) throws -> Share.Metadata {
        let located = try locate(url) { owner, body in try owner.read(body) }
        let share = participantsView(located)
        return Share.Metadata(
            share: share, hierarchicalRootRecordID: share.rootRecordID,
            ownerIdentity: share.owner?.userIdentity
                ?? UserIdentity(userRecordName: located.owner.userRecordID.recordName),
            participantRole: located.participant.role, participantPermission: located.participant.permission,
            participantStatus: located.participant.acceptanceStatus)
    }

    /// Accepts shares for `user`: each zone joins the user's shared database (F119), and the
    /// owner's share records the acceptance. A share that cannot be accepted fails alone and
    /// changes nothing.
    func accept(_ request: AcceptSharesRequest, device: DeviceID?) throws -> AcceptSharesResponse {
        try request.validate()
        var response = AcceptSharesResponse()
        for url in request.shareURLs {
            do {
                response.results[url] = .success(try accept(url, device: device))
            } catch let error as SyncError {
                response.results[url] = .failure(error)
            }
        }
        return response
    }

    private func accept(_ url: URL, device: DeviceID?) throws -> Share {
        let located = try locate(url) { owner, body in try owner.read(body) }
        if located.participant.role == .owner { return participantsView(located) }
        let actor = try context.users.actor(user)
        let shared = try context.database(user, .shared)
        let zoneID = located.owner.ownership.ownerSpelling(located.zoneID)
        // The participant's database first: if the owner's commit then fails, propagation finds
        // the zone not shared and removes it again; the other order could lose the zone.
        try context.databases.withSharingLock(of: shared.userNumber) {
            let joined = try shared.read { snapshot in
                try snapshot.index.value(forKey: IndexKey.zone(zoneID), in: "sharedZones") != nil
            }
            if !joined {
                let (_, offsets) = try shared.write { _, _ in
                    (
                        [
                            ServerEntry.sharedZoneJoined(
                                zoneID, share: Record.ID(recordName: located.share.recordID.recordName, zoneID: zoneID),
                                ownerOffset: located.lastChange)
                        ], ()
                    )
                }
                shared.notify(changedZones: [zoneID], through: offsets.last!, from: device)
            }
        }
        let now = context.now()
        let owner = located.owner
        let accepted: Located
        let offsets: Range<LogOffset>
        do {
            (accepted, offsets) = try owner.write { snapshot, next -> (entries: [ServerEntry], result: Located) in
                let current = try locate(url) { _, body in try body(snapshot) }
                guard current.participant.acceptanceStatus != .accepted else { return ([], current) }
                var share = current.share
                var participant = current.participant
                participant.acceptanceStatus = .accepted
                share.addParticipant(participant)
                var record = share.record
                record.applySystemFields(
                    RecordModification.systemFields(previous: current.share.record, modifier: actor.recordID, now: now)
                        .with(tag: String(next)))
                return (
                    [.recordSaved(record)],
                    Located(
                        owner: owner, zoneID: current.zoneID, lastChange: next, share: Share(validated: record),
                        participant: participant)
                )
            }
        } catch {
            try? SharePropagation(context: context).propagateShares(to: user, from: device)
            throw error
        }
        if let last = offsets.last {
            owner.committed(
                changedZones: [accepted.zoneID], through: last, from: device, actor: actor,
                affected: try owner.shareRules.participantNumbers(of: accepted.share))
        }
        return participantsView(accepted)
    }
}
