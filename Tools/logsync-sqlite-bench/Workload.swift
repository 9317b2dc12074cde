import Foundation
import GRDB
import LogSyncSQLite
import SyncModel

/// The engine's record (GRDB has a `Record` class too).
typealias Record = SyncModel.Record

/// The rows of the benchmark: a table `items` whose rows are records of type `Item`, about 300
/// bytes of fields each (as the engine benchmark's records), spread round-robin over 10 zones
/// by their `zone` column.
enum Items {
    static let table = "items"
    static let recordType = "Item"
    static let zoneCount = 10

    static let schema = """
        CREATE TABLE IF NOT EXISTS items(
          id TEXT PRIMARY KEY NOT NULL, zone TEXT NOT NULL, title TEXT, body TEXT, author TEXT,
          count INTEGER, position INTEGER);
        """

    static let declaration = SyncedTable(table, recordType: recordType, zone: .column("zone"))

    static func zoneName(_ zone: Int) -> String { "zone-" + String(format: "%02d", zone) }

    static var zoneIDs: [RecordZone.ID] { (0..<zoneCount).map { RecordZone.ID(zoneName: zoneName($0)) } }

    /// One row's values, in the table's column order.
    struct Row {
        var id: String
        var zone: String
        var title: String
        var body: String
        var author: String
        var count: Int64
        var position: Int64

        var arguments: StatementArguments { [id, zone, title, body, author, count, position] }
    }

    static func row(_ index: Int, series: String) -> Row {
        let zone = index % zoneCount
        return Row(
            id: "\(series)-\(index)", zone: zoneName(zone),
            title: filled("Title of item \(index) in \(series), zone \(zone)", to: 80),
            body: filled("Body text of item \(index): a few words about it, repeated to fill. ", to: 160),
            author: filled("user-\(index % 977)", to: 20), count: Int64(index),
            position: Int64(index &* 2_654_435_761 % 1_000_003))
    }

    /// The row as the store sends it: record `id:items` in its zone, a field per column.
    static func record(_ row: Row) -> Record {
        var record = Record(
            recordType: recordType,
            recordID: Record.ID(recordName: "\(row.id):\(table)", zoneID: RecordZone.ID(zoneName: row.zone)))
        record["zone"] = .string(row.zone)
        record["title"] = .string(row.title)
        record["body"] = .string(row.body)
        record["author"] = .string(row.author)
        record["count"] = .int64(row.count)
        record["position"] = .int64(row.position)
        return record
    }

    static let insert = "INSERT INTO items(id, zone, title, body, author, count, position) VALUES (?, ?, ?, ?, ?, ?, ?)"

    /// `text` repeated and cut to exactly `length` characters (ASCII).
    static func filled(_ text: String, to length: Int) -> String {
        var result = text
        while result.count < length { result += " " + text }
        return String(result.prefix(length))
    }
}
