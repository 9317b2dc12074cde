import Foundation
import LogStore
import Testing

@testable import SyncModel

/// Typed, opaque change tokens with a stable binary form (F140–F142, F149).
struct ChangeTokenTests {
    static func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> Data {
        Data(
            stride(from: 0, to: hex.count, by: 2).map {
                let start = hex.index(hex.startIndex, offsetBy: $0)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
            })
    }

    /// Rewrites a token's body and recomputes its checksum, to forge well-formed bad tokens.
    static func reseal(_ data: Data, _ edit: (inout [UInt8]) -> Void) -> Data {
        var body = Array(data.dropLast(4))
        edit(&body)
        var writer = TokenCoding.Writer(bytes: body)
        writer.append(TokenChecksum.crc32c(body))
        return Data(writer.bytes)
    }

    static let zoneToken = ZoneChangeToken(zoneID: Fixture.notes, incarnation: 3, offset: 42)

    // F142: database tokens round-trip at every offset width.
    @Test("database token round trip", arguments: [0, 1, 255, 256, 1 << 32, UInt64.max])
    func databaseTokenRoundTrip(offset: UInt64) throws {
        let token = DatabaseChangeToken(offset: ChangeOffset(offset))
        let decoded = try DatabaseChangeToken(data: token.data)
        #expect(decoded == token)
        #expect(decoded.offset.rawValue == offset)
        #expect(try jsonRoundTrip(token) == token)
    }

    // F142, F149: zone tokens carry zone ID and incarnation.
    @Test(
        "zone token round trip",
        arguments: [
            ZoneChangeToken(zoneID: Fixture.notes, incarnation: 1, offset: 7),
            ZoneChangeToken(zoneID: Fixture.sharedNotes, incarnation: .max, offset: ChangeOffset(.max)),
            ZoneChangeToken(zoneID: .default, incarnation: 0, offset: 0),
            ZoneChangeToken(
                zoneID: RecordZone.ID(zoneName: String(repeating: "z", count: 255)), incarnation: 2, offset: 1),
        ])
    func zoneTokenRoundTrip(token: ZoneChangeToken) throws {
        let decoded = try ZoneChangeToken(data: token.data)
        #expect(decoded == token)
        #expect(decoded.zoneID == token.zoneID)
        #expect(decoded.incarnation == token.incarnation)
        #expect(decoded.offset == token.offset)
        #expect(try jsonRoundTrip(token) == token)
    }

    // Tokens sealed before the model had a checksum of its own still check: the model's CRC-32C,
    // with the CPU's instruction or bit by bit, is the one LogStore checks entries with.
    @Test("token checksum is LogStore's CRC-32C", arguments: [0, 1, 7, 8, 24, 63, 300])
    func tokenChecksumMatchesLogStore(length: Int) {
        var random = SeededRandom(seed: UInt64(length) + 1)
        let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
        #expect(TokenChecksum.crc32c(bytes) == CRC32C.checksum(bytes))
        #expect(TokenChecksum.crc32cBitwise(bytes) == CRC32C.checksum(bytes))
    }

    // The binary form is stable: these bytes must decode in every later version.
    @Test func goldenBytes() throws {
        // magic, version 2, kind, database 7, offset 42, [incarnation 3, zone name, owner], CRC-32C
        let database = "4c5402010000000000000007000000000000002a63725c00"
        let databaseToken = DatabaseChangeToken(offset: 42, database: 7)
        #expect(Self.hex(databaseToken.data) == database)
        #expect(try DatabaseChangeToken(data: Self.bytes(database)) == databaseToken)

        let zone =
            "4c5402020000000000000007000000000000002a000000000000000300054e6f74657300105f5f64656661756c744f776e65725f5ff3150a00"
        let zoneToken = ZoneChangeToken(zoneID: Fixture.notes, incarnation: 3, offset: 42, database: 7)
        #expect(Self.hex(zoneToken.data) == zone)
        #expect(try ZoneChangeToken(data: Self.bytes(zone)) == zoneToken)
    }

    // F142: a token remembers the database that issued it; the same offset in another
    // database is another token.
    @Test func tokensCarryTheirDatabase() throws {
        let token = DatabaseChangeToken(offset: 5, database: 9)
        #expect(try DatabaseChangeToken(data: token.data).database == 9)
        #expect(token != DatabaseChangeToken(offset: 5, database: 10))
        let zoneToken = ZoneChangeToken(zoneID: Fixture.notes, incarnation: 1, offset: 5, database: 9)
        #expect(try ZoneChangeToken(data: zoneToken.data).database == 9)
    }

    // F142: a database token is rejected where a zone token is expected, with a typed error.
    @Test func databaseTokenIsNotAZoneToken() throws {
        let data = DatabaseChangeToken(offset: 42).data
        let error = try #require(throws: SyncError.self) { try ZoneChangeToken(data: data) }
        #expect(error.code == .invalidArguments)
        #expect(error.message == "invalid zone token: this is a database token, not a zone token")
    }

    // F142
    @Test func zoneTokenIsNotADatabaseToken() throws {
        let error = try #require(throws: SyncError.self) { try DatabaseChangeToken(data: Self.zoneToken.data) }
        #expect(error.code == .invalidArguments)
        #expect(error.message == "invalid database token: this is a zone token, not a database token")
    }

    /// Malformed inputs and the problem each error must name.
    static let garbage: [(String, Data, String)] = [
        ("empty", Data(), "0 bytes is too short"),
        ("short", Data([0x4C, 0x54, 1, 1, 0]), "5 bytes is too short"),
        ("text", Data("this is not a change token at all".utf8), "bad magic"),
        ("version", reseal(DatabaseChangeToken(offset: 1).data) { $0[2] = 9 }, "format version 9 is not supported"),
        (
            "bit flip",
            {
                var data = DatabaseChangeToken(offset: 1).data
                data[6] ^= 0x10
                return data
            }(), "checksum mismatch"
        ),
        ("truncated", DatabaseChangeToken(offset: 1).data.dropLast(), "23 bytes is too short"),
        ("kind", reseal(DatabaseChangeToken(offset: 1).data) { $0[3] = 7 }, "unknown token kind 7"),
        ("trailing", reseal(DatabaseChangeToken(offset: 1).data) { $0.append(0) }, "1 unexpected trailing bytes"),
    ]

    // F142: garbage never decodes, and the error names the problem.
    @Test("garbage database tokens", arguments: garbage)
    func garbageIsRejected(label: String, data: Data, problem: String) throws {
        let error = try #require(throws: SyncError.self, "\(label)") { try DatabaseChangeToken(data: data) }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains(problem), "\(label): \(error.message)")
        #expect(error.message.hasPrefix("invalid database token: "))
    }

    // F142
    @Test(
        "malformed zone tokens",
        arguments: [
            ("cut zone fields", reseal(zoneToken.data) { $0.removeLast(3) }, "truncated or malformed zone fields"),
            ("bad UTF-8", reseal(zoneToken.data) { $0[30] = 0xFF }, "truncated or malformed zone fields"),
            ("trailing", reseal(zoneToken.data) { $0.append(contentsOf: [1, 2]) }, "2 unexpected trailing bytes"),
            (
                "flipped",
                {
                    var data = zoneToken.data
                    data[33] ^= 1
                    return data
                }(), "checksum mismatch"
            ),
        ])
    func malformedZoneTokenIsRejected(label: String, data: Data, problem: String) throws {
        let error = try #require(throws: SyncError.self, "\(label)") { try ZoneChangeToken(data: data) }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains(problem), "\(label): \(error.message)")
    }

    // F142: Codable rejects a token of the wrong kind with a DecodingError wrapping the reason.
    @Test func codableRejectsWrongKind() throws {
        let json = try JSONEncoder().encode(Self.zoneToken)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DatabaseChangeToken.self, from: json) }
    }

    @Test func tokensCompareByContent() {
        #expect(DatabaseChangeToken(offset: 5) == DatabaseChangeToken(offset: 5))
        #expect(DatabaseChangeToken(offset: 5) != DatabaseChangeToken(offset: 6))
        // F149: the same zone and offset in another incarnation is another token.
        #expect(
            ZoneChangeToken(zoneID: Fixture.notes, incarnation: 1, offset: 5)
                != ZoneChangeToken(zoneID: Fixture.notes, incarnation: 2, offset: 5))
    }

    @Test func descriptions() {
        #expect(DatabaseChangeToken(offset: 42).description == "DatabaseChangeToken(offset 42)")
        #expect(Self.zoneToken.description == #"ZoneChangeToken(zone "Notes", incarnation 3, offset 42)"#)
    }
}
