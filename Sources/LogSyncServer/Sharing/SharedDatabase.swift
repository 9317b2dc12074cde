import Foundation
import SyncModel

/// A participant's shared database, whose requests are decided in the owners' databases
/// (F119–F122; Docs/Protocol.md, "Sharing"): a record goes to its zone's owner's database,
/// decided there with the participant as the author, and a zone's changes are read from the
/// owner's feed as far as the shares let the participant see them.
struct SharedDatabase {
    /// The participant's shared database.
    let database: ServerDatabase
    /// The registry, where a zone's owner is found by the owner name of its ID, and the
    /// owners' databases.
    let context: ServerContext

    init(_ database: ServerDatabase) {
        self.database = database
        context = database.context
    }

    /// `modifyRecords` in the shared database: each record goes to its zone's owner's database,
    /// decided there with the participant as the author (F121, F122); a zone not shared with the
    /// user fails its items with `zoneNotFound`, whatever the owner holds.
    func modifyRecords(_ request: ModifyRecordsRequest, from device: DeviceID?) throws -> ModifyRecordsResponse {
        try request.validate()
        let user = database.user
        let actor = try context.users.actor(user)
        var response = ModifyRecordsResponse()
        var owners: [UserID] = []
        var requests: [UserID: ModifyRecordsRequest] = [:]
        func route(_ recordID: Record.ID) throws -> UserID? {
            if let error = ServerDatabase.violation(recordID.validate) {
                throw error.with(requestID: request.requestID)
            }
            guard let owner = try context.users.owner(named: recordID.zoneID.ownerName), owner.user != user else {
                throw ShareRules.notShared(recordID.zoneID, with: user, item: .record(recordID)).with(
                    requestID: request.requestID)
            }
            if requests[owner.user] == nil {
                owners.append(owner.user)
                requests[owner.user] = ModifyRecordsRequest(
                    recordsToSave: [], recordIDsToDelete: [], savePolicy: request.savePolicy,
                    atomically: request.atomically,
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
            let answer = try context.database(owner, .private).modifyRecords(
                requests[owner]!, from: device, actor: actor)
            response.saveResults.merge(answer.saveResults) { _, new in new }
            response.deleteResults.merge(answer.deleteResults) { _, new in new }
        }
        return response
    }

    /// `fetchZoneChanges` in the shared database: the owner's zone feed, as far as the shares let
    /// the user see it (F119).
    func fetchZoneChanges(_ request: FetchZoneChangesRequest, for device: DeviceID?) throws -> FetchZoneChangesResponse
    {
        try request.validate()
        let user = database.user
        guard let owner = try context.users.owner(named: request.zoneID.ownerName), owner.user != user else {
            throw ShareRules.notShared(request.zoneID, with: user)
        }
        return try context.database(owner.user, .private).fetchZoneChanges(
            request, for: device, viewer: try context.users.actor(user))
    }
}
