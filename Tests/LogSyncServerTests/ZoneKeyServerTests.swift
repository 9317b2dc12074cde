import Foundation
import LogStore
import SyncModel
import Testing

@testable import LogSyncServer

/// The server's side of the key directory (F129): where the entries go, and the index tables
/// `deviceKeys` and `zoneKeys` as a projection of the log.
@Suite("Server zone keys")
struct ZoneKeyServerTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    // F129: device keys go to the user's private log whatever the scope; wraps to the zone
    // owner's private log, one entry per request, zone IDs as the owner names them.
    @Test("F129 device keys and wraps are entries 118 and 119 of the right logs")
    func entriesGoToTheRightLogs() async throws {
        try await withServer { server, _ in
            let alice = server.database(for: "alice", device: "phone")
            _ = try await alice.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: Self.notes)]))
            let pair = DeviceKeyPair()
            try await server.database(for: "alice", scope: .shared, device: "phone").registerDeviceKey(pair.publicKey)
            try await alice.registerDeviceKey(pair.publicKey)  // again: no entry
            let me = try server.userRecordID(for: "alice").recordName
            let spelt = RecordZone.ID(zoneName: "Notes", ownerName: me)
            let key = ZoneKey.generate(zoneID: spelt, version: 1)
            let response = try await alice.saveZoneKeys(SaveZoneKeysRequest(keys: [key.wrapped(for: pair.publicKey)]))
            #expect(try response.results.values.first?.get().zoneID == spelt)  // answered as asked

            let entries = try Self.entries(try server.admin.log(of: "alice"))
            let keyEntries = entries.filter {
                if case .deviceKeyRegistered = $0 { true } else if case .zoneKeysSaved = $0 { true } else { false }
            }
            #expect(keyEntries.count == 2)
            guard case .deviceKeyRegistered(let registered)? = keyEntries.first,
                case .zoneKeysSaved(let wraps)? = keyEntries.last
            else {
                Issue.record("unexpected entries \(keyEntries)")
                return
            }
            #expect(registered.keyID == pair.publicKey.keyID)
            #expect(registered.userRecordName == me)
            #expect(wraps.map(\.zoneID) == [Self.notes])
            #expect(try Self.entries(try server.admin.log(of: "alice", scope: .shared)).isEmpty)
        }
    }

    // F129: the key tables are a projection of the log: after a history of registrations, wraps,
    // zone deletions and re-creations, the index built as the server went equals its rebuild,
    // entry by entry as in runs.
    @Test("F129 the key tables are a projection of the log")
    func keyTablesAreAProjection() async throws {
        try await withServer { server, _ in
            let alice = server.database(for: "alice", device: "phone")
            let pairs = (0..<3).map { _ in DeviceKeyPair() }
            for pair in pairs { try await alice.registerDeviceKey(pair.publicKey) }
            let zones = (0..<3).map { RecordZone.ID(zoneName: "Z\($0)") }
            var random = SeededRandom(seed: 11)
            var versions: [RecordZone.ID: UInt32] = [:]
            for _ in 0..<40 {
                let zoneID = zones.randomElement(using: &random)!
                switch Int.random(in: 0..<6, using: &random) {
                case 0:
                    _ = try await alice.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [zoneID]))
                    versions[zoneID] = nil
                default:
                    _ = try await alice.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zoneID)]))
                    let version = (versions[zoneID] ?? 0) + 1
                    versions[zoneID] = version
                    let key = ZoneKey.generate(zoneID: zoneID, version: version)
                    let response = try await alice.saveZoneKeys(
                        SaveZoneKeysRequest(keys: pairs.map { key.wrapped(for: $0.publicKey) }))
                    #expect(response.results.values.allSatisfy { (try? $0.get()) != nil })
                }
            }
            let fetched = try await alice.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: nil))
            #expect(Set(fetched.results.keys) == Set(versions.keys))
            for (zoneID, version) in versions {
                #expect(try fetched.results[zoneID]?.get().wrappedKeys.count == Int(version) * pairs.count)
            }
            let log = try server.admin.log(of: "alice")
            try ServerLogTests.expectProjectionsHold(log)
        }
    }

    static func entries(_ log: Log) throws -> [ServerEntry] {
        var entries: [ServerEntry] = []
        try log.forEachEntry { entry in entries.append(try ServerEntry(entry)) }
        return entries
    }
}
