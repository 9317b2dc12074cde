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
struct ServerHistory: Sendable {
    enum Change: Sendable, Hashable {
        case saved(Record.ID, String)
        case deleted(Record.ID)
        case zoneDeleted(RecordZone.ID)
    }

    private(set) var changes: [UserID: [Change]] = [:]
    /// The request IDs answered so far, per user: a later answer to one of them is the server
    /// replaying its first answer (a resend, a duplicate, a retry under the same ID), which
    /// applied nothing new.
    private var answered: [UserID: Set<String>] = [:]

    /// Saves acknowledged, over every user.
    var savesAcknowledged: Int {
        changes.values.reduce(0) { count, changes in
            count + changes.filter { if case .saved = $0 { true } else { false } }.count
        }
    }

    mutating func record(_ response: ModifyRecordsResponse, to requestID: RequestID?, of user: UserID) {
        if let requestID, !answered[user, default: []].insert(requestID.rawValue).inserted { return }
        for (id, result) in response.saveResults.sorted(by: { $0.key.description < $1.key.description }) {
            if case .success(let record) = result { changes[user, default: []].append(.saved(id, Simulation.title(of: record))) }
        }
        for (id, result) in response.deleteResults.sorted(by: { $0.key.description < $1.key.description }) {
            if case .success = result { changes[user, default: []].append(.deleted(id)) }
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
