// Phase 4 of logsync-store-bench: sharing's propagation with one lock per participant against
// one lock for the whole storage, on one node and on two.
//
// O owners each share a zone with P participants (owner i with participants i … i+P−1, round
// the ring of O participants, so every participant has P owners); every participant accepts.
// Then every owner commits R requests of 10 records to their shared zone, all owners at once
// through the nodes (owner i on node i mod N). Each commit brings its P participants' shared
// databases up to date before it is answered (F121), so the run's records propagated per second
// are O × R × 10 × P over its seconds. After the run every participant's shared database is
// checked to name each of its owners' zones.
import BenchSupport
import Foundation
import LogSyncPostgres
import LogSyncServer
import PostgresProcess
import SyncModel

extension StoreBench {
    struct SharingResult {
        var seconds: Double
        var commits: Samples
    }

    /// The sharing phase: whole-storage lock against per-participant, on one node and on two.
    func measureSharing(on postgres: PostgresTestServer, scratch: ScratchDirectory) async throws {
        emit(
            "sharing: \(ownerCount) owners, each sharing a zone with \(participantsPerOwner) of \(ownerCount) participants; "
                + "every owner commits \(sharingRounds) requests of 10 records at once (PostgreSQL, fsync on)")
        var rows: [[String]] = [
            [
                "lock", "nodes", "seconds", "records propagated/s", "commit p50", "commit p99",
                "vs whole storage, 1 node",
            ]
        ]
        var baseline = 0.0
        for lock in [SharingLockScope.wholeStorage, .perParticipant] {
            for nodes in [1, 2] {
                emit("  \(lock.label), \(nodes) node\(nodes == 1 ? "" : "s")…")
                let result = try await sharingRun(lock: lock, nodes: nodes, on: postgres, scratch: scratch)
                let perSecond = Double(ownerCount * sharingRounds * 10 * participantsPerOwner) / result.seconds
                if baseline == 0 { baseline = perSecond }
                rows.append([
                    lock.label, "\(nodes)", String(format: "%.2f", result.seconds), grouped(Int(perSecond)),
                    ms(result.commits.median), ms(result.commits.p99), ratio(perSecond / baseline),
                ])
            }
        }
        emit()
        emit(table(rows))
        emit()
    }

    /// One run of the sharing phase on a new database.
    func sharingRun(
        lock: SharingLockScope, nodes: Int, on postgres: PostgresTestServer, scratch: ScratchDirectory
    ) async throws -> SharingResult {
        let url = try await postgres.createDatabase()
        var servers: [SyncServer] = []
        for index in 0..<nodes {
            let storage = try await PostgresStorage.open(url: url, connections: 16, logger: Self.quiet)
            var configuration = SyncServer.Configuration(directory: scratch.subdirectory("sharing-node\(index)"))
            configuration.sharingLock = lock
            servers.append(try SyncServer(configuration, storage: storage))
        }
        defer { for server in servers { server.shutdown() } }
        let owners = ownerCount
        let perOwner = participantsPerOwner
        func participant(_ index: Int) -> UserID { UserID(rawValue: "participant\(index % owners)") }
        func owner(_ index: Int) -> UserID { UserID(rawValue: "owner\(index)") }
        let zone = RecordZone.ID(zoneName: "Shared")
        for index in 0..<owners {
            try servers[0].registerUser(participant(index), emailAddress: "participant\(index)@example.com")
        }
        // The shares, then their acceptance.
        var urls: [(participant: UserID, url: URL)] = []
        for index in 0..<owners {
            let database = servers[index % nodes].database(for: owner(index), device: "owner")
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            var share = Share(recordZoneID: zone)
            for offset in 0..<perOwner {
                share.addParticipant(
                    Share.Participant(
                        emailAddress: "\(participant(index + offset).rawValue)@example.com", permission: .readWrite))
            }
            let saved = try await database.modifyRecords(saving: [share.record], deleting: [])
            guard let record = try saved.saveResults[share.recordID]?.get(), let url = try Share(record: record).url
            else { throw BenchError("owner \(index): the share was not saved") }
            for offset in 0..<perOwner { urls.append((participant(index + offset), url)) }
        }
        for (index, (user, url)) in urls.enumerated() {
            let response = try await servers[index % nodes].database(for: user, scope: .shared, device: "participant")
                .acceptShares(AcceptSharesRequest(shareURLs: [url]))
            guard (try? response.results[url]?.get()) != nil else { throw BenchError("\(user) did not accept") }
        }

        let commits = Collected()
        let rounds = sharingRounds
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<owners {
                let database = servers[index % nodes].database(for: owner(index), device: "owner")
                group.addTask {
                    for round in 0..<rounds {
                        let batch = (0..<10).map { Self.record("o\(index)r\(round)n\($0)", size: 300, in: zone) }
                        let sent = ContinuousClock.now
                        let response = try await database.modifyRecords(saving: batch, deleting: [])
                        commits.add(seconds(since: sent))
                        guard response.saveResults.values.allSatisfy({ (try? $0.get()) != nil }) else {
                            throw BenchError("owner \(index): a save failed")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = seconds(since: started)
        // Every participant's shared database names its owners' zones.
        for index in 0..<owners {
            let zones = try await servers[0].database(for: participant(index), scope: .shared, device: "check")
                .fetchAllZones()
            guard zones.count == perOwner else {
                throw BenchError("\(participant(index)) sees \(zones.count) shared zones of \(perOwner)")
            }
        }
        return SharingResult(seconds: elapsed, commits: Samples(values: commits.values))
    }
}

extension SharingLockScope {
    var label: String {
        switch self {
        case .wholeStorage: "whole storage"
        case .perParticipant: "per participant"
        }
    }
}
