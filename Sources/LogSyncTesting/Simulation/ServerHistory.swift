import LogSyncServer
import SyncModel

/// What the server answered that it had applied, per user, in the order it answered: the
/// simulation's record of every acknowledged change, whoever received the answer (an answer
/// the network then dropped counts too: the server did apply it). An answer the server replays
/// for a request ID it has answered before is not counted again: it applied nothing new.
///
/// Replaying it gives the notes the server must hold at the end (``expectedNotes(of:)``); a
/// difference means the server lost or invented a change it had acknowledged, for example
/// across a restart.
///
/// A participant's change to a shared zone is the owner's: it counts in the owner's history,
/// in the zone as the owner names it, and in ``acknowledged`` under the participant. Shares
/// are not notes: saves and deletions of share records (``Simulation/isShareName(_:)``) are
/// left out.
struct ServerHistory: Sendable {
    enum Change: Sendable, Hashable {
        case saved(Record.ID, String)
        case deleted(Record.ID)
        case zoneDeleted(RecordZone.ID)
    }

    private(set) var changes: [UserID: [Change]] = [:]
    /// How many record changes the server acknowledged, by the user who made them (the owner,
    /// or a participant).
    private(set) var acknowledged: [UserID: Int] = [:]
    /// The request IDs answered with at least one change applied, per user who sent them: a
    /// later answer to one of them is the server replaying its first answer (a resend, a
    /// duplicate, a retry under the same ID), which applied nothing new.
    private var answered: [UserID: Set<String>] = [:]

    /// Saves acknowledged, over every user.
    var savesAcknowledged: Int {
        changes.values.reduce(0) { count, changes in
            count + changes.filter { if case .saved = $0 { true } else { false } }.count
        }
    }

    /// Records the changes `author` made in one answered `modifyRecords`.
    ///
    /// - Parameter owners: For a participant's request to their shared database, the owner of
    ///   each zone by the owner name in its ID; empty for a request to the author's own database.
    mutating func record(
        _ response: ModifyRecordsResponse, to requestID: RequestID?, by author: UserID, owners: [String: UserID] = [:]
    ) {
        // Only an answer that applied something is one the server keeps and replays: a refusal
        // of every item may write nothing (a participant whom no share lets through), and the
        // same request sent again is then decided afresh, and may apply.
        let applied =
            response.saveResults.values.contains { if case .success = $0 { true } else { false } }
            || response.deleteResults.values.contains { if case .success = $0 { true } else { false } }
        guard applied else { return }
        if let requestID, !answered[author, default: []].insert(requestID.rawValue).inserted { return }
        /// The owner of a record and its ID as the owner names it.
        func owned(_ id: Record.ID) -> (UserID, Record.ID)? {
            guard !owners.isEmpty else { return (author, id) }
            guard let owner = owners[id.zoneID.ownerName] else { return nil }
            return (owner, Record.ID(recordName: id.recordName, zoneID: RecordZone.ID(zoneName: id.zoneID.zoneName)))
        }
        for (id, result) in response.saveResults.sorted(by: { $0.key.description < $1.key.description }) {
            guard case .success(let record) = result, record.recordType != Share.recordType, let (owner, id) = owned(id)
            else { continue }
            changes[owner, default: []].append(.saved(id, Simulation.title(of: record)))
            acknowledged[author, default: 0] += 1
        }
        for (id, result) in response.deleteResults.sorted(by: { $0.key.description < $1.key.description }) {
            guard case .success = result, !Simulation.isShareName(id.recordName), let (owner, id) = owned(id)
            else { continue }
            changes[owner, default: []].append(.deleted(id))
            acknowledged[author, default: 0] += 1
        }
    }

    mutating func record(_ response: ModifyZonesResponse, of user: UserID) {
        for (id, result) in response.deleteResults.sorted(by: { $0.key.description < $1.key.description }) {
            if case .success = result { changes[user, default: []].append(.zoneDeleted(id)) }
        }
    }

    /// The notes `user`'s database must hold after every acknowledged change.
    func expectedNotes(of user: UserID) -> [Record.ID: String] {
        var notes: [Record.ID: String] = [:]
        for change in changes[user] ?? [] {
            switch change {
            case .saved(let id, let title): notes[id] = title
            case .deleted(let id): notes[id] = nil
            case .zoneDeleted(let zoneID): notes = notes.filter { $0.key.zoneID != zoneID }
            }
        }
        return notes
    }
}
