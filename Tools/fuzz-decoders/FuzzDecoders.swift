import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncWire
import SyncModel

/// The readers of untrusted bytes, for the fuzzer (`Tools/fuzz.sh`, Docs/Testing.md): the wire
/// decoders of every body in both formats (an asset upload's status among them), the measure of
/// a request body before it is decoded (`RequestBudget`, every operation), the
/// change-token and asset-digest parsers, the device and server entry
/// decoders, the device and server indexes applying decoded entries, and the direct reader of
/// records against the generated decoder (the same answer, or a finding). The first byte of an
/// input picks the reader; the rest is its input. Every reader must answer with a value or a
/// typed error; a crash, a trap or a sanitizer report is a finding.
enum FuzzDecoders {
    static func run(_ input: [UInt8]) {
        guard let selector = input.first else { return }
        let bytes = Array(input.dropFirst())
        let format: WireFormat = selector & 0x80 == 0 ? .protobuf : .json
        switch selector & 0x7F {
        case 0: _ = try? Wire.decode(ModifyZonesRequest.self, from: bytes, as: format)
        case 1: _ = try? Wire.decode(ModifyZonesResponse.self, from: bytes, as: format)
        case 2: _ = try? Wire.decode(FetchZonesRequest.self, from: bytes, as: format)
        case 3: _ = try? Wire.decode(FetchZonesResponse.self, from: bytes, as: format)
        case 4: _ = try? Wire.decode(ModifyRecordsRequest.self, from: bytes, as: format)
        case 5: _ = try? Wire.decode(ModifyRecordsResponse.self, from: bytes, as: format)
        case 6: _ = try? Wire.decode(FetchDatabaseChangesRequest.self, from: bytes, as: format)
        case 7: _ = try? Wire.decode(FetchDatabaseChangesResponse.self, from: bytes, as: format)
        case 8: _ = try? Wire.decode(FetchZoneChangesRequest.self, from: bytes, as: format)
        case 9: _ = try? Wire.decode(FetchZoneChangesResponse.self, from: bytes, as: format)
        case 10: _ = try? Wire.decode(ModifySubscriptionsRequest.self, from: bytes, as: format)
        case 11: _ = try? Wire.decode(ModifySubscriptionsResponse.self, from: bytes, as: format)
        case 12: _ = try? Wire.decode([Subscription].self, from: bytes, as: format)
        case 13: _ = try? Wire.decode(Record.ID.self, from: bytes, as: format)
        case 14: _ = try? Wire.decode(SyncError.self, from: bytes, as: format)
        case 15: _ = try? Wire.decode(PushFrame.self, from: bytes, as: format)
        case 16: _ = try? DatabaseChangeToken(data: Data(bytes))
        case 17: _ = try? ZoneChangeToken(data: Data(bytes))
        case 18: _ = try? DeviceEntry(entry(bytes))
        case 19: _ = try? ServerEntry(entry(bytes))
        case 20: Indexes.shared.applyToDeviceIndex(entries(bytes))
        case 21: Indexes.shared.applyToServerIndex(entries(bytes))
        case 22: _ = try? Wire.decode(AssetUploadStatus.self, from: bytes, as: format)
        case 23: _ = try? AssetDigest(parsing: String(decoding: bytes, as: UTF8.self))
        case 24:
            for operation in WireOperation.allCases { _ = try? RequestBudget.check(bytes, as: format, for: operation) }
        case 25: compareRecordDecoders(bytes)
        default: return
        }
    }

    /// The direct reader of records against the generated decoder: the same record (by its
    /// bytes: a NaN is not equal to itself) or the same error, else a finding.
    static func compareRecordDecoders(_ bytes: [UInt8]) {
        let direct = Result { () throws(SyncError) in try Record(protoBytes: bytes) }
        let generated = Result { () throws(SyncError) in try Record(generatedProtoBytes: bytes) }
        switch (direct, generated) {
        case (.success(let record), .success(let expected)):
            precondition(
                record.protoBytes() == expected.protoBytes() && record.changedKeys() == expected.changedKeys(),
                "the direct reader read \(record), the generated decoder \(expected)")
        case (.failure(let error), .failure(let expected)):
            precondition(
                error == expected, "the direct reader failed with \(error), the generated decoder with \(expected)")
        default:
            preconditionFailure("the decoders disagree: \(direct) against \(generated)")
        }
    }

    /// One entry: a 2-byte kind, then the payload.
    static func entry(_ bytes: [UInt8]) -> LogEntry {
        let kind = bytes.count >= 2 ? UInt16(bytes[0]) << 8 | UInt16(bytes[1]) : 0
        return LogEntry(
            offset: 1, kind: EntryKind(kind), time: EntryTime(microsecondsSince1970: 0),
            payload: Array(bytes.dropFirst(2)))
    }

    /// Up to 8 entries, each a 1-byte kind (a device kind below 100, a server kind above), a
    /// 1-byte length and that many payload bytes.
    static func entries(_ bytes: [UInt8]) -> [NewEntry] {
        var entries: [NewEntry] = []
        var rest = bytes[...]
        while entries.count < 8, rest.count >= 2 {
            let kind = EntryKind(UInt16(rest.removeFirst()))
            let length = Int(rest.removeFirst())
            let payload = Array(rest.prefix(length))
            rest = rest.dropFirst(length)
            entries.append(NewEntry(kind: kind, payload: payload, time: EntryTime(microsecondsSince1970: 0)))
        }
        return entries
    }

    /// A device log and a server database log, in a directory of their own, that grow by the
    /// entries their projections accept (an append whose entry a projection refuses changes
    /// nothing).
    final class Indexes: @unchecked Sendable {
        static let shared = Indexes()
        let directory: URL
        let device: DeviceLog
        let server: Log

        init() {
            directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("fuzz-decoders-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
            try? FileManager.default.removeItem(at: directory)
            do {
                device = try DeviceLog(directory: directory.appendingPathComponent("device", isDirectory: true))
                let environment = try LogEnvironment.open(
                    at: directory.appendingPathComponent("server", isDirectory: true),
                    options: .init(durability: .fast))
                server = try environment.openLog(named: "private", projections: [ServerIndex()])
            } catch {
                fatalError("fuzz-decoders: cannot open the logs in \(directory.path): \(error)")
            }
        }

        func applyToDeviceIndex(_ entries: [NewEntry]) {
            guard !entries.isEmpty else { return }
            _ = try? device.log.append(entries)
        }

        func applyToServerIndex(_ entries: [NewEntry]) {
            guard !entries.isEmpty else { return }
            let shifted = entries.map {
                NewEntry(kind: EntryKind($0.kind.rawValue + 100), payload: $0.payload, time: $0.time)
            }
            _ = try? server.append(shifted)
        }
    }
}

/// One input from libFuzzer.
func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    FuzzDecoders.run(start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
    return 0
}

#if FUZZING
    /// libFuzzer's driver, for an executable whose `main` is its own (SwiftPM names the entry point
    /// of an executable target, so libFuzzer's `main` cannot be used).
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    @main
    struct FuzzDecodersMain {
        static func main() {
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runFuzzerDriver(&argc, &argv) { start, count in fuzzOneInput(start, count) })
        }
    }
#else
    /// Without the fuzzer: runs each file named on the command line (a finding, a corpus entry)
    /// through the same readers, to reproduce a finding in a debugger.
    @main
    struct FuzzDecodersMain {
        static func main() throws {
            for path in CommandLine.arguments.dropFirst() {
                _ = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))).withUnsafeBufferPointer {
                    fuzzOneInput($0.baseAddress, $0.count)
                }
                print("ran \(path)")
            }
        }
    }
#endif
