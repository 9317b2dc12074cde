import SyncModel

/// Saving records: conflicts by change tag (F145, F92) and what a save returns (F158).
enum RecordChecks {
    static let all = [mergeIntoServerRecord, savedRecordMatchesTheFeed]

    /// F145, F92: a save on a stale change tag gets serverRecordChanged carrying the server's
    /// record; merging into that record and saving it succeeds (the WWDC23 two-device flow).
    static let mergeIntoServerRecord = ContractCheck(
        "records.mergeIntoServerRecord", "F145 saving a merge into the server record succeeds"
    ) { probe in
        let (phone, laptop) = try await probe.phoneAndLaptop(zone: "Notes")
        var original = try await phone.save(note("n1", ["title": "v1"]))
        var edited = original
        edited["title"] = "phone"
        try await phone.save(edited)

        original["title"] = "laptop"
        let error = probe.expectFailure(
            try await laptop.attemptSave(original), .serverRecordChanged, "saving on a stale change tag")
        guard var merged = error?.serverRecord else {
            probe.record("the conflict carries no server record", fileID: #fileID, line: #line)
            return
        }
        probe.expect(merged["title"], equals: "phone", "the conflict's server record")
        merged["title"] = "laptop+phone"
        let saved = try await laptop.save(merged)
        probe.expect(saved["title"], equals: "laptop+phone", "the merge as saved")
        let fetched = try await phone.zoneRecords(original.recordID.zoneID)[original.recordID]
        probe.expect(fetched?["title"], equals: "laptop+phone", "the merge as fetched")
    }

    /// F158: another device fetches exactly the system fields and fields the save returned.
    static let savedRecordMatchesTheFeed = ContractCheck(
        "records.savedRecordMatchesTheFeed", "F158 the saved record matches what other devices fetch"
    ) { probe in
        let (phone, laptop) = try await probe.phoneAndLaptop(zone: "Notes")
        var created = try await phone.save(note("n1", ["title": "v1", "count": "3"]))
        created["count"] = "4"
        let saved = try await phone.save(created)

        let fetched = try await laptop.zoneRecords(saved.recordID.zoneID)[saved.recordID]
        probe.expect(fetched?.systemFields, equals: saved.systemFields, "the fetched system fields")
        probe.expect(fetched?.recordType, equals: saved.recordType, "the fetched record type")
        probe.expect(fetched?.allKeys(), equals: ["count", "title"], "the fetched keys")
        probe.expect(saved.allKeys(), equals: ["count", "title"], "the keys of the saved record")
        probe.expect(fetched?["count"], equals: "4", "the fetched count")
    }
}
