import Foundation
import LogStore
import LogSync

/// `logtool diff`: where two device logs part, as entries and as engine states — a forked
/// timeline (`rewind(to:into:)`) that went on differently, two runs of one scenario, a log and
/// its copy.
///
/// Both logs are read once, side by side. Each entry is copied into a scratch device log of its
/// side, whose index rebuilds as the entries are appended; the engine states are compared after
/// each offset from the first entry that differs on. Up to there the entries agree, so the
/// states do too (the index is a pure function of the entries), and the copies are appended in
/// batches without being read. After it, a side's state is read (`DeviceLog.snapshotState()`)
/// only when its entry changed the index's stored bytes (`DeviceLog.indexBytes()`): an entry
/// that marks the timeline costs an append and a byte comparison, no decoding.
///
/// Entries are compared by kind and payload, not by time: a replay of the same steps at another
/// time writes the same entries.
public struct DeviceDiff: Sendable, Hashable {
    /// One of the two logs.
    public struct Side: Sendable, Hashable {
        /// The environment's directory.
        public var path: String
        /// The log's last offset when it was opened.
        public var lastOffset: LogOffset
    }

    /// An entry's kind, and its name when it is a device kind.
    public struct Kind: Sendable, Hashable {
        public var kind: EntryKind
        public var name: String?

        /// `batchPrepared (kind 11)`.
        public var text: String { (name.map { $0 + " " } ?? "") + "(kind \(kind.rawValue))" }
    }

    /// The first offset at which the logs hold different entries.
    public struct EntryDifference: Sendable, Hashable {
        public var offset: LogOffset
        /// The kind of each log's entry there; `nil`: that log ends before `offset`.
        public var a: Kind?
        public var b: Kind?
    }

    /// The first offset after which the engine states differ, and how.
    public struct StateDifference: Sendable, Hashable {
        /// The offset after which the states differ.
        public var offset: LogOffset
        /// The offsets of the two states compared: `offset` for a log that reaches it, the
        /// log's last offset for one that ended before (its final state).
        public var aOffset: LogOffset
        public var bOffset: LogOffset
        /// Every field that differs, in the order of `DeviceStateReport.fields`.
        public var fields: [DeviceStateReport.FieldDifference]
    }

    public var a: Side
    public var b: Side
    /// Where the entries first differ, or `nil` if the logs hold the same entries.
    public var entries: EntryDifference?
    /// Where the states first differ, or `nil` if they agree after every offset of the longer
    /// log (a log that ended counting with its final state).
    public var states: StateDifference?

    /// Whether the logs hold the same entries (and so give the same states).
    public var isIdentical: Bool { entries == nil && states == nil }

    /// Compares the device logs in `pathA` and `pathB`, opened read-only (engines may be
    /// running on them), in one pass; the scratch logs are made in the system's temporary
    /// directory and removed before returning.
    ///
    /// Reading stops at the first state difference, so entries after it are not checked.
    ///
    /// - Parameters:
    ///   - pathA: The directory of the first device log.
    ///   - pathB: The directory of the second device log.
    ///   - progress: Told of each offset compared (of the longer log's length).
    /// - Throws: `LogStoreError` for a missing path, a directory without a log, or a corrupt
    ///   entry (naming its offset, log and path); ``DiagnosticsError`` for a directory that holds no
    ///   device log, or a replay that fails in a scratch log.
    /// - Complexity: O(n) appends for the common prefix, then per offset one append and a
    ///   comparison of the index's bytes, and a state read (O(the state's size)) when it changed.
    public static func compare(
        _ pathA: String, _ pathB: String, progress: (ProgressEvent) -> Void = { _ in }
    ) throws -> DeviceDiff {
        let logA = try DeviceReplay.openDeviceLogEntries(at: pathA)
        let logB = try DeviceReplay.openDeviceLogEntries(at: pathB)
        let (lastA, lastB) = (try logA.lastOffset, try logB.lastOffset)
        var diff = DeviceDiff(
            a: Side(path: logA.environment.path, lastOffset: lastA),
            b: Side(path: logB.environment.path, lastOffset: lastB))

        let scratch = try ScratchDirectory(prefix: "logtool-diff")
        defer { scratch.remove() }
        let copyA = try scratch.deviceLog(named: "a")
        let copyB = try scratch.deviceLog(named: "b")
        var replayA = DeviceLogReplayer(source: logA, into: copyA)
        var replayB = DeviceLogReplayer(source: logB, into: copyB)
        var cursorA = try logA.entries(from: .first, through: lastA)
        var cursorB = try logB.entries(from: .first, through: lastB)
        let total = max(lastA, lastB).rawValue
        // Each side once the logs have parted: its state after its latest entry, and its index
        // as bytes, so that the state is read again only when an entry changed the index.
        var sideA = DivergedSide(copy: copyA)
        var sideB = DivergedSide(copy: copyB)
        var offset = LogOffset.zero
        while true {
            let entryA = try cursorA.next()
            let entryB = try cursorB.next()
            guard entryA != nil || entryB != nil else { break }
            offset = offset.next
            if let entryA { try DeviceReplay.checkedDeviceEntry(entryA, of: logA) }
            if let entryB { try DeviceReplay.checkedDeviceEntry(entryB, of: logB) }
            progress(.entries(done: offset.rawValue, total: total))

            if diff.entries == nil {
                if let entryA, let entryB, entryA.kind == entryB.kind, entryA.payload == entryB.payload {
                    try replayA.add(entryA)
                    try replayB.add(entryB)
                    continue
                }
                diff.entries = EntryDifference(offset: offset, a: entryA.map(kind), b: entryB.map(kind))
                try replayA.flush()
                try replayB.flush()
            }
            let changedA = try sideA.advance(with: entryA, replayer: &replayA)
            let changedB = try sideB.advance(with: entryB, replayer: &replayB)
            guard changedA || changedB, let stateA = sideA.state, let stateB = sideB.state else { continue }
            let fields = DeviceStateReport.fields.compactMap { $0.difference(stateA, stateB) }
            if !fields.isEmpty {
                diff.states = StateDifference(
                    offset: offset, aOffset: stateA.offset, bOffset: stateB.offset, fields: fields)
                break
            }
        }
        return diff
    }

    /// One log's scratch copy once the logs have parted.
    struct DivergedSide {
        let copy: DeviceLog
        /// The state after the copy's last entry, once read.
        var state: DeviceState?
        /// The copy's index as bytes when `state` was read.
        var index: [UInt8] = []

        init(copy: DeviceLog) { self.copy = copy }

        /// Appends `entry` (`nil`: this log has ended) and brings `state` up to date; returns
        /// whether the state may have changed (it is read again only if the index did).
        mutating func advance(with entry: LogEntry?, replayer: inout DeviceLogReplayer) throws -> Bool {
            if let entry {
                try replayer.append(entry)
            } else if state != nil {
                return false  // ended: its last state stands
            }
            let bytes = try copy.indexBytes()
            guard state == nil || bytes != index else {
                state!.offset = entry!.offset
                return false
            }
            index = bytes
            state = try copy.snapshotState()
            return true
        }
    }

    static func kind(_ entry: LogEntry) -> Kind {
        Kind(kind: entry.kind, name: EntryDecoder.device.name(of: entry.kind))
    }

    // MARK: Output

    /// The text `logtool diff` prints, lines ending in line breaks:
    ///
    /// ```
    /// A: /tmp/x/laptop, log "device", 17 entries
    /// B: /tmp/x/spliced, log "device", 5 entries
    /// entries first differ at offset 5: A zoneChangesFetched (kind 22), B zoneChangesFetched (kind 22)
    /// states first differ after offset 5:
    ///   zone tokens, Notes:
    ///     A: offset 4
    ///     B: offset 11
    ///   server records, Notes/n2:
    ///     A: Note  tag 3  title=Draft
    ///     B: none
    /// ```
    ///
    /// A field made of items (zone tokens, server records) is shown item by item, for the IDs
    /// that differ only (at most `maxItems`, then how many more).
    public var text: String {
        var text = "A: \(Self.describe(a))\nB: \(Self.describe(b))\n"
        guard let entries else {
            let count = a.lastOffset.rawValue
            return text
                + "no difference: the same \(count) entr\(count == 1 ? "y" : "ies") (kinds and payloads), so the same engine state after each\n"
        }
        text += "entries first differ at offset \(entries.offset): "
        text += "A " + Self.describe(entries.a, side: a) + ", B " + Self.describe(entries.b, side: b) + "\n"
        guard let states else {
            let through = max(a.lastOffset, b.lastOffset)
            var line = "states do not differ: the same engine state after each offset through \(through)"
            if a.lastOffset != b.lastOffset {
                let (shorter, end) = a.lastOffset < b.lastOffset ? ("A", a.lastOffset) : ("B", b.lastOffset)
                line += " (\(shorter)'s last, after offset \(end), for the offsets past its end)"
            }
            return text + line + "\n"
        }
        text += "states first differ after offset \(states.offset)"
        if states.aOffset != states.offset { text += " (A's last state, after offset \(states.aOffset))" }
        if states.bOffset != states.offset { text += " (B's last state, after offset \(states.bOffset))" }
        text += ":\n"
        for field in states.fields {
            if field.items.isEmpty {
                text += "  \(field.label):\n    A: \(field.a.text)\n    B: \(field.b.text)\n"
                continue
            }
            for item in field.items.prefix(Self.maxItems) {
                text += "  \(field.label), \(item.id):\n"
                text += "    A: \(item.a?.text ?? "none")\n    B: \(item.b?.text ?? "none")\n"
            }
            if field.items.count > Self.maxItems {
                text += "  \(field.label): \(field.items.count - Self.maxItems) more differ\n"
            }
        }
        return text
    }

    /// How many differing items of one field `text` shows.
    public static let maxItems = 10

    static func describe(_ side: Side) -> String {
        let count = side.lastOffset.rawValue
        return "\(side.path), log \"\(DeviceLog.logName)\", "
            + (count == 0 ? "empty" : "\(count) entr\(count == 1 ? "y" : "ies")")
    }

    static func describe(_ kind: Kind?, side: Side) -> String {
        kind?.text ?? "has none (it ends at offset \(side.lastOffset))"
    }

    /// The JSON object `logtool diff --json` prints, on one line (no line break), keys in this
    /// order:
    ///
    /// - `a`, `b`: `path`, `lastOffset`;
    /// - `identical`: `true` when the logs hold the same entries;
    /// - `entries`: `null`, or `offset` and `a`, `b`: each `null` (that log ends before) or
    ///   `kind` and `kindName` (`null` for a kind that is not a device kind);
    /// - `states`: `null`, or `offset`, `aOffset`, `bOffset` and `fields`: for each field that
    ///   differs, `field` (the JSON key `replay --json` uses), `label`, then `a` and `b` as
    ///   `replay --json` writes the field; for zone tokens and server records, `ids` (the zones
    ///   or records that differ) and `a`, `b` holding only those items.
    public var json: String {
        func side(_ side: Side) -> String {
            JSONText.object([
                ("path", JSONText.string(side.path)), ("lastOffset", JSONText.number(side.lastOffset.rawValue)),
            ])
        }
        func kind(_ kind: Kind?) -> String {
            JSONText.optional(
                kind.map {
                    JSONText.object([
                        ("kind", JSONText.number($0.kind.rawValue)),
                        ("kindName", JSONText.optional($0.name.map(JSONText.string))),
                    ])
                })
        }
        let entriesJSON = JSONText.optional(
            entries.map {
                JSONText.object([("offset", JSONText.number($0.offset.rawValue)), ("a", kind($0.a)), ("b", kind($0.b))])
            })
        let statesJSON = JSONText.optional(
            states.map { states in
                JSONText.object([
                    ("offset", JSONText.number(states.offset.rawValue)),
                    ("aOffset", JSONText.number(states.aOffset.rawValue)),
                    ("bOffset", JSONText.number(states.bOffset.rawValue)),
                    (
                        "fields",
                        JSONText.array(
                            states.fields.map { field in
                                var members = [
                                    ("field", JSONText.string(field.key)), ("label", JSONText.string(field.label)),
                                ]
                                if !field.items.isEmpty {
                                    members.append(("ids", JSONText.strings(field.items.map(\.id))))
                                }
                                members += [("a", field.a.json), ("b", field.b.json)]
                                return JSONText.object(members)
                            })
                    ),
                ])
            })
        return JSONText.object([
            ("a", side(a)), ("b", side(b)), ("identical", JSONText.bool(isIdentical)), ("entries", entriesJSON),
            ("states", statesJSON),
        ])
    }
}
