import LogStore
import SyncModel

/// One committed change in a server database's log. The log of a database is its history:
/// change tokens are offsets in it, and every index of the server is a projection of it.
///
/// Entry kinds 100–199 belong to the server (`ServerEntry.Kind`); payloads are Protocol Buffers
/// messages (Sources/LogSyncServer/Proto/server_log.proto).
package enum ServerEntry: Sendable, Equatable {
    /// A zone was created or saved again. A zone that did not exist (or was deleted) starts a
    /// new incarnation whose number is this entry's offset (F149).
    case zoneSaved(RecordZone)
    /// A zone and all its records were removed, for `reason` (F149, F150).
    case zoneDeleted(RecordZone.ID, reason: ZoneDeletionReason)
    /// A record's full current state, system fields set by the server (F130, F158). Its change
    /// tag is the decimal offset of this entry.
    case recordSaved(Record)
    /// A record was deleted; the type is kept for the change feed (F139).
    case recordDeleted(Record.ID, recordType: Record.RecordType)
    /// A subscription was saved (F155).
    case subscriptionSaved(Subscription)
    /// A subscription was deleted (F155).
    case subscriptionDeleted(Subscription.ID)
    /// A modify request finished: its ID, a fingerprint of its content and its outcome, so a
    /// replay returns the same outcome and changes nothing (F160). `actor` is the number of the
    /// user who sent it when that is not the database's user (a share participant), else 0:
    /// request IDs are kept per user.
    ///
    /// Logs written before `requestOutcome` existed hold this kind; the server writes it no more.
    case requestCompleted(RequestID, fingerprint: UInt32, response: ModifyRecordsResponse, actor: UInt64 = 0)
    /// A modify request finished, as `requestCompleted` records it, but with each saved record named
    /// by the offset of its `recordSaved` entry in the same commit rather than stored a second
    /// time; deletions and failures are kept in full. A replay reads the saved records back from
    /// those entries (`RequestOutcome`, F160).
    case requestOutcome(RequestID, fingerprint: UInt32, outcome: RequestOutcome, actor: UInt64 = 0)
    /// Tombstones of changes up to `horizon` were dropped; older tokens expire (F144).
    case tombstonesCompacted(horizon: LogOffset)
    /// The client change token a device last sent with a modify request touching this zone (F159).
    case clientChangeTokenUpdated(RecordZone.ID, device: DeviceID?, token: [UInt8])
    /// In a participant's shared database: the participant accepted the share `share`, and the
    /// owner's zone (named with the owner's user record name) joined the database, seen up to
    /// the owner's offset `ownerOffset` (F119, F120).
    case sharedZoneJoined(RecordZone.ID, share: Record.ID, ownerOffset: UInt64)
    /// In a participant's shared database: the owner's zone changed, up to `ownerOffset` of the
    /// owner's log (Docs/Protocol.md, "Shared databases").
    case sharedZoneChanged(RecordZone.ID, ownerOffset: UInt64)
    /// In a participant's shared database: the zone is shared with the participant no more; the
    /// database feed reports it deleted (F119, F124).
    case sharedZoneLeft(RecordZone.ID, reason: ShareEndReason)
    /// An asset's content was uploaded for the zone `zone` (as this database names it), checked
    /// against its digest and kept (F134). The first entry of a content stores it: it counts
    /// against the quota, once, until deleted. Each entry grants the content to its zone, whose
    /// records may then reference it. Entries written before contents were granted per zone have
    /// no zone and grant nothing (a zone whose live records reference the content keeps it).
    case assetStored(AssetDigest, size: Int64, zone: RecordZone.ID?)
    /// A cleanup deleted the contents of assets no live record referenced since before its
    /// horizon.
    case assetsDeleted([AssetDigest])
    /// The first request of an operation group reached this database (F69): the group as that
    /// request carried it, the operation (such as `fetchDatabaseChanges`) and the device that
    /// sent it. One entry per group ID and database; later requests of the group write nothing
    /// for it, and a modify request names it on its `requestOutcome`.
    case operationGroupStarted(OperationGroup, firstRequest: String, device: DeviceID?)
    /// The production schema was deployed (F137): from now on the server refuses record types and
    /// fields it does not have. Written to the server's registry log, never to a database's; the
    /// latest one is the whole schema.
    case schemaDeployed(RecordSchema)
    /// In a user's private database: one of the user's devices registered its public key (F129),
    /// whichever of the user's databases the request came through. `userRecordName` is the user's.
    case deviceKeyRegistered(DevicePublicKey)
    /// In a zone owner's private database: wraps of versions of the owner's zones' keys, each for
    /// one recipient device, accepted by one request (F129); zone IDs as the owner names them.
    case zoneKeysSaved([WrappedZoneKey])

    /// The entry kinds of the server's logs.
    package enum Kind {
        package static let zoneSaved: EntryKind = 101
        package static let zoneDeleted: EntryKind = 102
        package static let recordSaved: EntryKind = 103
        package static let recordDeleted: EntryKind = 104
        package static let subscriptionSaved: EntryKind = 105
        package static let subscriptionDeleted: EntryKind = 106
        package static let requestCompleted: EntryKind = 107
        package static let tombstonesCompacted: EntryKind = 108
        package static let clientChangeTokenUpdated: EntryKind = 109
        package static let sharedZoneJoined: EntryKind = 110
        package static let sharedZoneChanged: EntryKind = 111
        package static let sharedZoneLeft: EntryKind = 112
        package static let requestOutcome: EntryKind = 113
        package static let assetStored: EntryKind = 114
        package static let assetsDeleted: EntryKind = 115
        package static let operationGroupStarted: EntryKind = 116
        /// In the registry's log (F137).
        package static let schemaDeployed: EntryKind = 117
        package static let deviceKeyRegistered: EntryKind = 118
        package static let zoneKeysSaved: EntryKind = 119

        /// Every kind of a database log (and `schemaDeployed`, of the registry's), with its name (as in `logtool`), in kind order.
        package static let named: [(kind: EntryKind, name: String)] = [
            (zoneSaved, "zoneSaved"), (zoneDeleted, "zoneDeleted"), (recordSaved, "recordSaved"),
            (recordDeleted, "recordDeleted"), (subscriptionSaved, "subscriptionSaved"),
            (subscriptionDeleted, "subscriptionDeleted"), (requestCompleted, "requestCompleted"),
            (tombstonesCompacted, "tombstonesCompacted"), (clientChangeTokenUpdated, "clientChangeTokenUpdated"),
            (sharedZoneJoined, "sharedZoneJoined"), (sharedZoneChanged, "sharedZoneChanged"),
            (sharedZoneLeft, "sharedZoneLeft"), (requestOutcome, "requestOutcome"), (assetStored, "assetStored"),
            (assetsDeleted, "assetsDeleted"), (operationGroupStarted, "operationGroupStarted"),
            (schemaDeployed, "schemaDeployed"),
            (deviceKeyRegistered, "deviceKeyRegistered"), (zoneKeysSaved, "zoneKeysSaved"),
        ]

        /// The kinds of `named` as ranges, such as `101–115, 118–119`, for messages.
        package static var rangesDescription: String {
            var runs: [(first: UInt16, last: UInt16)] = []
            for kind in named.map(\.kind.rawValue).sorted() {
                if let last = runs.last?.last, kind == last + 1 {
                    runs[runs.count - 1].last = kind
                } else {
                    runs.append((kind, kind))
                }
            }
            return runs.map { $0.first == $0.last ? "\($0.first)" : "\($0.first)–\($0.last)" }.joined(separator: ", ")
        }

        /// The kinds that complete a modify request: `requestCompleted` (older logs) and
        /// `requestOutcome`.
        package static func completesRequest(_ kind: EntryKind) -> Bool {
            kind == requestCompleted || kind == requestOutcome
        }
    }
}

/// The outcome of a modify request as `ServerEntry.requestOutcome` keeps it (F160): the saved
/// records by reference, everything else in full.
package struct RequestOutcome: Sendable, Equatable {
    /// A record the request saved: its ID and the offset of its `recordSaved` entry, which holds the
    /// record exactly as the response returned it (its change tag is that offset).
    package struct Saved: Sendable, Hashable {
        package var recordID: Record.ID
        package var offset: LogOffset

        package init(_ recordID: Record.ID, at offset: LogOffset) {
            self.recordID = recordID
            self.offset = offset
        }
    }

    /// The saved records, in the request's order.
    package var saved: [Saved]
    /// Every other result of the response: the deletions, and the saves that failed.
    package var others: ModifyRecordsResponse
    /// The ID of the operation group the request came with (F69), or `nil`.
    package var operationGroupID: String?

    package init(
        saved: [Saved] = [], others: ModifyRecordsResponse = ModifyRecordsResponse(), operationGroupID: String? = nil
    ) {
        self.saved = saved
        self.others = others
        self.operationGroupID = operationGroupID
    }
}

/// Why a shared zone left a participant's shared database (F124).
package enum ShareEndReason: Int, Sendable, Hashable, CaseIterable {
    /// The participant left: they deleted the share from their shared database.
    case left = 1
    /// The owner removed the participant from the share.
    case removed = 2
    /// The owner deleted the share, or the root record of a hierarchy share.
    case shareDeleted = 3
    /// The owner's zone was deleted, purged or reset.
    case zoneDeleted = 4
}
