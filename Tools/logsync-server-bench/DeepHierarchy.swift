// The deep-hierarchy figure of logsync-server-bench (F123): a chain of records as deep as the
// limit (`Limits.maxHierarchyDepth`), its top shared with a participant, listed whole by the
// owner and by the participant. The index keeps each record's shared hierarchy, so the
// participant's listing costs about what the owner's does, not a walk of each record's parent
// chain.
import BenchSupport
import Foundation
import LogStore
import LogSyncServer
import SyncModel

/// The times of one listing of the chain's zone from no token, owner and participant.
struct DeepHierarchyResult {
    let records: Int
    let owner: Samples
    let participant: Samples
}

/// Builds the chain in a server of its own under `scratch`, then lists its zone `repetitions`
/// times as its owner and as the participant, alternating.
func deepHierarchy(_ scratch: ScratchDirectory, repetitions: Int) async throws -> DeepHierarchyResult {
    let directory = scratch.subdirectory("deep-hierarchy")
    defer { scratch.remove(directory) }
    let server = try SyncServer(.init(directory: directory, durability: .fast))
    defer { server.shutdown() }
    try server.admin.registerUser("owner", emailAddress: "owner@example.com")
    try server.admin.registerUser("participant", emailAddress: "participant@example.com")
    let owner = server.database(for: "owner", device: "bench")
    let participant = server.database(for: "participant", scope: .shared, device: "bench")
    let zoneID = RecordZone.ID(zoneName: "Chain")
    _ = try await owner.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zoneID)]))

    // r0 … r<limit>: r<i> has i ancestors, the last one the most the limit allows.
    let depth = Limits.maxHierarchyDepth
    var chain: [Record] = []
    for index in 0...depth {
        var record = Record(recordType: "Node", recordID: Record.ID(recordName: "r\(index)", zoneID: zoneID))
        record["title"] = .string("node \(index)")
        if index > 0 {
            record.parent = Record.Reference(recordID: Record.ID(recordName: "r\(index - 1)", zoneID: zoneID))
        }
        chain.append(record)
    }
    for start in stride(from: 0, to: chain.count, by: Limits.maxItemsPerRequest) {
        let response = try await owner.modifyRecords(
            ModifyRecordsRequest(
                recordsToSave: Array(chain[start..<min(start + Limits.maxItemsPerRequest, chain.count)]),
                recordIDsToDelete: []))
        for case .failure(let failure) in response.saveResults.values {
            throw BenchError("saving the chain: \(failure)")
        }
    }
    var share = Share(
        rootRecordID: Record.ID(recordName: "r0", zoneID: zoneID),
        shareID: Record.ID(recordName: "chain-share", zoneID: zoneID))
    share.addParticipant(Share.Participant(emailAddress: "participant@example.com", permission: .readWrite))
    let saved = try await owner.modifyRecords(
        ModifyRecordsRequest(recordsToSave: [share.record], recordIDsToDelete: []))
    guard case .success(let record)? = saved.saveResults[share.recordID], let url = try Share(record: record).url else {
        throw BenchError("saving the share: \(String(describing: saved.saveResults[share.recordID]))")
    }
    let accepted = try await participant.acceptShares(AcceptSharesRequest(shareURLs: [url]))
    if case .failure(let error)? = accepted.results[url] { throw BenchError("accepting the share: \(error)") }
    let sharedZoneID = RecordZone.ID(zoneName: "Chain", ownerName: try await owner.currentUserRecordID().recordName)

    /// Lists a zone from no token to its end; returns the seconds and the records listed.
    func list(_ database: InProcessDatabase, _ zoneID: RecordZone.ID) async throws -> (Double, Int) {
        var token: ZoneChangeToken?
        var records = 0
        let started = ContinuousClock.now
        while true {
            let page = try await database.fetchZoneChanges(zoneID: zoneID, since: token)
            records += page.modifications.count
            token = page.changeToken
            if !page.moreComing { break }
        }
        return ((ContinuousClock.now - started).seconds, records)
    }
    var ownerSamples = Samples()
    var participantSamples = Samples()
    for _ in 0..<repetitions {
        let (ownerSeconds, ownerRecords) = try await list(owner, zoneID)
        let (participantSeconds, participantRecords) = try await list(participant, sharedZoneID)
        // The share, and every record of the chain, the deepest one too.
        guard ownerRecords == depth + 2, participantRecords == depth + 2 else {
            throw BenchError("listed \(ownerRecords) records as the owner, \(participantRecords) as the participant")
        }
        ownerSamples.values.append(ownerSeconds)
        participantSamples.values.append(participantSeconds)
    }
    return DeepHierarchyResult(records: depth + 2, owner: ownerSamples, participant: participantSamples)
}

extension ServerBench {
    /// Times of the deep-hierarchy listings.
    static let deepHierarchyRepetitions = 20

    /// Measures and prints the deep-hierarchy figure.
    func measureDeepHierarchy(in scratch: ScratchDirectory) async throws {
        emit(
            "deep hierarchy (F123): a chain r0 … r\(Limits.maxHierarchyDepth) (each record the parent of the next, "
                + "\(Limits.maxHierarchyDepth) ancestors at the bottom, the limit), r0 shared with a read-write participant; "
                + "the zone listed from no token, \(Self.deepHierarchyRepetitions) times each, owner and participant alternating"
        )
        let result = try await deepHierarchy(scratch, repetitions: Self.deepHierarchyRepetitions)
        emit(
            "  \(grouped(result.records)) records listed: owner median \(ms(result.owner.median)) (p99 \(ms(result.owner.p99))), "
                + "participant median \(ms(result.participant.median)) (p99 \(ms(result.participant.p99))); "
                + "participant / owner \(ratio(result.participant.median / result.owner.median))")
        emit("")
    }
}
