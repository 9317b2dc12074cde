import Foundation
import LogStore
import SyncModel

/// Brings participants' shared databases up to date with their owners' logs (F119–F124;
/// Docs/Protocol.md, "Sharing").
///
/// The records of a shared zone stay in the owner's log. A participant's shared database keeps
/// its own log, whose offsets are its database tokens: an entry when the participant joins a
/// zone (`ShareAcceptance`), one per propagation of changes of the owner's zone (coalesced), and
/// one when the zone leaves it. Propagation runs after each commit to a shared zone, and again at
/// every read of the participant's database feed, so a change the first pass missed (a crash
/// between the two commits) is never lost: the owner's log is the truth.
struct SharePropagation {
    /// The databases of owners and participants, the registry, the sharing lock.
    let context: ServerContext

    /// Brings `participant`'s shared database up to date with the owners' logs: an entry for each
    /// shared zone that changed since its last one, and a zone deletion for each zone no longer
    /// shared with them (with `reasons`' reason when given). Hints the participant's devices but
    /// `device`. Idempotent; serialised with every other propagation to and acceptance by `participant`, on any node.
    func propagateShares(
        to participant: UserID, reasons: [RecordZone.ID: ShareEndReason] = [:], from device: DeviceID? = nil
    ) throws {
        let shared = try context.database(participant, .shared)
        let recordName = try context.users.actor(participant).recordName
        try context.databases.withSharingLock(of: shared.userNumber) {
            let zones = try shared.read { snapshot in try snapshot.sharedZones() }
            var entries: [ServerEntry] = []
            for (zoneID, state) in zones {
                let verdict: SharedZoneVerdict
                if let owner = try context.users.owner(named: zoneID.ownerName) {
                    let ownerStore = try context.database(owner.user, .private)
                    verdict = try ownerStore.read { snapshot in
                        try snapshot.verdict(
                            on: RecordZone.ID(zoneName: zoneID.zoneName), for: recordName, share: state.share)
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

    /// After a commit of `owner` (a private database): brings the shared database of every
    /// participant of the changed zones, and of `affected`, up to date (F121, F124); the
    /// participant `actor` who made the commit gets no hint on `device`.
    ///
    /// Propagation is also done at every read of a participant's feed: a failure here delays
    /// it, loses nothing.
    func propagate(
        after owner: ServerDatabase, changedZones: Set<RecordZone.ID>, from device: DeviceID?, actor: ShareActor?,
        affected: Set<UInt64>, reasons: [UInt64: ShareEndReason]
    ) {
        var numbers = affected
        let rules = owner.shareRules
        if let live = try? owner.read({ snapshot in
            try changedZones.reduce(into: Set<UInt64>()) {
                $0.formUnion(try rules.participantNumbers(ofZone: $1, snapshot))
            }
        }) {
            numbers.formUnion(live)
        }
        // Timed when there are participants to bring up to date.
        let started = numbers.isEmpty ? nil : ContinuousClock.now
        defer {
            if let started {
                context.metrics.sharingPropagation.record(duration: ContinuousClock.now - started)
            }
        }
        for number in numbers.sorted() {
            guard let participant = try? context.users.user(number: number), participant != owner.user else { continue }
            let reasonByZone =
                reasons[number].map { reason in
                    Dictionary(uniqueKeysWithValues: changedZones.map { (owner.ownership.ownerSpelling($0), reason) })
                } ?? [:]
            try? propagateShares(to: participant, reasons: reasonByZone, from: actor?.number == number ? device : nil)
        }
    }
}

extension ServerEntry {
    /// The zone of a shared-database entry.
    var sharedZoneID: RecordZone.ID? {
        switch self {
        case .sharedZoneJoined(let zoneID, _, _), .sharedZoneChanged(let zoneID, _), .sharedZoneLeft(let zoneID, _):
            zoneID
        default: nil
        }
    }
}
