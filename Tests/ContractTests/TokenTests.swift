import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Builds change tokens a server never issued, following the documented binary layout of
/// SyncModel's `TokenCoding` (magic "LT", version 2, kind, offset, zone fields, CRC-32C), so a
/// test can present a well-formed token from the future. Each test first checks the forge
/// reproduces a real token byte for byte.
enum TokenForge {
    static func databaseToken(offset: UInt64, database: UInt64) throws -> DatabaseChangeToken {
        try DatabaseChangeToken(data: seal(header(kind: 1, database: database, offset: offset)))
    }

    static func zoneToken(
        zoneID: RecordZone.ID, incarnation: UInt64, offset: UInt64, database: UInt64
    ) throws -> ZoneChangeToken {
        var bytes = header(kind: 2, database: database, offset: offset)
        append(incarnation, to: &bytes)
        append(zoneID.zoneName, to: &bytes)
        append(zoneID.ownerName, to: &bytes)
        return try ZoneChangeToken(data: seal(bytes))
    }

    private static func header(kind: UInt8, database: UInt64, offset: UInt64) -> [UInt8] {
        var bytes: [UInt8] = [0x4C, 0x54, 2, kind]
        append(database, to: &bytes)
        append(offset, to: &bytes)
        return bytes
    }

    private static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    private static func append(_ text: String, to bytes: inout [UInt8]) {
        let utf8 = Array(text.utf8)
        bytes.append(UInt8(utf8.count >> 8))
        bytes.append(UInt8(utf8.count & 0xFF))
        bytes.append(contentsOf: utf8)
    }

    private static func seal(_ bytes: [UInt8]) -> Data {
        let crc = crc32c(bytes)
        return Data(bytes + (0..<4).map { UInt8(truncatingIfNeeded: crc >> UInt32(24 - 8 * $0)) })
    }

    /// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit.
    static func crc32c(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }
}

/// Change tokens are opaque and typed (F142): the wrong kind, garbage, another zone's token and a
/// token from the future are rejected with invalidArguments.
@Suite("Change tokens (F142)")
struct TokenTests {
    // F142: a database token cannot be read as a zone token nor the reverse, and garbage is
    // not a token; all give invalidArguments.
    @Test("F142 tokens of the wrong kind and garbage are rejected", arguments: Harnesses.all)
    func wrongKindAndGarbage(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            try await phone.save(newRecord("n1"))
            let (databaseToken, zoneToken) = try await phone.currentTokens()

            func expectInvalid(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
                let error = #expect(throws: SyncError.self, sourceLocation: sourceLocation) { try body() }
                #expect(
                    error?.code == .invalidArguments, "\(String(describing: error))", sourceLocation: sourceLocation)
            }
            expectInvalid { _ = try ZoneChangeToken(data: databaseToken.data) }
            expectInvalid { _ = try DatabaseChangeToken(data: zoneToken.data) }
            for garbage in [Data(), Data("garbage".utf8), Data(repeating: 0xFF, count: 64), zoneToken.data.dropLast()] {
                expectInvalid { _ = try ZoneChangeToken(data: garbage) }
                expectInvalid { _ = try DatabaseChangeToken(data: garbage) }
            }
            #expect(try ZoneChangeToken(data: zoneToken.data) == zoneToken)
            #expect(try DatabaseChangeToken(data: databaseToken.data) == databaseToken)
        }
    }

    // F142: a zone token presented for another zone is rejected.
    @Test("F142 another zone's token is rejected", arguments: Harnesses.all)
    func otherZonesToken(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            try await phone.createZone("Photos")
            try await phone.save(newRecord("n1"))
            let notesToken = try await phone.fetchZone("Notes").token
            await expectThrows(.invalidArguments) {
                try await phone.database.fetchZoneChanges(zoneID: zoneID("Photos"), since: notesToken)
            }
        }
    }

    // F142: a token is bound to the database that issued it: another user's token, or the
    // private database's token in the shared database, is refused even where its offset exists.
    @Test("F142 another database's token is rejected", arguments: Harnesses.all)
    func anotherDatabasesToken(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let bob = try await server.device("bob", "phone")
            let aliceShared = try await server.device("alice", "phone", scope: .shared)
            try await alice.createZone("Notes")
            try await bob.createZone("Notes")
            for index in 0..<5 { try await bob.save(newRecord("b\(index)")) }
            let (aliceDatabaseToken, aliceZoneToken) = try await alice.currentTokens()
            #expect(aliceDatabaseToken.offset <= (try server.currentToken(of: "bob").offset))
            await expectThrows(.invalidArguments) {
                try await bob.database.fetchDatabaseChanges(since: aliceDatabaseToken)
            }
            await expectThrows(.invalidArguments) {
                try await bob.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: aliceZoneToken)
            }
            await expectThrows(.invalidArguments) {
                try await aliceShared.database.fetchDatabaseChanges(since: aliceDatabaseToken)
            }
            // Each database still accepts its own tokens.
            _ = try await alice.fetchDatabase(since: aliceDatabaseToken)
            _ = try await bob.fetchDatabase(since: try await bob.fetchDatabase().token)
        }
    }

    // F142, F144, F149: the continuation token of a zone listed from nil, which a compaction
    // does not expire, is still bound to its database, its zone and the zone's incarnation.
    @Test("F142 F149 a paged listing's token stays bound to its database and incarnation", arguments: Harnesses.all)
    func listingTokenIsBound(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let bob = try await server.device("bob", "phone")
            for device in [alice, bob] {
                try await device.createZone("Notes")
                try await device.createZone("Photos")
                try await device.save((0..<3).map { newRecord("n\($0)") })
                try await device.save((0..<3).map { newRecord("p\($0)", in: "Photos") })
            }
            try server.admin.compactTombstones(of: "alice", before: try server.currentToken(of: "alice"))
            let page = try await alice.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: nil, resultsLimit: 1)
            #expect(page.moreComing)
            let token = page.changeToken

            await expectThrows(.invalidArguments) {
                try await bob.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: token)
            }
            await expectThrows(.invalidArguments) {
                try await alice.database.fetchZoneChanges(zoneID: zoneID("Photos"), since: token)
            }
            _ = try await alice.fetchZone("Notes", since: token)
            try await alice.deleteZone("Notes")
            try await alice.createZone("Notes")
            await expectThrows(.changeTokenExpired) {
                try await alice.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: token)
            }
        }
    }

    // F142: well-formed tokens the server never issued, past the end of the log, are rejected.
    @Test("F142 tokens from the future are rejected", arguments: Harnesses.all)
    func tokensFromTheFuture(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            try await phone.save(newRecord("n1"))
            let (databaseToken, zoneToken) = try await phone.currentTokens()
            try #require(
                try TokenForge.databaseToken(offset: databaseToken.offset.rawValue, database: databaseToken.database)
                    .data
                    == databaseToken.data)
            try #require(
                try TokenForge.zoneToken(
                    zoneID: zoneToken.zoneID, incarnation: zoneToken.incarnation, offset: zoneToken.offset.rawValue,
                    database: zoneToken.database
                ).data
                    == zoneToken.data)

            let end = try server.currentToken(of: "alice").offset.rawValue
            let futureDatabase = try TokenForge.databaseToken(offset: end + 1_000, database: databaseToken.database)
            let futureZone = try TokenForge.zoneToken(
                zoneID: zoneToken.zoneID, incarnation: zoneToken.incarnation, offset: end + 1_000,
                database: zoneToken.database)
            await expectThrows(.invalidArguments) {
                try await phone.database.fetchDatabaseChanges(since: futureDatabase)
            }
            await expectThrows(.invalidArguments) {
                try await phone.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: futureZone)
            }
        }
    }

    // F140, F141: a results limit below 1 is an invalid argument.
    @Test("F140 F141 a results limit below 1 is rejected", arguments: Harnesses.all, [0, -1])
    func badResultsLimit(harness: any ContractHarness, limit: Int) async throws {
        try await withPhone(harness, zone: "Notes") { _, phone in
            await expectThrows(.invalidArguments) {
                try await phone.database.fetchDatabaseChanges(since: nil, resultsLimit: limit)
            }
            await expectThrows(.invalidArguments) {
                try await phone.database.fetchZoneChanges(zoneID: zoneID("Notes"), since: nil, resultsLimit: limit)
            }
        }
    }
}
