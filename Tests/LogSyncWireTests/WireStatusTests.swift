import Foundation
import LogSyncWire
import SyncModel
import Testing

/// Errors and HTTP statuses, routes and content negotiation (Docs/Protocol.md, "HTTP").
@Suite("Wire: statuses, routes, formats")
struct WireStatusTests {
    @Test(
        "whole-request errors get the documented status",
        arguments: [
            (SyncError.Code.invalidArguments, 400), (.incompatibleVersion, 404), (.badDatabase, 400),
            (.notAuthenticated, 401), (.permissionFailure, 403), (.zoneNotFound, 404), (.userDeletedZone, 404),
            (.unknownItem, 404), (.assetNotAvailable, 404), (.changeTokenExpired, 410), (.limitExceeded, 413),
            (.requestRateLimited, 429), (.operationCancelled, 499), (.internalError, 500), (.serviceUnavailable, 503),
            (.zoneBusy, 503), (.quotaExceeded, 507), (SyncError.Code(rawValue: 9999), 500),
        ])
    func statuses(code: SyncError.Code, status: Int) {
        #expect(WireStatus.status(for: code) == status)
    }

    /// The table of Docs/Protocol.md, "HTTP" → "Errors": each status and the codes named in
    /// backquotes on its row.
    static func documentedStatuses() throws -> [(status: Int, codes: [String])] {
        let protocolFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/Protocol.md")
        let text = try String(contentsOf: protocolFile, encoding: .utf8)
        let section = try #require(
            text.components(separatedBy: "\n### Errors\n").dropFirst().first?.components(separatedBy: "\n### ").first)
        var rows: [(Int, [String])] = []
        for line in section.split(separator: "\n") where line.hasPrefix("| ") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count >= 3, let status = Int(cells[1]) else { continue }  // the heading, the rule
            rows.append(
                (
                    status,
                    cells[2].split(separator: "`", omittingEmptySubsequences: false).enumerated()
                        .filter { $0.offset % 2 == 1 }.map { String($0.element) }
                ))
        }
        if rows.isEmpty { throw TableMissing() }
        return rows
    }

    struct TableMissing: Error, CustomStringConvertible {
        var description: String { "Docs/Protocol.md has no status table under \"### Errors\"" }
    }

    // Every code the build knows is on exactly one row of the documented table, and
    // WireStatus answers that row's status for it.
    @Test("every SyncError code gets the status Docs/Protocol.md gives it, and the table names every code once")
    func documentedTable() throws {
        let rows = try Self.documentedStatuses()
        let names = Set(SyncError.Code.allKnown.map(\.name))
        var documented: [String: [Int]] = [:]
        for (status, quoted) in rows {
            for name in quoted where names.contains(name) { documented[name, default: []].append(status) }
        }
        for code in SyncError.Code.allKnown {
            let statuses = documented[code.name] ?? []
            #expect(statuses.count == 1, "\(code) is on \(statuses.count) rows of the table (\(statuses)), not one")
            if let status = statuses.first {
                #expect(
                    WireStatus.status(for: code) == status,
                    "\(code): WireStatus answers \(WireStatus.status(for: code)), the table \(status)")
            }
        }
    }

    // F89: a response without an error body, from a proxy or a server that is going away, maps to
    // a code the engine retries.
    @Test(
        "F89 bare statuses map to codes, the unavailable ones retried by the engine",
        arguments: [
            (502, SyncError.Code.serviceUnavailable), (503, .serviceUnavailable), (504, .serviceUnavailable),
            (429, .requestRateLimited), (401, .notAuthenticated), (403, .permissionFailure), (413, .limitExceeded),
            (404, .serverRejectedRequest), (500, .internalError),
        ])
    func bareStatuses(status: Int, code: SyncError.Code) {
        #expect(WireStatus.code(forStatus: status) == code)
        if [502, 503, 504, 429, 401].contains(status) { #expect(code.isTransient) }
    }

    @Test("Retry-After is whole seconds rounded up; the body keeps the exact wait")
    func retryAfter() {
        #expect(
            WireStatus.retryAfterHeader(for: SyncError(.serviceUnavailable, retryAfter: .milliseconds(1500))) == "2")
        #expect(WireStatus.retryAfterHeader(for: SyncError(.serviceUnavailable, retryAfter: .milliseconds(10))) == "1")
        #expect(WireStatus.retryAfterHeader(for: SyncError(.serviceUnavailable)) == nil)
        #expect(WireStatus.retryAfter(header: "7") == .seconds(7))
        #expect(WireStatus.retryAfter(header: "Wed, 21 Oct 2015 07:28:00 GMT") == nil)
    }

    @Test("routes name the version, the scope and the operation; never a user")
    func routes() throws {
        #expect(WireProtocol.path(.modifyRecords, scope: .private) == "/v1/databases/private/modifyRecords")
        #expect(WireProtocol.pushPath(scope: .shared) == "/v1/databases/shared/push")
        #expect(try WireProtocol.scope(named: "public") == .public)
        let scope = #expect(throws: SyncError.self) { try WireProtocol.scope(named: "alice") }
        #expect(scope?.message == "there is no database scope \"alice\"; the scopes are public, private, shared")
        let operation = #expect(throws: SyncError.self) { try WireOperation.named("dropDatabase") }
        #expect(operation?.code == .invalidArguments)
        #expect(operation?.message.contains("the operations are modifyZones, fetchZones") == true)
        #expect(
            WireOperation.allCases.filter(\.modifies) == [
                .modifyZones, .modifyRecords, .modifySubscriptions, .acceptShares, .registerDeviceKey, .saveZoneKeys,
            ])
    }

    @Test("content negotiation: JSON when asked, Protocol Buffers otherwise")
    func negotiation() {
        #expect(WireFormat(contentType: "application/json; charset=utf-8") == .json)
        #expect(WireFormat(contentType: "Application/X-Protobuf") == .protobuf)
        #expect(WireFormat(contentType: "text/plain") == nil)
        #expect(WireFormat.forResponse(accept: nil) == .protobuf)
        #expect(WireFormat.forResponse(accept: "*/*") == .protobuf)
        #expect(WireFormat.forResponse(accept: "text/html, application/json;q=0.9") == .json)
        #expect(WireFormat.forResponse(accept: "application/x-protobuf, application/json") == .protobuf)
    }
}
