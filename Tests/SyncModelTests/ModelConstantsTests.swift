import Testing

@testable import SyncModel

/// Raw values and defaults of zones, scopes and subscriptions (F116, F128).
struct ModelConstantsTests {
    // F128: capability raw values match CKRecordZone.Capabilities.
    @Test func zoneCapabilityRawValues() {
        #expect(RecordZone.Capabilities.fetchChanges.rawValue == 1)
        #expect(RecordZone.Capabilities.atomic.rawValue == 2)
        #expect(RecordZone.Capabilities.sharing.rawValue == 4)
        #expect(RecordZone.Capabilities.zoneWideSharing.rawValue == 8)
        #expect(RecordZone.Capabilities.customZoneDefault == [.fetchChanges, .atomic, .sharing, .zoneWideSharing])
    }

    // F128: a zone built on the device has no capabilities until the server returns it.
    @Test func newZone() throws {
        let zone = RecordZone(zoneName: "Notes")
        #expect(zone.zoneID == Fixture.notes)
        #expect(zone.zoneID.ownerName == RecordZone.ID.defaultOwnerName)
        #expect(zone.capabilities.isEmpty)
        #expect(zone.share == nil)
        #expect(
            try jsonRoundTrip(RecordZone(zoneID: Fixture.notes, capabilities: .customZoneDefault))
                .capabilities.contains(.atomic))
        #expect(
            RecordZone(zoneID: Fixture.notes, capabilities: .customZoneDefault).description
                == #"RecordZone(zone "Notes", capabilities: 0xf)"#)
    }

    @Test func databaseScopeRawValues() {
        #expect(DatabaseScope.allCases.map(\.rawValue) == [1, 2, 3])
        #expect(DatabaseScope.allCases.map(\.description) == ["public", "private", "shared"])
    }

    // The enums without payloads print as their case names, which is what `logtool dump` shows.
    @Test func enumsPrintTheirCaseNames() {
        #expect(SavePolicy.allCases.map { "\($0)" } == ["ifServerRecordUnchanged", "changedKeys", "allKeys"])
        #expect(ZoneDeletionReason.allCases.map { "\($0)" } == ["deleted", "purged", "encryptedDataReset"])
        #expect(
            OperationGroup.TransferSize.allCases.map { "\($0)" } == [
                "unknown", "kilobytes", "megabytes", "tensOfMegabytes", "hundredsOfMegabytes", "gigabytes",
                "tensOfGigabytes", "hundredsOfGigabytes",
            ])
    }

    // F116: database subscriptions in private and shared databases, zone subscriptions in private only.
    @Test(
        "F116 subscription placement",
        arguments: [
            (Subscription.Kind.database, DatabaseScope.public, false),
            (.database, .private, true),
            (.database, .shared, true),
            (.recordZone(Fixture.notes), .public, false),
            (.recordZone(Fixture.notes), .private, true),
            (.recordZone(Fixture.notes), .shared, false),
        ])
    func subscriptionPlacement(kind: Subscription.Kind, scope: DatabaseScope, allowed: Bool) {
        #expect(Subscription(subscriptionID: "s", kind: kind).isAllowed(in: scope) == allowed)
    }

    @Test func subscriptionDescriptionsAndCoding() throws {
        let zone = Subscription(subscriptionID: "z", kind: .recordZone(Fixture.notes))
        #expect(zone.description == #"Subscription("z", zone "Notes")"#)
        #expect(Subscription(subscriptionID: "engine").description == #"Subscription("engine", database)"#)
        #expect(try jsonRoundTrip(zone) == zone)
    }

    @Test func requestIDs() throws {
        let id: RequestID = "dev1-42"
        #expect(id == RequestID("dev1-42"))
        #expect(id.description == #"request "dev1-42""#)
        #expect(try jsonRoundTrip(id) == id)
    }
}
