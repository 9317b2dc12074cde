import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogSyncWire
import NIOCore
import NIOHTTP1
import SyncModel
import TemporaryDirectory
import Testing

/// One request must not cost a `logsync-server` process gigabytes (Docs/Performance.md, "Memory
/// per request"): bodies of up to 8 MiB built to cost the most when decoded, sent to a server
/// process, for every operation that takes a body, in both formats. The process's resident size
/// is read from `/proc/PID/status`: its peak (`VmHWM`, reset before each request by writing 5 to
/// `/proc/PID/clear_refs`) stays under 64 MiB above what it was just before, and its anonymous
/// memory (`RssAnon`) comes back to within ``returnTolerance`` of idle once the answer is in.
///
/// Nothing here is timed: every request is awaited, and the figures are read after its answer.
@Suite("logsync-server's memory per request", .serialized, .timeLimit(.minutes(10)))
struct RequestMemoryTests {
    /// The most one request may add to the process's peak: the requirement.
    static let peakBound = 64 << 20
    /// How far above idle the process's heap may stay after a request: the allocator keeps some
    /// memory per arena (a thread's arena keeps up to 128 KiB at its top, and the pages of chunks
    /// still in use around freed ones cannot be returned), and caches fill on first use (the
    /// user's database open, the schema). 8 MiB is one body at the limit: a request that kept
    /// its body, or anything in proportion to what it decoded, would stay above it.
    static let returnTolerance = 8 << 20
    static let maxBody = 8 << 20

    @Test(
        "bodies built to cost the most, every operation, both formats: each peak under 64 MiB above idle, and back to idle"
    )
    func hostileBodies() async throws {
        try await withServerProcess { server in
            var report: [String] = []
            for (name, operation, format, body, statuses) in Self.bodies() {
                let measured = try await server.measure(name) {
                    let response = try await server.send(operation, format: format, body: body)
                    #expect(statuses.contains(response.status), "\(name): \(response)")
                }
                report.append(measured.line(body: body.count))
                #expect(measured.peakAboveStart < Self.peakBound, "\(name): \(measured)")
                #expect(
                    measured.anonymousAfter - server.idle.anonymous < Self.returnTolerance,
                    "\(name): \(measured), idle \(server.idle)")
            }
            print("RequestMemoryTests, idle \(server.idle):\n" + report.joined(separator: "\n"))
        }
    }

    @Test("four hostile bodies at once: the peak stays bounded, and the process returns to idle")
    func parallelBodies() async throws {
        try await withServerProcess { server in
            let cases = Self.bodies()
            let chosen = try [
                "modifyRecords protobuf: 8 MiB of empty records",
                "modifyRecords protobuf: one list just within the elements limit",
                "modifyRecords json: one list just within the elements limit",
                "modifyRecords protobuf: 400 records of 5,000 bytes (2 MB)",
            ].map { name in try #require(cases.first { $0.name == name }, "no body \(name)") }
            let measured = try await server.measure("4 at once") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, chosen) in chosen.enumerated() {
                        group.addTask {
                            // Each its own records, so that two saves do not meet in one zone's commit.
                            let body =
                                index == 3 ? Self.fullRecords(zone: "Parallel", format: chosen.format) : chosen.body
                            let response = try await server.send(chosen.operation, format: chosen.format, body: body)
                            #expect(chosen.statuses.contains(response.status), "\(chosen.name): \(response)")
                        }
                    }
                    try await group.waitForAll()
                }
            }
            print("RequestMemoryTests, 4 at once: \(measured)")
            // The server decodes and handles requests within a memory budget of 64 MiB (by the
            // estimate of each from its body's measure, HTTPSyncServer.Configuration's
            // requestMemoryBudget); the others wait. Four cost less than four times one: twice the
            // bound of one is generous.
            #expect(measured.peakAboveStart < 2 * Self.peakBound, "\(measured)")
            #expect(
                measured.anonymousAfter - server.idle.anonymous < Self.returnTolerance,
                "\(measured), idle \(server.idle)")
        }
    }

    // MARK: Bodies

    typealias Body = (name: String, operation: WireOperation, format: WireFormat, body: [UInt8], statuses: Set<Int>)

    /// For every operation with a body and both formats, the body of about 8 MiB that the old
    /// server built the most objects from: its first item list, or its first message field, or
    /// its first string, repeated empty. Then the requests that pass the measure and cost the
    /// most to decode and handle: a record with one list of as many elements as allowed, 400
    /// records at the 2 MB limit, 400 records of many small fields.
    static func bodies() -> [Body] {
        var bodies: [Body] = []
        for format in WireFormat.allCases {
            for operation in WireOperation.allCases {
                guard let name = operation.requestMessageName, let message = WireSchema.wire.message(named: name) else {
                    continue
                }
                let fields = message.fields.enumerated().compactMap { number, field in field.map { (number, $0) } }
                let items = operation.itemFields.compactMap { message.field(named: $0) }
                guard
                    let (number, field) = items.first ?? fields.first(where: {
                        if case .message = $0.1.kind { true } else { false }
                    }) ?? fields.first
                else { continue }
                let what =
                    operation.itemFields.isEmpty
                    ? "\(field.name) fields" : (operation == .modifyRecords ? "records" : "\(field.name)")
                bodies.append(
                    (
                        "\(operation) \(format.rawValue): 8 MiB of empty \(what)", operation, format,
                        filler(number: number, field: field, format: format),
                        operation == .fetchShareMetadata ? [400, 404, 413] : [413]
                    ))
            }
            bodies.append(
                (
                    "modifyRecords \(format.rawValue): one list just within the elements limit", .modifyRecords, format,
                    longList(format: format), [200]
                ))
            bodies.append(
                (
                    "modifyRecords \(format.rawValue): 400 records of 5,000 bytes (2 MB)", .modifyRecords, format,
                    fullRecords(zone: "Full", format: format), [200]
                ))
            bodies.append(
                (
                    "modifyRecords \(format.rawValue): 400 records of 60 small fields", .modifyRecords, format,
                    manyFields(format: format), [200]
                ))
        }
        return bodies
    }

    /// An empty element of `field` repeated to fill the body limit.
    static func filler(number: Int, field: WireSchema.Field, format: WireFormat) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(maxBody)
        switch format {
        case .protobuf:
            let element = [UInt8(number << 3 | 2), 0]
            while body.count + element.count <= maxBody { body += element }
        case .json:
            let empty = field.kind == .lengthDelimited ? "\"\"" : "{}"
            if field.isRepeated {
                body += Array("{\"\(field.jsonName)\": [".utf8)
                let element = Array("\(empty),".utf8)
                while body.count + element.count + 8 <= maxBody { body += element }
                body += Array("\(empty)]}".utf8)
            } else {
                // The same member again and again, as a decoder merging them would take it.
                body += Array("{".utf8)
                let element = Array("\"\(field.jsonName)\": \(empty),".utf8)
                while body.count + element.count + 64 <= maxBody { body += element }
                body += Array("\"\(field.jsonName)\": \(empty)}".utf8)
            }
        }
        return body
    }

    static let zone = RecordZone.ID(zoneName: "Memory")

    /// One record whose one field is a list of empty strings, as many as the elements limit leaves.
    static func longList(format: WireFormat) -> [UInt8] {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: "list-\(format)", zoneID: zone))
        record["list"] = .list(Array(repeating: .string(""), count: Limits.maxElementsPerRequest - 16))
        return Wire.encode(ModifyRecordsRequest(recordsToSave: [record], savePolicy: .allKeys), as: format)
    }

    /// 400 records of 5,000 bytes of field data each: the 2 MB limit (F151).
    static func fullRecords(zone name: String, format: WireFormat) -> [UInt8] {
        let zone = RecordZone.ID(zoneName: name)
        let records = (0..<Limits.maxItemsPerRequest).map { index in
            var record = Record(
                recordType: "Blob", recordID: Record.ID(recordName: "full-\(format)-\(index)", zoneID: zone))
            record["b"] = .bytes(
                Data(repeating: UInt8(index % 251), count: Limits.maxRequestBytes / Limits.maxItemsPerRequest - 1))
            return record
        }
        return Wire.encode(ModifyRecordsRequest(recordsToSave: records, savePolicy: .allKeys), as: format)
    }

    /// 400 records of 60 small fields each, as many as the elements limit leaves room for.
    static func manyFields(format: WireFormat) -> [UInt8] {
        let records = (0..<Limits.maxItemsPerRequest).map { index in
            var record = Record(
                recordType: "Wide", recordID: Record.ID(recordName: "wide-\(format)-\(index)", zoneID: zone))
            for field in 0..<60 { record["f\(field)"] = field.isMultiple(of: 2) ? .int64(Int64(field)) : .bool(true) }
            return record
        }
        return Wire.encode(ModifyRecordsRequest(recordsToSave: records, savePolicy: .allKeys), as: format)
    }

    // MARK: The server process

    /// A `logsync-server` process with one user, alice, whose zones `Memory`, `Full` and
    /// `Parallel` exist, measured at idle after one request of every kind has run once.
    final class ServerProcess: Sendable {
        let process: ChildProcess
        let url: String
        let token: String
        let idle: Memory

        init(process: ChildProcess, url: String, token: String, idle: Memory) {
            self.process = process
            self.url = url
            self.token = token
            self.idle = idle
        }

        static func start(in directory: URL) async throws -> ServerProcess {
            let data = directory.appendingPathComponent("data").path
            let added = try await ChildProcess.run(["user", "add", "alice", "--data", data])
            guard added.status == 0 else { throw TestFailure("user add failed: \(added)") }
            let token = added.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let process = try ChildProcess.start(["--data", data, "--port", "0"])
            let url = "http://127.0.0.1:\(try await process.waitForPort())"
            var server = ServerProcess(process: process, url: url, token: token, idle: try Memory.read(process.pid))
            let zones = Wire.encode(
                ModifyZonesRequest(zonesToSave: ["Memory", "Full", "Parallel"].map { RecordZone(zoneName: $0) }),
                as: .protobuf)
            let made = try await server.send(.modifyZones, format: .protobuf, body: zones)
            guard made.status == 200 else { throw TestFailure("modifyZones: \(made)") }
            // Every path once (its code paged in, the database open, the allocator's arenas made),
            // then the idle figures.
            for (_, operation, format, body, _) in RequestMemoryTests.bodies() {
                _ = try await server.send(operation, format: format, body: body)
            }
            server = ServerProcess(process: process, url: url, token: token, idle: try Memory.read(process.pid))
            return server
        }

        /// Sends one operation's request and returns the answer.
        func send(_ operation: WireOperation, format: WireFormat, body: [UInt8]) async throws -> RawResponse {
            var request = HTTPClientRequest(url: url + WireProtocol.path(operation, scope: .private))
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Content-Type", value: format.mediaType)
            request.body = .bytes(ByteBuffer(bytes: body))
            // Generous: on a loaded machine a debug build decodes slowly; nothing here is timed.
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
            var buffer = try await response.body.collect(upTo: 64 << 20)
            return RawResponse(
                status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                body: buffer.readBytes(length: buffer.readableBytes) ?? [])
        }

        /// Runs `work` between a reset of the process's peak and a reading of its figures.
        func measure(_ name: String, _ work: () async throws -> Void) async throws -> Measured {
            try Memory.resetPeak(process.pid)
            let start = try Memory.read(process.pid)
            try await work()
            let end = try Memory.read(process.pid)
            return Measured(name: name, start: start, end: end)
        }
    }

    func withServerProcess(_ body: (ServerProcess) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let server = try await ServerProcess.start(in: directory)
            do {
                try await body(server)
            } catch {
                _ = try? await server.process.terminate()
                throw error
            }
            let stopped = try await server.process.terminate()
            #expect(stopped.status == 0, "\(stopped)")
        }
    }

    /// A process's memory, from `/proc/PID/status`, in bytes.
    struct Memory: CustomStringConvertible {
        var resident: Int
        var peak: Int
        var anonymous: Int

        static func read(_ pid: pid_t) throws -> Memory {
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            func field(_ name: String) throws -> Int {
                guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }),
                    let kilobytes = Int(
                        line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ")[0])
                else { throw TestFailure("no \(name) in /proc/\(pid)/status") }
                return kilobytes * 1024
            }
            return Memory(resident: try field("VmRSS"), peak: try field("VmHWM"), anonymous: try field("RssAnon"))
        }

        /// Sets the process's peak to its resident size now.
        static func resetPeak(_ pid: pid_t) throws {
            try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
        }

        var description: String { "resident \(mib(resident)), heap \(mib(anonymous))" }
    }

    struct Measured: CustomStringConvertible {
        let name: String
        let start: Memory
        let end: Memory

        var peakAboveStart: Int { end.peak - start.resident }
        var anonymousAfter: Int { end.anonymous }

        var description: String {
            "\(name): peak \(mib(peakAboveStart)) above the start (\(start)), then \(end)"
        }

        func line(body: Int) -> String {
            "| \(name) | \(mib(body)) | \(mib(peakAboveStart)) | \(mib(end.resident - start.resident)) | \(mib(end.anonymous - start.anonymous)) |"
        }
    }
}

/// Bytes in MiB, one decimal.
private func mib(_ bytes: Int) -> String {
    String(format: "%.1f MiB", Double(bytes) / Double(1 << 20))
}
