import Foundation
import LogStore
import LogToolCore
import SyncModel
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics
@testable import LogSyncServer

/// `EntryFormatter` with a decoder, `EntryFilter`, and `EntryDumper` on server entries: pure
/// functions and an in-process log.
@Suite("Described entries")
struct EntryDescriptionFormattingTests {
    static let time = EntryTime(microsecondsSince1970: 1_780_000_000_000_012)
    static let notes = RecordZone.ID(zoneName: "Notes")

    static func entry(_ serverEntry: ServerEntry, at offset: LogOffset) -> LogEntry {
        let new = serverEntry.newEntry
        return LogEntry(offset: offset, kind: new.kind, time: time, payload: new.payload)
    }

    static var savedNote: LogEntry {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
        record["title"] = .string("Groceries")
        record["body"] = .string("milk")
        record.applySystemFields(Record.SystemFields(recordChangeTag: "12"))
        return entry(.recordSaved(record), at: 12)
    }

    @Test func textLineOfAServerEntryShowsItsKindNameAndFields() throws {
        let entry = Self.savedNote
        #expect(
            try EntryFormatter().textLine(entry)
                == "    12  2026-05-28T20:26:40.000012Z  kind 103  size \(String(entry.payload.count).leftPadded(6))  recordSaved  zone=Notes record=n1 type=Note tag=12 keys=[body,title]"
        )
    }

    @Test func withoutADecoderAServerEntryShowsItsBytes() throws {
        let entry = Self.savedNote
        let line = try EntryFormatter(decoder: nil).textLine(entry)
        #expect(
            line.hasSuffix(
                "  " + EntryFormatter.hex(entry.payload.prefix(16)) + "  |"
                    + EntryFormatter.printable(entry.payload.prefix(16)) + "|…"))
        #expect(try EntryFormatter(decoder: nil).jsonLine(entry) == EntryFormatter().jsonLine(entry, description: nil))
    }

    @Test func jsonLineOfAServerEntryAddsKindNameAndFields() throws {
        let entry = Self.savedNote
        let line = try EntryFormatter().jsonLine(entry)
        let base64 = Data(entry.payload).base64EncodedString()
        #expect(
            line
                == #"{"offset":12,"time":"2026-05-28T20:26:40.000012Z","timeMicros":1780000000000012,"kind":103,"kindName":"recordSaved","size":"#
                + "\(entry.payload.count)"
                + #","fields":{"zone":"Notes","record":"n1","type":"Note","tag":"12","keys":["body","title"]},"payloadBase64":""#
                + base64 + #""}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(
            Set(object.keys) == ["offset", "time", "timeMicros", "kind", "kindName", "size", "fields", "payloadBase64"])
        let fields = try #require(object["fields"] as? [String: Any])
        #expect(fields["keys"] as? [String] == ["body", "title"])
        #expect(Data(base64Encoded: try #require(object["payloadBase64"] as? String)) == Data(entry.payload))
    }

    @Test func integerFieldsAreJSONNumbers() throws {
        let line = try EntryFormatter().jsonLine(
            Self.entry(
                .requestCompleted("r1", fingerprint: 9, response: ModifyRecordsResponse()), at: 5))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let fields = try #require(object["fields"] as? [String: Any])
        #expect(fields["request"] as? String == "r1")
        #expect(fields["saved"] as? Int == 0)
        #expect(fields["failed"] as? Int == 0)
        #expect(
            line.contains(#""fields":{"request":"r1","fingerprint":"0x00000009","saved":0,"deleted":0,"failed":0}"#))
    }

    @Test func aCustomDecoderIsTheHook() throws {
        let decoder = EntryDecoder(kinds: [(7, "greeting")]) {
            (entry: LogEntry) throws(LogStoreError) -> EntryDescription? in
            entry.kind == 7
                ? EntryDescription(
                    kindName: "greeting", fields: [.init("text", .text(String(decoding: entry.payload, as: UTF8.self)))]
                ) : nil
        }
        let formatter = EntryFormatter(decoder: decoder)
        let greeting = LogEntry(
            offset: 1, kind: 7, time: .init(microsecondsSince1970: 0), payload: Array("hello world".utf8))
        #expect(try formatter.textLine(greeting).hasSuffix("size     11  greeting  text=\"hello world\""))
        let other = LogEntry(offset: 2, kind: 8, time: .init(microsecondsSince1970: 0), payload: [0x41])
        #expect(try formatter.textLine(other).hasSuffix("|A|"))
        #expect(try formatter.describe(other) == nil)
    }

    @Test func aDescriptionWithoutFieldsIsJustTheKindName() {
        let entry = LogEntry(offset: 1, kind: 7, time: .init(microsecondsSince1970: 0), payload: [])
        #expect(
            EntryFormatter().textLine(entry, description: EntryDescription(kindName: "tick")).hasSuffix(
                "size      0  tick"))
        #expect(
            EntryFormatter().jsonLine(entry, description: EntryDescription(kindName: "tick")).contains(
                #""kindName":"tick","size":0,"fields":{},"#))
    }

    @Test(arguments: [
        ("Notes", "Notes"),
        ("bob@example.com", "bob@example.com"),
        ("café…", "café…"),
        ("", #""""#),
        ("two words", #""two words""#),
        ("a=b", #""a=b""#),
        ("x,y", #""x,y""#),
        ("[x]", #""[x]""#),
        (#"say "hi""#, #""say \"hi\"""#),
        (#"back\slash"#, #""back\\slash""#),
        ("line\nbreak\ttab\r", #""line\nbreak\ttab\r""#),
        ("bell\u{7}", #""bell\u{7}""#),
        ("nbsp\u{A0}", "\"nbsp\u{A0}\""),
    ])
    func wordsAreQuotedOnlyWhenNeeded(text: String, expected: String) {
        #expect(EntryFormatter.word(text) == expected)
    }

    @Test func listsAndNumbersAsText() {
        #expect(EntryFormatter.text(.list([])) == "[]")
        #expect(EntryFormatter.text(.list(["a", "b c", ""])) == #"[a,"b c",""]"#)
        #expect(EntryFormatter.text(.integer(UInt64.max)) == "18446744073709551615")
        #expect(
            EntryFormatter.fieldsText([.init("a", .text("x")), .init("n", .integer(3)), .init("l", .list(["p"]))])
                == "a=x n=3 l=[p]")
    }

    @Test(arguments: [
        "plain", "", "quote \" and backslash \\", "controls \u{0}\u{1}\u{8}\u{C}\n\r\t\u{1F}\u{7F}",
        "unicode é ✓ 🎉 \u{2028}\u{2029}",
    ])
    func jsonStringsRoundTrip(text: String) throws {
        let encoded = EntryFormatter.jsonString(text)
        #expect(!encoded.unicodeScalars.contains { $0.value < 0x20 })
        let decoded = try JSONSerialization.jsonObject(with: Data(("[" + encoded + "]").utf8)) as? [String]
        #expect(decoded == [text])
    }

    @Test func jsonStringEscapes() {
        #expect(EntryFormatter.jsonString("a\"b\\c\nd\u{1}") == #""a\"b\\c\nd\u0001""#)
    }

    // MARK: Filter

    @Test(
        arguments: [
            (EntryFilter(), [1, 2, 3, 4, 5]),
            (EntryFilter(kinds: [103]), [2, 3]),
            (EntryFilter(kinds: [103, 104]), [2, 3, 4]),
            (EntryFilter(kinds: [1]), [5]),
            (EntryFilter(recordName: "n1"), [2, 3, 4]),  // in any zone
            (EntryFilter(recordName: "n1", zoneName: "Notes"), [2, 4]),
            (EntryFilter(zoneName: "Notes"), [1, 2, 4]),
            (EntryFilter(zoneName: "Trash"), [3]),
            (EntryFilter(kinds: [104], recordName: "n1"), [4]),
            (EntryFilter(kinds: [103], zoneName: "Notes"), [2]),
            (EntryFilter(recordName: "nope"), []),
        ] as [(EntryFilter, [UInt64])])
    func filters(filter: EntryFilter, expected: [UInt64]) throws {
        let trash = RecordZone.ID(zoneName: "Trash")
        let entries = [
            Self.entry(.zoneSaved(RecordZone(zoneID: Self.notes, capabilities: .customZoneDefault)), at: 1),
            Self.entry(
                .recordSaved(Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))),
                at: 2),
            Self.entry(
                .recordSaved(Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: trash))), at: 3),
            Self.entry(.recordDeleted(Record.ID(recordName: "n1", zoneID: Self.notes), recordType: "Note"), at: 4),
            LogEntry(offset: 5, kind: 1, time: Self.time, payload: Array("n1".utf8)),
        ]
        let kept = try entries.filter { filter.matches($0, description: try EntryFormatter().describe($0)) }
        #expect(kept.map(\.offset.rawValue) == expected)
    }

    @Test(
        arguments: [
            ("recordSaved", 103), ("RECORDSAVED", 103), ("userRegistered", 120), ("zoneDeleted", 102),
            ("103", 103), ("0", 0), ("65535", 65535), ("7", 7),
        ] as [(String, UInt16)])
    func kindsByNameOrNumber(text: String, expected: UInt16) throws {
        #expect(try EntryFilter.kind(named: text, decoder: .server) == EntryKind(expected))
    }

    @Test(arguments: ["recordSave", "65536", "-1", "", "kind103"])
    func unknownKindsListTheNames(text: String) {
        #expect(
            throws: DiagnosticsError(
                .unknownKind,
                "unknown kind \"\(text)\": give a number from 0 to 65535 or one of zoneSaved (101), zoneDeleted (102), recordSaved (103), recordDeleted (104), subscriptionSaved (105), subscriptionDeleted (106), requestCompleted (107), tombstonesCompacted (108), clientChangeTokenUpdated (109), sharedZoneJoined (110), sharedZoneChanged (111), sharedZoneLeft (112), requestOutcome (113), assetStored (114), assetsDeleted (115), operationGroupStarted (116), schemaDeployed (117), deviceKeyRegistered (118), zoneKeysSaved (119), userRegistered (120), userEmailSet (121), userDeleted (122)"
            )
        ) {
            try EntryFilter.kind(named: text, decoder: .server)
        }
        #expect(throws: DiagnosticsError(.unknownKind, "unknown kind \"\(text)\": give a number from 0 to 65535")) {
            try EntryFilter.kind(named: text, decoder: nil)
        }
    }

    // MARK: Dumper

    @Test func theDumperFiltersAndDescribes() throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            try log.append([
                ServerEntry.zoneSaved(RecordZone(zoneID: Self.notes, capabilities: .customZoneDefault)).newEntry,
                ServerEntry.recordSaved(
                    Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))
                ).newEntry,
                NewEntry(kind: 1, payload: [0x41]),
                ServerEntry.recordDeleted(Record.ID(recordName: "n1", zoneID: Self.notes), recordType: "Note").newEntry,
            ])
            var text = ""
            #expect(try EntryDumper(filter: EntryFilter(recordName: "n1")).dump(log, to: &text) == 2)
            let lines = text.split(separator: "\n").map(String.init)
            #expect(lines.map(offsetOfTextLine) == [2, 4])
            #expect(lines[0].hasSuffix("  recordSaved  zone=Notes record=n1 type=Note keys=[]"))
            #expect(lines[1].hasSuffix("  recordDeleted  zone=Notes record=n1 type=Note"))

            var all = ""
            #expect(try EntryDumper().dump(log, to: &all) == 4)
            #expect(all.split(separator: "\n")[2].hasSuffix("|A|"))
        }
    }

    /// A payload the decoder cannot read stops the dump like a bad checksum: the entries before
    /// it are written, and the error names the offset, the log and its path.
    @Test(arguments: [EntryDumper.Format.text, .jsonLines])
    func anUndecodableServerEntryStopsTheDump(format: EntryDumper.Format) throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, named: "private", options: .init(durability: .fast))
            try log.append([
                ServerEntry.zoneSaved(RecordZone(zoneID: Self.notes, capabilities: .customZoneDefault)).newEntry,
                ServerEntry.tombstonesCompacted(horizon: 1).newEntry,
                NewEntry(kind: 103, payload: [0xFF, 0xFF]),
                ServerEntry.tombstonesCompacted(horizon: 2).newEntry,
            ])
            var text = ""
            let error = try #require(throws: LogStoreError.self) {
                try EntryDumper(format: format, filter: EntryFilter(kinds: [108])).dump(log, to: &text)
            }
            #expect(error.code == .corruptEntry)
            #expect(error.offset == 3)
            #expect(
                error.description.hasPrefix(
                    "corrupt entry at offset 3 of log \"private\" in \(log.environment.path): recordSaved (kind 103) payload: "
                ), "\(error)")
            #expect(text.split(separator: "\n").count == 1)
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
