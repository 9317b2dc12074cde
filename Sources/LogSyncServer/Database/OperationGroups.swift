import LogStore
import Synchronization
import SyncModel

// Operation groups (F69): each request may name the group it belongs to; the database it is sent
// to writes one `operationGroupStarted` entry per group, the first time a request of the group
// reaches it, and nothing for the group's later requests (Docs/Protocol.md, "Operation groups").

extension ServerDatabase {
    /// Notes the operation group a request sent to this database came with: checks it, and the
    /// first time this database sees its ID appends an `operationGroupStarted` entry. A group seen
    /// before costs a lookup in memory, or at worst one read.
    ///
    /// - Parameters:
    ///   - group: The request's group, or `nil` (then nothing happens).
    ///   - request: The operation, such as `fetchDatabaseChanges`, recorded for the group's first
    ///     request.
    ///   - device: The device that sent the request.
    ///   - requestID: The request's ID, which an error names.
    /// - Throws: ``SyncError`` `invalidArguments` naming the field for a malformed group (an empty
    ///   or over-long ID, an over-long name, a negative quantity); storage errors.
    func noteOperationGroup(_ group: OperationGroup?, request: String, device: DeviceID?, requestID: RequestID? = nil) throws {
        guard let group else { return }
        try group.validate(requestID: requestID)
        let id = group.operationGroupID
        if knownOperationGroups.withLock({ $0.contains(id) }) { return }
        let key = IndexKey.operationGroup(id)
        if try read({ try $0.index.value(forKey: key, in: "state") }) == nil {
            _ = try write { snapshot, _ -> (entries: [ServerEntry], result: Void) in
                // Another request of the group may have noted it since the read.
                guard try snapshot.index.value(forKey: key, in: "state") == nil else { return ([], ()) }
                return ([.operationGroupStarted(group, firstRequest: request, device: device)], ())
            }
        }
        // Once logged, a group stays logged: remembering it is right on every node of a storage.
        knownOperationGroups.withLock { known in
            if known.count >= Self.knownOperationGroupLimit { known.removeAll(keepingCapacity: true) }
            known.insert(id)
        }
    }

    /// How many group IDs a database remembers in memory before it forgets them all.
    static let knownOperationGroupLimit = 1024
}

extension SyncServer {
    /// ``ServerDatabase/noteOperationGroup(_:request:device:requestID:)`` for the database of
    /// `user` and `scope`: for requests that do not run through `InProcessDatabase.perform` (asset
    /// transfers).
    func noteOperationGroup(
        _ group: OperationGroup?, request: String, user: UserID, scope: DatabaseScope, device: DeviceID?
    ) async throws {
        guard let group else { return }
        try await storage.perform { try self.store(user, scope).noteOperationGroup(group, request: request, device: device) }
    }
}
