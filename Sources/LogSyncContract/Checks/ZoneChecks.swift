import SyncModel

/// Zone existence rules (F128, F147) and zone operations (F156).
enum ZoneChecks {
    static let all = [
        newZoneCapabilities, recordIntoMissingZone, zoneInSharedDatabase, savingZoneAgain, fetchMissingZone,
    ]

    /// F128, F156: a new custom zone reports fetchChanges, atomic, sharing (hierarchy shares) and
    /// zoneWideSharing, on save and on fetch.
    static let newZoneCapabilities = ContractCheck(
        "zones.newZoneCapabilities", "F128 F156 a new zone reports the custom-zone capabilities"
    ) { probe in
        let phone = try await probe.device("alice", "phone")
        let notes = RecordZone.ID(zoneName: "Notes")
        let saved = try await phone.createZone("Notes")
        probe.expect(saved.zoneID, equals: notes, "the saved zone's ID")
        probe.expect(saved.capabilities, equals: .customZoneDefault, "the saved zone's capabilities")
        probe.expect(saved.capabilities.contains(.sharing), "a custom zone cannot share a record hierarchy")
        let fetched = try probe.require(
            try await phone.database.fetchZones([notes]).results[notes], "fetching \(notes)")
        probe.expect(fetched.capabilities, equals: .customZoneDefault, "the fetched zone's capabilities")
        probe.expect(fetched.share == nil, "a new zone has a share")
        probe.expect(
            try await phone.database.fetchAllZones().contains { $0.zoneID == notes }, "all zones lack \(notes)")
    }

    /// F147, F128: a record saved into (or deleted from) a zone that does not exist gets
    /// zoneNotFound, naming the record; once the zone exists the save succeeds.
    static let recordIntoMissingZone = ContractCheck(
        "zones.recordIntoMissingZone", "F147 a record into (or out of) a missing zone gets zoneNotFound"
    ) { probe in
        let phone = try await probe.device("alice", "phone")
        let record = note("n1", in: "Nowhere")
        let error = probe.expectFailure(
            try await phone.attemptSave(record), .zoneNotFound, "saving into a missing zone")
        probe.expect(error?.item, equals: .record(record.recordID), "the failure's item")
        probe.expectFailure(
            try await phone.attemptDelete(record.recordID), .zoneNotFound, "deleting from a missing zone")
        try await phone.createZone("Nowhere")
        try await phone.save(record)
    }

    /// F147: zones cannot be created in the shared database.
    static let zoneInSharedDatabase = ContractCheck(
        "zones.zoneInSharedDatabase", "F147 creating a zone in the shared database gets badDatabase"
    ) { probe in
        let shared = try await probe.device("alice", "phone", scope: .shared)
        probe.expectFailure(
            try await shared.attemptCreateZone(RecordZone.ID(zoneName: "Notes")), .badDatabase,
            "a zone in the shared database")
        probe.expect(try await shared.database.fetchAllZones().isEmpty, "the shared database lists a zone")
    }

    /// F147: saving an existing zone again succeeds, returns the zone, and neither empties it nor
    /// starts a new incarnation.
    static let savingZoneAgain = ContractCheck(
        "zones.savingZoneAgain", "F147 saving an existing zone again is idempotent"
    ) { probe in
        let (phone, laptop) = try await probe.phoneAndLaptop(zone: "Notes")
        let notes = RecordZone.ID(zoneName: "Notes")
        let saved = try await phone.save(note("n1", ["title": "kept"]))
        let before = try await laptop.zoneFeed(notes)

        let again = try await laptop.createZone("Notes")
        probe.expect(again.capabilities, equals: .customZoneDefault, "the zone saved again")
        probe.expect(
            try await laptop.database.fetchAllZones().filter { $0.zoneID == notes }.count, equals: 1,
            "zones named Notes")
        let since = try await laptop.zoneFeed(notes, since: before.token)
        probe.expect(since.changedIDs, equals: [], "the zone's changes since before it was saved again")
        let record = try await laptop.zoneRecords(notes)[saved.recordID]
        probe.expect(record?["title"], equals: "kept", "the record after the zone is saved again")
        probe.expect(record?.recordChangeTag, equals: saved.recordChangeTag, "the record's change tag")
    }

    /// F156: fetching named zones gives a result per zone, zoneNotFound for a missing one.
    static let fetchMissingZone = ContractCheck(
        "zones.fetchMissingZone", "F156 fetching a missing zone gives a per-zone zoneNotFound"
    ) { probe in
        let phone = try await probe.device("alice", "phone")
        try await phone.createZone("Notes")
        let notes = RecordZone.ID(zoneName: "Notes")
        let ghost = RecordZone.ID(zoneName: "Ghost")
        let results = try await phone.database.fetchZones([notes, ghost]).results
        probe.expect(results.count, equals: 2, "results for two zones")
        try probe.require(results[notes], "fetching \(notes)")
        probe.expectFailure(results[ghost], .zoneNotFound, "fetching a missing zone")
    }
}
