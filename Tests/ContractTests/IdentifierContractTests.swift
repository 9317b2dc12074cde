import Foundation
import LogSyncServer
import SyncModel
import Testing

/// One identifier a client may send that breaks a rule of its kind (Docs/Protocol.md,
/// "Identifiers"): the wire-crossing half of `IdentifierTests`' table.
struct BadIdentifier: Sendable, CustomStringConvertible {
    let label: String
    let text: String
    /// A word of the message naming the broken rule.
    let rule: String

    var description: String { label }

    /// Each way an identifier of `kind` can be invalid and still be sent: empty, one byte too
    /// long, a NUL, a control character, U+FFFD, non-ASCII where ASCII is required, a leading
    /// `_` where it is reserved. (Bytes that are not UTF-8 cannot be a Swift string; the HTTP
    /// tests send them raw.)
    static func all(_ kind: Identifier) -> [BadIdentifier] {
        var cases = [
            BadIdentifier(label: "empty", text: "", rule: "must not be empty"),
            BadIdentifier(
                label: "one byte too long", text: String(repeating: "x", count: kind.maxBytes + 1), rule: "more than"),
            BadIdentifier(label: "NUL", text: "a\u{0}b", rule: "NUL"),
            BadIdentifier(label: "control character", text: "a\u{1B}b", rule: "control characters"),
            BadIdentifier(label: "U+FFFD", text: "a\u{FFFD}", rule: "UTF-8"),
            BadIdentifier(label: "far too long", text: String(repeating: "y", count: 10_000), rule: "more than"),
        ]
        if kind.isASCIIOnly { cases.append(BadIdentifier(label: "non-ASCII", text: "zoné", rule: "ASCII")) }
        if kind.reservesLeadingUnderscore { cases.append(BadIdentifier(label: "leading _", text: "_x", rule: "\"_\"")) }
        return cases
    }
}

/// Every identifier a client sends is checked at the server's edge, before anything is stored:
/// a bad one fails with `invalidArguments` naming the identifier (per item where the request has
/// items), never with an internal error, over every transport.
@Suite("Identifiers are checked at the edge")
struct IdentifierContractTests {
    /// Expects `result` to be a per-item `invalidArguments` naming `kind` and `bad`'s rule.
    static func expectInvalid<Value>(
        _ result: Result<Value, SyncError>?, _ kind: Identifier, _ bad: BadIdentifier,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error = expectFailure(result, .invalidArguments, sourceLocation: sourceLocation) else { return }
        #expect(error.message.contains("invalid \(kind)"), "\(bad): \(error.message)", sourceLocation: sourceLocation)
        #expect(error.message.contains(bad.rule), "\(bad): \(error.message)", sourceLocation: sourceLocation)
    }

    // F127: zone names when zones are saved, deleted, fetched; a NUL no longer scrambles the zone list.
    @Test("zone names: per item, nothing stored", arguments: Harnesses.all)
    func zoneNames(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            let before = try server.currentToken(of: "alice")
            for bad in BadIdentifier.all(.zoneName) {
                let id = RecordZone.ID(zoneName: bad.text)
                let response = try await phone.database.modifyZones(saving: [RecordZone(zoneID: id)], deleting: [])
                Self.expectInvalid(response.saveResults[id], .zoneName, bad)
                let deletion = try await phone.database.modifyZones(saving: [], deleting: [id])
                Self.expectInvalid(deletion.deleteResults[id], .zoneName, bad)
                let fetched = try await phone.database.fetchZones(FetchZonesRequest(zoneIDs: [id]))
                Self.expectInvalid(fetched.results[id], .zoneName, bad)
                let error = await expectThrows(.invalidArguments) {
                    try await phone.database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: id))
                }
                #expect(error?.message.contains("invalid zone name") == true, "\(bad)")
                let subscription = Subscription(subscriptionID: "zone", kind: .recordZone(id))
                let subscribed = try await phone.database.modifySubscriptions(
                    ModifySubscriptionsRequest(subscriptionsToSave: [subscription]))
                Self.expectInvalid(subscribed.saveResults["zone"], .zoneName, bad)
            }
            // A bad zone fails alone; a good one in the same request is saved.
            let bad = RecordZone.ID(zoneName: "a\u{0}b")
            let response = try await phone.database.modifyZones(
                saving: [RecordZone(zoneID: bad), RecordZone(zoneName: "Work")], deleting: [])
            expectFailure(response.saveResults[bad], .invalidArguments)
            expectSuccess(response.saveResults[zoneID("Work")])
            #expect(
                try server.currentToken(of: "alice").offset.rawValue == before.offset.rawValue + 1,
                "only Work was written")
            let zones = try await phone.database.fetchZones(FetchZonesRequest(zoneIDs: nil))
            #expect(Set(zones.results.keys) == [.default, zoneID("Notes"), zoneID("Work")])
        }
    }

    // F127: owner names, in zone and record IDs.
    @Test("owner names: per item, named as invalid", arguments: Harnesses.all)
    func ownerNames(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            let before = try server.currentToken(of: "alice")
            for bad in BadIdentifier.all(.ownerName) {
                let zone = RecordZone.ID(zoneName: "Notes", ownerName: bad.text)
                let saved = try await phone.database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
                Self.expectInvalid(saved.saveResults[zone], .ownerName, bad)
                let deleted = try await phone.database.modifyZones(saving: [], deleting: [zone])
                Self.expectInvalid(deleted.deleteResults[zone], .ownerName, bad)
                let record = newRecord(Record.ID(recordName: "n1", zoneID: zone))
                let records = try await phone.modify(
                    saving: [record], deleting: [Record.ID(recordName: "n2", zoneID: zone)])
                Self.expectInvalid(records.saveResults[record.recordID], .ownerName, bad)
                Self.expectInvalid(records.deleteResults[Record.ID(recordName: "n2", zoneID: zone)], .ownerName, bad)
            }
            #expect(try server.currentToken(of: "alice") == before)
        }
    }

    // F126: record names, record types, field keys, names in references.
    @Test("record names, types, field keys, references: per item", arguments: Harnesses.all)
    func recordIdentifiers(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            let before = try server.currentToken(of: "alice")
            for bad in BadIdentifier.all(.recordName) {
                let record = newRecord(bad.text)
                let deleted = recordID(bad.text + "d")
                let response = try await phone.modify(
                    saving: [record], deleting: bad.text.isEmpty ? [] : [deleted], atomically: false)
                Self.expectInvalid(response.saveResults[record.recordID], .recordName, bad)
                if !bad.text.isEmpty { Self.expectInvalid(response.deleteResults[deleted], .recordName, bad) }
                let referring = newRecord("r1", ["link": .reference(Record.Reference(recordID: recordID(bad.text)))])
                let reference = try await phone.modify(saving: [referring])
                Self.expectInvalid(reference.saveResults[referring.recordID], .recordName, bad)
            }
            // A record in a badly named zone, alone or beside a good one, atomically or not.
            for bad in BadIdentifier.all(.zoneName) {
                let record = newRecord(Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: bad.text)))
                for atomically in [true, false] {
                    let response = try await phone.modify(saving: [record, newRecord("fine")], atomically: atomically)
                    Self.expectInvalid(response.saveResults[record.recordID], .zoneName, bad)
                    // The good record in Notes is written only once; its retry has no change tag.
                    _ = response.saveResults[recordID("fine")]
                }
            }
            for bad in BadIdentifier.all(.recordType) {
                let record = newRecord(recordID("n1"), type: Record.RecordType(bad.text))
                Self.expectInvalid(try await phone.attemptSave(record), .recordType, bad)
            }
            for bad in BadIdentifier.all(.fieldKey) {
                let record = newRecord("n1", [bad.text: "value"])
                Self.expectInvalid(try await phone.attemptSave(record), .fieldKey, bad)
                let error = await expectThrows(.invalidArguments) {
                    try await phone.database.fetchZoneChanges(
                        FetchZoneChangesRequest(zoneID: zoneID("Notes"), desiredKeys: [bad.text]))
                }
                #expect(error?.message.contains("invalid field key") == true, "\(bad)")
            }
            // Only "fine" was written.
            let records = try await phone.fetchZone("Notes").records
            #expect(Set(records.keys) == [recordID("fine")])
            _ = before
        }
    }

    // F155: subscription IDs, saved and deleted.
    @Test("subscription IDs: per item, nothing stored", arguments: Harnesses.all)
    func subscriptionIDs(harness: any ContractHarness) async throws {
        try await withPhone(harness) { server, phone in
            let before = try server.currentToken(of: "alice")
            for bad in BadIdentifier.all(.subscriptionID) {
                let id = Subscription.ID(bad.text)
                let response = try await phone.database.modifySubscriptions(
                    ModifySubscriptionsRequest(
                        subscriptionsToSave: [Subscription(subscriptionID: id)]))
                Self.expectInvalid(response.saveResults[id], .subscriptionID, bad)
                let deletion = try await phone.database.modifySubscriptions(
                    ModifySubscriptionsRequest(subscriptionIDsToDelete: [id]))
                Self.expectInvalid(deletion.deleteResults[id], .subscriptionID, bad)
            }
            #expect(try server.currentToken(of: "alice") == before)
            #expect(try await phone.database.allSubscriptions().isEmpty)
        }
    }

    // F160: request IDs refuse the whole request, which writes nothing.
    @Test("request IDs: the whole request, nothing stored", arguments: Harnesses.all)
    func requestIDs(harness: any ContractHarness) async throws {
        try await withPhone(harness, zone: "Notes") { server, phone in
            let before = try server.currentToken(of: "alice")
            for bad in BadIdentifier.all(.requestID) {
                let error = await expectThrows(.invalidArguments) {
                    try await phone.modify(saving: [newRecord("n1")], requestID: RequestID(bad.text))
                }
                #expect(error?.message.contains("invalid request ID") == true, "\(bad): \(String(describing: error))")
                #expect(error?.message.contains(bad.rule) == true, "\(bad): \(String(describing: error))")
            }
            #expect(try server.currentToken(of: "alice") == before)
        }
    }

    // User IDs: a bad one is refused on every request in process; over HTTP it never gets a
    // token, since the token store refuses to register it.
    @Test("user IDs: every request refused, no user registered", arguments: Harnesses.all)
    func userIDs(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            for bad in BadIdentifier.all(.userID) + [
                BadIdentifier(label: "surrounding space", text: " alice", rule: "space")
            ] {
                let device: Device
                do {
                    device = try await server.device(UserID(bad.text), "phone")
                } catch {
                    #expect(harness.isHTTP, "\(bad): \(error)")
                    #expect("\(error)".contains("invalid user ID: it "), "\(bad): \(error)")
                    continue
                }
                #expect(!harness.isHTTP, "\(bad): a token was registered for an invalid user ID")
                let error = await expectThrows(.invalidArguments) {
                    try await device.database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
                }
                #expect(error?.message.contains("invalid user ID") == true, "\(bad): \(String(describing: error))")
                await expectThrows(.invalidArguments) { try await device.database.currentUserRecordID() }
                await expectThrows(.invalidArguments) { try await device.database.allSubscriptions() }
            }
        }
    }

    // Device IDs cross the wire in a header, which the HTTP tests exercise raw; in process they
    // are checked the same way.
    @Test("device IDs: every request refused (in process)")
    func deviceIDs() async throws {
        try await withServer(InProcessHarness()) { server in
            for bad in BadIdentifier.all(.deviceID) {
                let device = try await server.device("alice", DeviceID(bad.text))
                let error = await expectThrows(.invalidArguments) {
                    try await device.database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
                }
                #expect(error?.message.contains("invalid device ID") == true, "\(bad): \(String(describing: error))")
            }
        }
    }
}
