import LogStore
import SyncModel
import Synchronization

/// The operation groups of one database (F69): each request may name the group it belongs to;
/// the database it is sent to writes one `operationGroupStarted` entry per group, the first time
/// a request of the group reaches it, and nothing for the group's later requests
/// (Docs/Protocol.md, "Operation groups").
///
/// An open database keeps one, which remembers the groups its log is known to have started, so
/// that the later requests of a group skip the look-up.
final class OperationGroups: Sendable {
    /// How many group IDs a database remembers in memory before it forgets them all.
    static let knownLimit = 1024

    private let known = Mutex<Set<String>>([])

    /// Notes the operation group a request sent to `database` came with: checks it, and the first
    /// time the database sees its ID appends an `operationGroupStarted` entry. A group seen
    /// before costs a lookup in memory, or at worst one read.
    ///
    /// - Parameters:
    ///   - group: The request's group, or `nil` (then nothing happens).
    ///   - request: The operation, such as `fetchDatabaseChanges`, recorded for the group's first
    ///     request.
    ///   - device: The device that sent the request.
    ///   - requestID: The request's ID, which an error names.
    ///   - database: The database the request was sent to, whose groups these are.
    /// - Throws: ``SyncError`` `invalidArguments` naming the field for a malformed group (an empty
    ///   or over-long ID, an over-long name, a negative quantity); storage errors.
    func note(
        _ group: OperationGroup?, request: String, device: DeviceID?, requestID: RequestID? = nil,
        in database: ServerDatabase
    ) throws {
        guard let group else { return }
        try group.validate(requestID: requestID)
        let id = group.operationGroupID
        if known.withLock({ $0.contains(id) }) { return }
        let key = IndexKey.operationGroup(id)
        if try database.read({ try $0.index.value(forKey: key, in: "state") }) == nil {
            _ = try database.write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
                // Another request of the group may have noted it since the read.
                guard try snapshot.index.value(forKey: key, in: "state") == nil else { return ([], ()) }
                return ([.operationGroupStarted(group, firstRequest: request, device: device)], ())
            }
        }
        // Once logged, a group stays logged: remembering it is right on every node of a storage.
        known.withLock { known in
            if known.count >= Self.knownLimit { known.removeAll(keepingCapacity: true) }
            known.insert(id)
        }
    }
}
