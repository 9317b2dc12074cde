import BenchSupport
import Foundation
import LogSyncWire
import SyncModel

/// The decode floor: the workload's records, as a server saved them (system fields set), decoded
/// from their protobuf bytes alone, by the generated decoder (SwiftProtobuf's message, then the
/// model's conversion: how every record was decoded before the direct reader) and by
/// `Record(protoBytes:)` (the direct reader), then the same records in pages of `--page`
/// changes by `Wire.decode` both ways. Runs alternate, in this process; each figure is the best
/// of its runs (CPU time of this thread's work, so other processes' load moves it least).
enum DecodePhase {
    struct Figures {
        var generatedRecords: Double
        var directRecords: Double
        var generatedPages: Double
        var directPages: Double
    }

    static func run(_ options: EngineBench) throws -> Figures {
        let count = options.recordCount
        let zone = workload.zoneID(0)
        let saved = Record.SystemFields(
            recordChangeTag: "1a2b3c", creationDate: Date(timeIntervalSince1970: 1_764_000_000),
            modificationDate: Date(timeIntervalSince1970: 1_764_000_001),
            creatorUserRecordID: Record.ID(recordName: "_alice"),
            lastModifiedUserRecordID: Record.ID(recordName: "_alice"))
        var records: [[UInt8]] = []
        records.reserveCapacity(count)
        var modifications: [RecordZoneChange.Modification] = []
        modifications.reserveCapacity(count)
        for index in 0..<count {
            var record = workload.record(index, series: "decode", zone: 0)
            record.applySystemFields(saved)
            records.append(record.serializedProto())
            modifications.append(.init(record: record))
        }
        var pages: [[UInt8]] = []
        var start = 0
        while start < count {
            let end = min(count, start + options.page)
            let page = FetchZoneChangesResponse(
                zoneID: zone, modifications: Array(modifications[start..<end]), deletions: [],
                changeToken: ZoneChangeToken(zoneID: zone, incarnation: 1, offset: ChangeOffset(UInt64(end))),
                moreComing: end < count)
            pages.append(Wire.encode(page, as: .protobuf))
            start = end
        }
        modifications = []

        func rate(_ body: () throws -> Int) rethrows -> Double {
            let before = cpuSeconds()
            let decoded = try body()
            let spent = cpuSeconds() - before
            precondition(decoded == count, "decoded \(decoded) records, not \(count)")
            return Double(count) / max(spent, 1e-9)
        }
        var figures = Figures(generatedRecords: 0, directRecords: 0, generatedPages: 0, directPages: 0)
        for _ in 0..<options.decodeRunCount {
            figures.generatedRecords = max(
                figures.generatedRecords,
                try rate { try records.reduce(0) { $0 + (try Record(generatedProtoBytes: $1).fields.isEmpty ? 0 : 1) } }
            )
            figures.directRecords = max(
                figures.directRecords,
                try rate { try records.reduce(0) { $0 + (try Record(protoBytes: $1).fields.isEmpty ? 0 : 1) } })
            figures.generatedPages = max(
                figures.generatedPages,
                try rate {
                    try pages.reduce(0) {
                        $0
                            + (try Wire.decodeGenerated(FetchZoneChangesResponse.self, from: $1, as: .protobuf))
                            .modifications.count
                    }
                })
            figures.directPages = max(
                figures.directPages,
                try rate {
                    try pages.reduce(0) {
                        $0
                            + (try Wire.decode(FetchZoneChangesResponse.self, from: $1, as: .protobuf)).modifications
                            .count
                    }
                })
        }
        return figures
    }
}
