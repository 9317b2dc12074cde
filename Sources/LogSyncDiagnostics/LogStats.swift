import Foundation
import LogStore

/// What `logtool stats` prints: a log's entry count, per-kind counts and payload bytes, the
/// first and last entry times and the span between them, and the size of the environment's
/// file (`data.mdb`).
public struct LogStats: Sendable, Hashable {
    /// One kind's share of the log.
    public struct KindStats: Sendable, Hashable {
        public var kind: EntryKind
        /// The decoder's name for the kind, or `nil`.
        public var name: String?
        public var count: Int
        /// The sum of the payload sizes, in bytes.
        public var payloadBytes: Int
    }

    public var logName: String
    public var path: String
    public var entryCount: Int
    /// In kind order.
    public var kinds: [KindStats]
    public var firstTime: EntryTime?
    public var lastTime: EntryTime?
    /// The size of `data.mdb` in bytes (the whole environment, every log in it), or `nil`.
    public var fileSize: UInt64?

    /// Reads every entry of `log` (with an `EntryCursor`), decoding each one with `decoder`
    /// so that a corrupt payload is reported as `dump` reports it.
    ///
    /// - Parameters:
    ///   - log: The log to read.
    ///   - decoder: Decodes each entry's payload; `nil` counts envelopes only.
    ///   - progress: Told of each entry read.
    /// - Throws: `LogStoreError` naming the offset, log and path of a corrupt entry.
    public static func collect(
        _ log: Log, decoder: EntryDecoder?, progress: (ProgressEvent) -> Void = { _ in }
    ) throws -> LogStats {
        var byKind: [EntryKind: KindStats] = [:]
        var count = 0
        var first: EntryTime?
        var last: EntryTime?
        let end = try log.lastOffset
        var cursor = try log.entries(from: .first, through: end)
        while let entry = try cursor.next() {
            progress(.entries(done: entry.offset.rawValue, total: end.rawValue))
            do {
                _ = try decoder?.describe(entry)
            } catch {
                var located = error
                if located.path == nil { located.path = log.environment.path }
                if located.log == nil { located.log = log.name }
                throw located
            }
            count += 1
            if first == nil { first = entry.time }
            last = entry.time
            byKind[
                entry.kind,
                default: KindStats(kind: entry.kind, name: decoder?.name(of: entry.kind), count: 0, payloadBytes: 0)
            ]
            .count += 1
            byKind[entry.kind]!.payloadBytes += entry.payload.count
        }
        let file = URL(fileURLWithPath: log.environment.path).appendingPathComponent("data.mdb").path
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.uint64Value
        return LogStats(
            logName: log.name, path: log.environment.path, entryCount: count,
            kinds: byKind.values.sorted { $0.kind.rawValue < $1.kind.rawValue }, firstTime: first, lastTime: last,
            fileSize: size)
    }

    /// The total payload bytes of every kind.
    public var payloadBytes: Int { kinds.reduce(0) { $0 + $1.payloadBytes } }

    /// The text `logtool stats` prints, lines ending in line breaks.
    public var text: String {
        var lines: [(String, String)] = [
            ("log", "\(logName) in \(path)"),
            ("entries", String(entryCount)),
            ("payload", Self.bytes(payloadBytes)),
            ("first", firstTime?.iso8601 ?? "-"),
            ("last", lastTime?.iso8601 ?? "-"),
        ]
        if let firstTime, let lastTime {
            lines.append(
                ("span", Self.duration(microseconds: lastTime.microsecondsSince1970 - firstTime.microsecondsSince1970)))
        } else {
            lines.append(("span", "-"))
        }
        lines.append(("file size", fileSize.map { Self.bytes(Int($0)) } ?? "-"))
        let labelWidth = lines.map(\.0.count).max()! + 1
        var text = lines.map { rightPadded($0.0 + ":", width: labelWidth) + "  " + $0.1 + "\n" }.joined()
        guard !kinds.isEmpty else { return text }

        text += "\n"
        let header = (kind: "kind", name: "name", count: "entries", bytes: "payload bytes")
        let rows = kinds.map {
            (
                kind: String($0.kind.rawValue), name: $0.name ?? "-", count: String($0.count),
                bytes: String($0.payloadBytes)
            )
        }
        let kindWidth = max(header.kind.count, rows.map(\.kind.count).max()!)
        let nameWidth = max(header.name.count, rows.map(\.name.count).max()!)
        let countWidth = max(header.count.count, rows.map(\.count.count).max()!)
        let bytesWidth = max(header.bytes.count, rows.map(\.bytes.count).max()!)
        for row in [header] + rows {
            let line =
                leftPadded(row.kind, width: kindWidth) + "  " + rightPadded(row.name, width: nameWidth)
                + "  " + leftPadded(row.count, width: countWidth) + "  " + leftPadded(row.bytes, width: bytesWidth)
            text += line + "\n"
        }
        return text
    }

    /// The JSON object `logtool stats --json` prints, on one line (no line break), keys in this
    /// order: `log`, `path`, `entries`, `payloadBytes`, `first` and `last` (ISO 8601 UTC with
    /// microseconds, `null` for an empty log), `firstMicros` and `lastMicros` (microseconds
    /// since 1970), `spanMicros`, `fileSize` (bytes, `null` if unknown), `kinds`: one object
    /// per kind in kind order with `kind`, `name` (`null` for a kind without a name), `entries`,
    /// `payloadBytes`.
    public var json: String {
        JSONText.object([
            ("log", JSONText.string(logName)),
            ("path", JSONText.string(path)),
            ("entries", JSONText.number(entryCount)),
            ("payloadBytes", JSONText.number(payloadBytes)),
            ("first", JSONText.optional(firstTime.map { JSONText.string($0.iso8601) })),
            ("last", JSONText.optional(lastTime.map { JSONText.string($0.iso8601) })),
            ("firstMicros", JSONText.optional(firstTime.map { JSONText.number($0.microsecondsSince1970) })),
            ("lastMicros", JSONText.optional(lastTime.map { JSONText.number($0.microsecondsSince1970) })),
            (
                "spanMicros",
                JSONText.optional(
                    firstTime.flatMap { first in
                        lastTime.map { JSONText.number($0.microsecondsSince1970 - first.microsecondsSince1970) }
                    })
            ),
            ("fileSize", JSONText.optional(fileSize.map { JSONText.number($0) })),
            (
                "kinds",
                JSONText.array(
                    kinds.map { kind in
                        JSONText.object([
                            ("kind", JSONText.number(kind.kind.rawValue)),
                            ("name", JSONText.optional(kind.name.map(JSONText.string))),
                            ("entries", JSONText.number(kind.count)),
                            ("payloadBytes", JSONText.number(kind.payloadBytes)),
                        ])
                    })
            ),
        ])
    }

    /// `1234 bytes`, or `1234567 bytes (1.2 MiB)` from 1 KiB on.
    static func bytes(_ count: Int) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = -1
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit < 0 ? "\(count) bytes" : "\(count) bytes (\(String(format: "%.1f", value)) \(units[unit]))"
    }

    /// `0.152406s`, `3m 2.000001s`, `2h 0m 0.000000s`, `1d 0h 0m 5.000000s`: microseconds exact.
    static func duration(microseconds: Int64) -> String {
        let sign = microseconds < 0 ? "-" : ""
        let magnitude = microseconds.magnitude
        let seconds = magnitude / 1_000_000
        let fraction = padded(magnitude % 1_000_000, width: 6)
        let (days, hours, minutes, secs) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60)
        var text = sign
        if days > 0 {
            text += "\(days)d \(hours)h \(minutes)m "
        } else if hours > 0 {
            text += "\(hours)h \(minutes)m "
        } else if minutes > 0 {
            text += "\(minutes)m "
        }
        return text + "\(secs).\(fraction)s"
    }
}
