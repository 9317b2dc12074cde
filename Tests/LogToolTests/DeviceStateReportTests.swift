import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import LogToolCore
import Testing

@testable import LogSyncDiagnostics

/// `DeviceStateReport`: the zone tokens and last known server records of a state, the short
/// record summary, and the field-by-field differences `diff` shows.
@Suite("Device state report")
struct DeviceStateReportTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func record(_ name: String, tag: String?, _ fields: [String: RecordValue]) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: notes))
        for (key, value) in fields { record[key] = value }
        record.applySystemFields(Record.SystemFields(recordChangeTag: tag))
        return record
    }

    @Test(
        arguments: [
            (["title": .string("Groceries")], "Note  tag 12  title=Groceries"),
            ([:], "Note  tag 12"),
            (
                ["title": .string("A title longer than twenty-four characters")],
                "Note  tag 12  title=\"A title longer than twen…\""
            ),
            (
                ["where": .location(Location(latitude: 48.8584, longitude: 2.2945))],
                "Note  tag 12  where=location(48.8584,2.2945)"
            ),
            (
                [
                    "a": .int64(-3), "b": .double(1.5), "c": .bool(true), "d": .bytes(Data([1, 2, 3])),
                    "e": .list([.int64(1)]),
                ],
                "Note  tag 12  a=-3 b=1.5 c=true d=bytes(3) …+1"
            ),
            (
                [
                    "when": .date(Date(timeIntervalSince1970: 1_700_000_000)),
                    "ref": .reference(Record.Reference(recordID: Record.ID(recordName: "n2", zoneID: notes))),
                    "file": .asset(Asset(digest: AssetHasher.digest(of: Array("photo.jpg".utf8)), size: 9)),
                ],
                "Note  tag 12  file=asset(\(AssetHasher.digest(of: Array("photo.jpg".utf8)).short)/9B/not-cached) ref=ref(Notes/n2) when=date(2023-11-14T22:13:20.000000Z)"
            ),
        ] as [([String: RecordValue], String)])
    func recordSummary(fields: [String: RecordValue], expected: String) {
        #expect(DeviceStateReport.recordSummary(Self.record("n1", tag: "12", fields)) == expected)
    }

    @Test func aRecordWithoutATagSaysSo() {
        #expect(DeviceStateReport.recordSummary(Self.record("n1", tag: nil, [:])) == "Note  tag none")
    }

    /// The laptop's state after the story, and variations of it.
    @Test func differencesOfTokensAndRecordsAreItemByItem() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, _, _, laptop in
            let state = try laptop.engine.deviceLog.state(at: try laptop.engine.deviceLog.log.lastOffset)
            #expect(state.zoneChangeTokens.map(\.zoneID) == [Self.notes])
            #expect(state.lastKnownServerRecords.map(\.recordID.recordName) == ["n1"])
            #expect(
                state.lastKnownServerRecords == [
                    try #require(
                        try laptop.engine.deviceLog.lastKnownServerRecord(for: DeviceDumpCommandTests.id("n1")))
                ])

            let text = DeviceStateReport.text(state)
            // The server's offsets count the operationGroupStarted entries of the phone's send and the laptop's fetch (F69).
            #expect(
                text.contains("\nzone tokens:               1\n                           1. Notes → offset 6\n"),
                "\(text)")
            #expect(
                text.contains("\nserver records:            1\n                           1. Notes/n1  Note  tag "),
                "\(text)")

            #expect(DeviceStateReport.fields.compactMap { $0.difference(state, state) }.isEmpty)

            var other = state
            other.lastKnownServerRecords.append(Self.record("n9", tag: "40", ["title": .string("New")]))
            other.hasPendingUntrackedChanges = true
            let differences = DeviceStateReport.fields.compactMap { $0.difference(state, other) }
            #expect(differences.map(\.key) == ["hasPendingUntrackedChanges", "lastKnownServerRecords"])
            #expect(differences[0].a.text == "no" && differences[0].b.text == "yes" && differences[0].items.isEmpty)
            #expect(differences[0].a.json == "false" && differences[0].b.json == "true")
            let items = differences[1].items
            #expect(items.map(\.id) == ["Notes/n9"])
            #expect(items.first?.a == nil)
            #expect(items.first?.b?.text == "Note  tag 40  title=New")
            #expect(items.first?.b?.json == #"{"record":"Notes/n9","type":"Note","tag":"40","fields":{"title":"New"}}"#)
            #expect(differences[1].a.json == "[]")

            // Values that differ where the short text does not: the full descriptions are shown.
            var retagged = state
            let token = try #require(state.zoneChangeTokens.first)
            retagged.zoneChangeTokens = [
                ZoneChangeToken(zoneID: token.zoneID, incarnation: token.incarnation + 1, offset: token.offset)
            ]
            let tokenDifference = try #require(
                DeviceStateReport.fields.compactMap { $0.difference(state, retagged) }.first)
            #expect(tokenDifference.key == "zoneChangeTokens")
            #expect(tokenDifference.items.first?.a?.text == token.description)
            #expect(tokenDifference.items.first?.b?.text.contains("incarnation \(token.incarnation + 1)") == true)
        }
    }
}
