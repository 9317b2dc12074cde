import Foundation
import LogStore
import LogSync

/// What `logtool replay` prints: a device log's engine state after one offset
/// (`DeviceLog.state(at:)`), in plain aligned text or as one JSON object; and the parts of a
/// state (`fields`) that `logtool diff` compares and shows.
///
/// IDs are written as in `dump`'s lists: a zone by its name (`Notes`, or `Notes@_bob` when its
/// owner is not the current user), a record as `zone/name` (`Notes/n1`).
public enum DeviceStateReport {
    /// The lines, each ending in a line break:
    ///
    /// ```
    /// state at offset:           15
    /// pending record changes:    1
    ///                            1. save Notes/n1
    /// …
    /// zone tokens:               1
    ///                            1. Notes → offset 4
    /// server records:            1
    ///                            1. Notes/n1  Note  tag 3  body=milk title=Groceries
    /// ```
    public static func text(_ state: DeviceState) -> String {
        var lines: [(String, String)] = [("state at offset", String(state.offset.rawValue))]
        for field in fields {
            switch field.text(state) {
            case .value(let value):
                lines.append((field.label, value))
            case .list(let items):
                lines.append((field.label, items.isEmpty ? "none" : "\(items.count)"))
                for (index, item) in items.enumerated() { lines.append(("", "\(index + 1). \(item)")) }
            }
        }
        let width = lines.map(\.0.count).max()! + 1
        return lines.map { label, value in
            rightPadded(label.isEmpty ? "" : label + ":", width: width) + "  " + value + "\n"
        }.joined()
    }

    /// The state as one JSON object on one line (no line break): `offset`, then each field's
    /// `key` in the order of `fields`.
    public static func json(_ state: DeviceState) -> String {
        JSONText.object([("offset", JSONText.number(state.offset.rawValue))] + fields.map { ($0.key, $0.json(state)) })
    }

    // MARK: Fields

    /// A field's text in the report: a value on the label's line, or a numbered list.
    public enum Text: Sendable, Hashable {
        case value(String)
        case list([String])

        /// On one line, as `diff` shows it: the value, or `none`, or `2: a, b`.
        public var oneLine: String {
            switch self {
            case .value(let value): value
            case .list(let items): items.isEmpty ? "none" : "\(items.count): " + items.joined(separator: ", ")
            }
        }
    }

    /// One side of a difference: as text and as JSON.
    public struct Rendering: Sendable, Hashable {
        public var text: String
        public var json: String
    }

    /// How one field of two states differs.
    public struct FieldDifference: Sendable, Hashable {
        /// The item of a field made of items with IDs (zone tokens, server records) that differs.
        public struct Item: Sendable, Hashable {
            /// The item's ID as text (`Notes`, `Notes/n1`).
            public var id: String
            /// The item in the first and in the second state; `nil`: the state has none.
            public var a: Rendering?
            public var b: Rendering?
        }

        /// The field's JSON key, such as `pendingRecordZoneChanges`.
        public var key: String
        /// The field's label in the report, such as `pending record changes`.
        public var label: String
        /// The whole field in the first and the second state; for a field of items, only the
        /// items that differ, as JSON arrays, and their text is empty.
        public var a: Rendering
        public var b: Rendering
        /// For a field of items: the items that differ, in ID order (by their text). Empty for
        /// other fields.
        public var items: [Item]
    }

    /// One part of a device state, with how to show it and how to compare it.
    public struct Field: Sendable {
        /// The JSON key, the `DeviceState` property's name.
        public let key: String
        /// The label in the text report.
        public let label: String
        let text: @Sendable (DeviceState) -> Text
        let json: @Sendable (DeviceState) -> String
        let compare: @Sendable (DeviceState, DeviceState) -> FieldDifference?

        /// How `a` and `b` differ in this field, or `nil` if they do not.
        public func difference(_ a: DeviceState, _ b: DeviceState) -> FieldDifference? { compare(a, b) }

        /// A field compared as a whole. When the two renderings are the same text but the values
        /// differ (a token's incarnation, a record's dates), the text is the values' full
        /// descriptions instead.
        static func whole<V: Equatable & Sendable>(
            _ key: String, _ label: String, _ value: @escaping @Sendable (DeviceState) -> V,
            text: @escaping @Sendable (V) -> Text, json: @escaping @Sendable (V) -> String
        ) -> Field {
            Field(
                key: key, label: label, text: { text(value($0)) }, json: { json(value($0)) },
                compare: { a, b in
                    let (left, right) = (value(a), value(b))
                    guard left != right else { return nil }
                    var leftText = text(left).oneLine
                    var rightText = text(right).oneLine
                    if leftText == rightText {
                        leftText = String(describing: left)
                        rightText = String(describing: right)
                    }
                    return FieldDifference(
                        key: key, label: label, a: Rendering(text: leftText, json: json(left)),
                        b: Rendering(text: rightText, json: json(right)), items: [])
                })
        }

        /// A field made of items with IDs (at most one item per ID), compared item by item.
        static func items<V: Equatable & Sendable, ID: Hashable & Sendable>(
            _ key: String, _ label: String, _ value: @escaping @Sendable (DeviceState) -> [V],
            id: @escaping @Sendable (V) -> ID, idText: @escaping @Sendable (ID) -> String, separator: String,
            text: @escaping @Sendable (V) -> String, json: @escaping @Sendable (V) -> String
        ) -> Field {
            Field(
                key: key, label: label,
                text: { state in .list(value(state).map { idText(id($0)) + separator + text($0) }) },
                json: { state in JSONText.array(value(state).map(json)) },
                compare: { a, b in
                    let (left, right) = (value(a), value(b))
                    guard left != right else { return nil }
                    let leftByID = Dictionary(left.map { (id($0), $0) }, uniquingKeysWith: { first, _ in first })
                    let rightByID = Dictionary(right.map { (id($0), $0) }, uniquingKeysWith: { first, _ in first })
                    var differing: [(ID, V?, V?)] = []
                    for key in Set(leftByID.keys).union(rightByID.keys) where leftByID[key] != rightByID[key] {
                        differing.append((key, leftByID[key], rightByID[key]))
                    }
                    differing.sort { idText($0.0) < idText($1.0) }
                    let items = differing.map { key, l, r in
                        var leftText = l.map(text)
                        var rightText = r.map(text)
                        if let l, let r, leftText == rightText {
                            leftText = String(describing: l)
                            rightText = String(describing: r)
                        }
                        return FieldDifference.Item(
                            id: idText(key), a: l.map { Rendering(text: leftText!, json: json($0)) },
                            b: r.map { Rendering(text: rightText!, json: json($0)) })
                    }
                    return FieldDifference(
                        key: key, label: label,
                        a: Rendering(text: "", json: JSONText.array(differing.compactMap { $0.1.map(json) })),
                        b: Rendering(text: "", json: JSONText.array(differing.compactMap { $0.2.map(json) })),
                        items: items)
                })
        }
    }

    /// The parts of a state after its offset, in the order `text` shows them.
    public static let fields: [Field] = [
        .whole(
            "pendingRecordZoneChanges", "pending record changes", { $0.pendingRecordZoneChanges },
            text: { .list($0.map(change)) }, json: { JSONText.array($0.map(changeJSON)) }),
        .whole(
            "pendingDatabaseChanges", "pending database changes", { $0.pendingDatabaseChanges },
            text: { .list($0.map(change)) }, json: { JSONText.array($0.map(changeJSON)) }),
        .whole(
            "inFlightRecordZoneChanges", "in-flight record changes", { $0.inFlightRecordZoneChanges },
            text: { .list($0.map(change)) }, json: { JSONText.array($0.map(changeJSON)) }),
        .whole(
            "hasPendingUntrackedChanges", "untracked changes", { $0.hasPendingUntrackedChanges },
            text: { .value($0 ? "yes" : "no") }, json: JSONText.bool),
        .whole(
            "zoneIDsWithUnfetchedServerChanges", "unfetched zones", { $0.zoneIDsWithUnfetchedServerChanges },
            text: { .value(ids($0)) }, json: { JSONText.strings($0.map(zone)) }),
        .whole(
            "knownZoneIDs", "known zones", { $0.knownZoneIDs },
            text: { .value(ids($0)) }, json: { JSONText.strings($0.map(zone)) }),
        .whole(
            "databaseChangeToken", "database token", { $0.databaseChangeToken },
            text: { .value($0.map { "present, offset \($0.offset)" } ?? "none") },
            json: { token in
                JSONText.optional(token.map { JSONText.object([("offset", JSONText.number($0.offset.rawValue))]) })
            }),
        .items(
            "zoneChangeTokens", "zone tokens", { $0.zoneChangeTokens }, id: \.zoneID, idText: zone, separator: " → ",
            text: { "offset \($0.offset)" },
            json: { token in
                JSONText.object([
                    ("zone", JSONText.string(zone(token.zoneID))), ("incarnation", JSONText.number(token.incarnation)),
                    ("offset", JSONText.number(token.offset.rawValue)),
                ])
            }),
        .items(
            "lastKnownServerRecords", "server records", { $0.lastKnownServerRecords }, id: \.recordID, idText: record,
            separator: "  ", text: recordSummary, json: recordJSON),
        .whole(
            "deliveredOffset", "delivered through", { $0.deliveredOffset },
            text: { .value($0.map { String($0.rawValue) } ?? "none") },
            json: { JSONText.optional($0.map { JSONText.number($0.rawValue) }) }),
        .whole("account", "account", { $0.account }, text: { .value(account($0)) }, json: accountJSON),
        .whole(
            "subscriptionID", "subscription", { $0.subscriptionID },
            text: { .value($0?.rawValue ?? "none") },
            json: { JSONText.optional($0.map { JSONText.string($0.rawValue) }) }),
    ]

    // MARK: IDs and changes

    /// `save Notes/n1`, `delete Notes/n2`.
    public static func change(_ change: SyncEngine.PendingRecordZoneChange) -> String {
        switch change {
        case .saveRecord(let id): "save " + record(id)
        case .deleteRecord(let id): "delete " + record(id)
        }
    }

    /// `save Notes`, `delete Trash`.
    public static func change(_ change: SyncEngine.PendingDatabaseChange) -> String {
        switch change {
        case .saveZone(let zone): "save " + self.zone(zone.zoneID)
        case .deleteZone(let id): "delete " + zone(id)
        }
    }

    /// `Notes`, or `Notes@owner` when the owner is not the current user.
    public static func zone(_ id: RecordZone.ID) -> String {
        id.ownerName == RecordZone.ID.defaultOwnerName ? id.zoneName : id.zoneName + "@" + id.ownerName
    }

    /// `Notes/n1`.
    public static func record(_ id: Record.ID) -> String { zone(id.zoneID) + "/" + id.recordName }

    static func ids(_ zones: [RecordZone.ID]) -> String {
        zones.isEmpty ? "none" : "\(zones.count): " + zones.map(zone).joined(separator: ", ")
    }

    static func account(_ account: DeviceState.Account) -> String {
        switch account {
        case .never: "never checked"
        case .signedOut: "signed out"
        case .user(let id): "user \(id.recordName)"
        }
    }

    static func changeJSON(_ change: SyncEngine.PendingRecordZoneChange) -> String {
        switch change {
        case .saveRecord(let id): JSONText.object([("change", "\"save\""), ("record", JSONText.string(record(id)))])
        case .deleteRecord(let id):
            JSONText.object([("change", "\"delete\""), ("record", JSONText.string(record(id)))])
        }
    }

    static func changeJSON(_ change: SyncEngine.PendingDatabaseChange) -> String {
        switch change {
        case .saveZone(let zone):
            JSONText.object([("change", "\"save\""), ("zone", JSONText.string(self.zone(zone.zoneID)))])
        case .deleteZone(let id): JSONText.object([("change", "\"delete\""), ("zone", JSONText.string(zone(id)))])
        }
    }

    static func accountJSON(_ account: DeviceState.Account) -> String {
        switch account {
        case .never: JSONText.object([("status", "\"never\"")])
        case .signedOut: JSONText.object([("status", "\"signedOut\"")])
        case .user(let id): JSONText.object([("status", "\"user\""), ("user", JSONText.string(id.recordName))])
        }
    }

    // MARK: Records

    /// How many fields `recordSummary` shows, and how many characters of a text value.
    static let summaryFieldCount = 4
    static let summaryTextLength = 24

    /// A record in short: `Note  tag 3  body=milk title=Groceries` — its type, its change tag
    /// (`tag none` if it has none) and its first four fields in key order as `key=value` (then
    /// `…+N` for the others). Text is cut at 24 characters (`…`) and written as `dump` writes
    /// words; other values as `bytes(N)`, `date(…)`, `ref(zone/name)`, `asset(name)`,
    /// `list(N)`.
    public static func recordSummary(_ record: Record) -> String {
        var text =
            EntryFormatter.word(record.recordType) + "  tag "
            + (record.recordChangeTag.map(EntryFormatter.word) ?? "none")
        let keys = record.allKeys()
        guard !keys.isEmpty else { return text }
        var shown = keys.prefix(summaryFieldCount).map { key in
            EntryFormatter.word(key) + "=" + (record[key].map(shortValue) ?? "none")
        }
        if keys.count > summaryFieldCount { shown.append("…+\(keys.count - summaryFieldCount)") }
        text += "  " + shown.joined(separator: " ")
        return text
    }

    static func shortValue(_ value: RecordValue) -> String {
        switch value {
        case .string(let text):
            return EntryFormatter.word(
                text.count > summaryTextLength ? String(text.prefix(summaryTextLength)) + "…" : text)
        case .int64(let number): return String(number)
        case .double(let number): return String(number)
        case .bool(let flag): return flag ? "true" : "false"
        case .bytes(let data): return "bytes(\(data.count))"
        case .date(let date): return "date(\(iso8601(date)))"
        case .reference(let reference): return "ref(" + EntryFormatter.word(record(reference.recordID)) + ")"
        case .asset(let asset): return "asset(" + asset.compactDescription(withCacheState: true) + ")"
        case .location(let location): return "location(\(location.latitude),\(location.longitude))"
        case .list(let items): return "list(\(items.count))"
        case .encrypted(.opened(let plaintext)): return "encrypted(" + shortValue(plaintext) + ")"
        case .encrypted(.sealed(let sealed)): return "sealed(v\(sealed.keyVersion),\(sealed.box.count)B)"
        }
    }

    /// A record as JSON: `record`, `type`, `tag` (`null` if none) and `fields`, every field in
    /// key order with its whole value: text, number, `true`/`false`; bytes in base 64, a date as
    /// ISO 8601, a reference as `zone/name`, an asset as `sha256`, `size`, `file` and `cached`, a
    /// location as its eight values, a list
    /// as an array, an encrypted field as `{"encrypted": value}` (opened on this device) or
    /// `{"sealed": {keyVersion, bytes}}`.
    static func recordJSON(_ record: Record) -> String {
        JSONText.object([
            ("record", JSONText.string(self.record(record.recordID))),
            ("type", JSONText.string(record.recordType)),
            ("tag", JSONText.optional(record.recordChangeTag.map(JSONText.string))),
            ("fields", JSONText.object(record.allKeys().map { key in (key, record[key].map(valueJSON) ?? "null") })),
        ])
    }

    static func valueJSON(_ value: RecordValue) -> String {
        switch value {
        case .string(let text): JSONText.string(text)
        case .int64(let number): String(number)
        case .double(let number): number.isFinite ? String(number) : JSONText.string(String(number))
        case .bool(let flag): JSONText.bool(flag)
        case .bytes(let data): JSONText.string(data.base64EncodedString())
        case .date(let date): JSONText.string(iso8601(date))
        case .reference(let reference): JSONText.string(record(reference.recordID))
        case .location(let location):
            JSONText.object([
                ("latitude", JSONText.double(location.latitude)), ("longitude", JSONText.double(location.longitude)),
                ("altitude", JSONText.double(location.altitude)),
                ("horizontalAccuracy", JSONText.double(location.horizontalAccuracy)),
                ("verticalAccuracy", JSONText.double(location.verticalAccuracy)),
                ("course", JSONText.double(location.course)),
                ("speed", JSONText.double(location.speed)), ("timestamp", JSONText.string(iso8601(location.timestamp))),
            ])
        case .asset(let asset):
            JSONText.object([
                ("sha256", JSONText.optional(asset.digest.map { JSONText.string($0.hex) })),
                ("size", JSONText.optional(asset.size.map { String($0) })),
                ("file", JSONText.optional(asset.fileURL.map { JSONText.string($0.path) })),
                ("cached", JSONText.bool(asset.isCached)),
            ])
        case .list(let items): JSONText.array(items.map(valueJSON))
        case .encrypted(.opened(let plaintext)): JSONText.object([("encrypted", valueJSON(plaintext))])
        case .encrypted(.sealed(let sealed)):
            JSONText.object([
                (
                    "sealed",
                    JSONText.object([("keyVersion", String(sealed.keyVersion)), ("bytes", String(sealed.box.count))])
                )
            ])
        }
    }

    /// A date as `dump` writes times (ISO 8601 UTC, microseconds).
    static func iso8601(_ date: Date) -> String {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        let clamped = micros.isFinite ? min(max(micros, -9.2e18), 9.2e18) : 0
        return EntryTime(microsecondsSince1970: Int64(clamped)).iso8601
    }
}
