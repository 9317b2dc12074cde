import Testing

@testable import SyncModel

/// One case of the identifier table: a kind, a text, and the rule it breaks (`nil`: valid).
struct IdentifierCase: Sendable, CustomStringConvertible {
    let kind: Identifier
    let text: String
    let rule: String?
    let label: String

    var description: String { "\(kind) \(label)" }

    /// Every kind's valid edge cases and each way it can be invalid (Docs/Protocol.md,
    /// "Identifiers").
    static let table: [IdentifierCase] = Identifier.allCases.flatMap { kind -> [IdentifierCase] in
        let longest = String(repeating: "x", count: kind.maxBytes)
        var cases = [
            IdentifierCase(kind: kind, text: "a", rule: nil, label: "one character"),
            IdentifierCase(kind: kind, text: longest, rule: nil, label: "\(kind.maxBytes) bytes"),
            IdentifierCase(kind: kind, text: "a-b.c:d@e", rule: nil, label: "punctuation"),
            IdentifierCase(kind: kind, text: "", rule: "must not be empty", label: "empty"),
            IdentifierCase(
                kind: kind, text: longest + "x", rule: "\(kind.maxBytes + 1) bytes long, more than \(kind.maxBytes)",
                label: "one byte too long"),
            IdentifierCase(kind: kind, text: "a\u{0}b", rule: "NUL", label: "NUL"),
            IdentifierCase(kind: kind, text: "a\u{1}b", rule: "control characters (it holds U+0001)", label: "U+0001"),
            IdentifierCase(kind: kind, text: "a\nb", rule: "control characters (it holds U+000A)", label: "line feed"),
            IdentifierCase(kind: kind, text: "a\u{7F}", rule: "control characters (it holds U+007F)", label: "DEL"),
            IdentifierCase(
                kind: kind, text: "a\u{85}", rule: "control characters (it holds U+0085)", label: "C1 control"),
            IdentifierCase(kind: kind, text: "a\u{FFFD}", rule: "valid UTF-8", label: "U+FFFD"),
        ]
        if kind.isASCIIOnly {
            cases.append(IdentifierCase(kind: kind, text: "café", rule: "must be ASCII", label: "non-ASCII"))
        } else {
            cases.append(IdentifierCase(kind: kind, text: "café-名前", rule: nil, label: "non-ASCII"))
            // The limit is in bytes: 2-byte characters reach it at half the characters.
            let twoByte = String(repeating: "é", count: kind.maxBytes / 2)
            cases.append(IdentifierCase(kind: kind, text: twoByte, rule: nil, label: "multi-byte at the limit"))
            cases.append(
                IdentifierCase(
                    kind: kind, text: twoByte + "é", rule: "more than \(kind.maxBytes)",
                    label: "multi-byte over the limit"))
        }
        if kind.reservesLeadingUnderscore {
            cases.append(
                IdentifierCase(kind: kind, text: "_x", rule: "must not start with \"_\"", label: "leading underscore"))
        } else {
            cases.append(IdentifierCase(kind: kind, text: "_x", rule: nil, label: "leading underscore"))
        }
        cases.append(IdentifierCase(kind: kind, text: "x_", rule: nil, label: "trailing underscore"))
        if kind == .userID {
            cases.append(
                IdentifierCase(
                    kind: kind, text: " alice", rule: "must not start or end with a space", label: "leading space"))
            cases.append(
                IdentifierCase(
                    kind: kind, text: "alice ", rule: "must not start or end with a space", label: "trailing space"))
            cases.append(IdentifierCase(kind: kind, text: "alice smith", rule: nil, label: "inner space"))
        }
        return cases
    }
}

/// The rules of every identifier kind, in one table (Docs/Protocol.md, "Identifiers").
struct IdentifierTests {
    @Test("each identifier kind: valid edge cases pass, each broken rule is named", arguments: IdentifierCase.table)
    func rules(_ item: IdentifierCase) throws {
        let problem = item.kind.violation(item.text)
        guard let rule = item.rule else {
            #expect(problem == nil)
            try item.kind.validate(item.text)
            return
        }
        let found = try #require(problem)
        #expect(found.contains(rule), "\(found)")
        let error = try #require(throws: SyncError.self) { try item.kind.validate(item.text) }
        #expect(error.code == .invalidArguments)
        #expect(error.message.hasPrefix("invalid \(item.kind) "), "the message names the kind: \(error.message)")
        #expect(error.message.contains(rule))
    }

    @Test("bytes that are not UTF-8 are refused, whatever the kind", arguments: Identifier.allCases)
    func invalidUTF8(_ kind: Identifier) {
        #expect(kind.violation(utf8: [0x61, 0xFF, 0x62]) == "must be valid UTF-8")
        #expect(kind.violation(utf8: [0x61, 0xC3]) == "must be valid UTF-8", "a truncated sequence")
        #expect(kind.violation(utf8: [0xC0, 0x80]) == "must be valid UTF-8", "an overlong NUL")
        #expect(kind.violation(utf8: Array("ok".utf8)) == nil)
    }

    @Test("_defaultZone is the one zone name starting with an underscore")
    func defaultZoneException() throws {
        #expect(Identifier.zoneName.violation("_defaultZone", allowing: RecordZone.ID.defaultZoneName) == nil)
        #expect(Identifier.zoneName.violation("_defaultZone") != nil)
        try RecordZone.ID.default.validate()
    }

    @Test("a long identifier is cut in the message, with its length")
    func longIdentifierMessage() {
        let error = #expect(throws: SyncError.self) {
            try Identifier.requestID.validate(String(repeating: "r", count: 10_000))
        }
        #expect(error?.message.contains("(10000 bytes)") == true)
        #expect((error?.message.utf8.count ?? .max) < 300)
    }

    @Test("the typed IDs check their kind's rules")
    func typedIDs() throws {
        let subscription = Subscription.ID("")
        let error = try #require(throws: SyncError.self) { try subscription.validate() }
        #expect(error.item == .subscription(subscription))
        #expect(error.message.contains("invalid subscription ID"))
        #expect(throws: SyncError.self) { try RequestID("a\u{0}").validate() }
        #expect(throws: SyncError.self) { try DeviceID(String(repeating: "d", count: 256)).validate() }
        try DeviceID(String(repeating: "d", count: 255)).validate()
        let zoneSubscription = Subscription(subscriptionID: "s", kind: .recordZone(RecordZone.ID(zoneName: "_bad")))
        let zoneError = try #require(throws: SyncError.self) { try zoneSubscription.validate() }
        #expect(zoneError.item == .subscription("s"))
        #expect(zoneError.message.contains("invalid zone name"))
    }

    @Test("references and desired keys follow the rules too")
    func referencesAndDesiredKeys() throws {
        var record = Record(
            recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes")))
        record["link"] = .reference(
            Record.Reference(
                recordID: Record.ID(recordName: "a\u{0}b", zoneID: RecordZone.ID(zoneName: "Notes"))))
        let error = try #require(throws: SyncError.self) { try record.validate() }
        #expect(error.message.contains("of a reference"))
        let request = FetchZoneChangesRequest(zoneID: RecordZone.ID(zoneName: "Notes"), desiredKeys: ["title", ""])
        let keyError = try #require(throws: SyncError.self) { try request.validate() }
        #expect(keyError.message.contains("invalid field key"))
    }
}
