import Foundation
import LogSyncHTTP
import Synchronization
import SyncModel
import Testing

/// `logsync-server` as a child process, as the README tells people to run it: a user added with
/// `user add`, two devices syncing through it, SIGTERM, and a restart that has kept everything.
@Suite("logsync-server as a process", .timeLimit(.minutes(2)))
struct ServerProcessTests {
    @Test("README: user add, serve, two devices sync, SIGTERM stops cleanly, a restart keeps every commit")
    func readmeWalkthrough() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data")
            let added = try await ChildProcess.run(["user", "add", "alice", "--data", data.path])
            #expect(added.status == 0, "\(added)")
            let token = added.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(token.hasPrefix("lsk_") && !token.contains(" "))
            let tokenFile = try String(contentsOf: data.appendingPathComponent("tokens"), encoding: .utf8)
            #expect(tokenFile.contains("\(token) alice\n"))
            let permissions = try FileManager.default.attributesOfItem(atPath: data.appendingPathComponent("tokens").path)[.posixPermissions] as? Int
            #expect(permissions == 0o600)

            // Serve, and let two devices of alice's sync a note through it.
            let server = try ChildProcess.start(["--data", data.path, "--port", "0"])
            let port = try await server.waitForPort()
            let url = URL(string: "http://127.0.0.1:\(port)")!
            let phone = HTTPSyncClient(.init(serverURL: url, token: token, device: "phone")).database()
            let laptop = HTTPSyncClient(.init(serverURL: url, token: token, device: "laptop")).database()
            let zone = RecordZone.ID(zoneName: "Notes")
            _ = try await phone.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone))
            note["title"] = "from the phone"
            _ = try await phone.modifyRecords(saving: [note], deleting: [])
            let fetched = try await laptop.fetchZoneChanges(zoneID: zone, since: nil)
            #expect(fetched.modifications.map { $0.record["title"] } == [.string("from the phone")])

            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(stopped.errorOutput.contains("stopped"), "\(stopped)")

            // The data directory holds every commit: a new server process answers with it.
            let again = try ChildProcess.start(["--data", data.path, "--port", "0"])
            let newPort = try await again.waitForPort()
            let laptopAgain = HTTPSyncClient(.init(serverURL: URL(string: "http://127.0.0.1:\(newPort)")!, token: token, device: "laptop"))
            let refetched = try await laptopAgain.database().fetchZoneChanges(zoneID: zone, since: nil)
            #expect(refetched.modifications.map { $0.record["title"] } == [.string("from the phone")])
            let unauthorized = HTTPSyncClient(.init(serverURL: URL(string: "http://127.0.0.1:\(newPort)")!, token: "lsk_wrong-0123456789abcdef"))
            await #expect(throws: SyncError.self) { _ = try await unauthorized.database().fetchAllZones() }
            let end = try await again.terminate()
            #expect(end.status == 0, "\(end)")
        }
    }

    @Test("--help explains every flag; bad flags are refused with a message")
    func help() async throws {
        let help = try await ChildProcess.run(["serve", "--help"])
        #expect(help.status == 0)
        for flag in ["--data", "--tokens", "--host", "--port", "--max-body-bytes", "--log-level", "default: 127.0.0.1"] {
            #expect(help.output.contains(flag), "serve --help does not mention \(flag)")
        }
        let bad = try await ChildProcess.run(["--data", "/tmp/unused", "--port", "70000"])
        #expect(bad.status != 0)
        #expect(bad.errorOutput.contains("--port must be 0 to 65535"), "\(bad)")
    }
}

/// A `logsync-server` child process with its standard output and error collected.
final class ChildProcess: Sendable {
    struct Finished: CustomStringConvertible {
        var status: Int32
        var output: String
        var errorOutput: String
        var description: String { "exit \(status)\nstdout:\n\(output)\nstderr:\n\(errorOutput)" }
    }

    private let process: Process
    private let output = Mutex(Data())
    private let errors = Mutex(Data())
    /// Called with the standard error so far, each time more arrives.
    private let errorWaiters = Mutex<[@Sendable (String) -> Bool]>([])
    private let exited = Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

    private init(process: Process) {
        self.process = process
    }

    /// The `logsync-server` SwiftPM built next to the test bundle.
    static let executable: URL? = {
        if let path = ProcessInfo.processInfo.environment["LOGSYNC_SERVER_PATH"] { return URL(fileURLWithPath: path) }
        var directory = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                            ?? CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("logsync-server")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }()

    /// Starts `logsync-server arguments`.
    static func start(_ arguments: [String]) throws -> ChildProcess {
        let executable = try #require(executable, "no logsync-server binary next to the test bundle")
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let child = ChildProcess(process: process)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        // Each pipe is read to its end by a thread of its own, with blocking reads: Foundation's
        // readabilityHandler is not reliable on Linux.
        child.drain(out.fileHandleForReading, into: child.outputDone) { data in child.output.withLock { $0.append(data) } }
        child.drain(err.fileHandleForReading, into: child.errorsDone) { data in
            // Under the errors' lock, so a waiter is never added between a chunk and its check.
            child.errors.withLock { errors in
                errors.append(data)
                let text = String(decoding: errors, as: UTF8.self)
                child.errorWaiters.withLock { waiters in waiters.removeAll { $0(text) } }
            }
        }
        process.terminationHandler = { process in
            let waiters = child.exited.withLock { state in
                state.status = process.terminationStatus
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: process.terminationStatus) }
        }
        try process.run()
        return child
    }

    /// Runs `logsync-server arguments` to its end.
    static func run(_ arguments: [String]) async throws -> Finished {
        let child = try start(arguments)
        return await child.finish()
    }

    /// The port of the server's `listening … port=N` log line; fails after 30 seconds or if the
    /// process exits first.
    func waitForPort() async throws -> Int {
        let answer = OneAnswer<Int?>()
        let check: @Sendable (String) -> Bool = { text in
            guard let line = text.split(separator: "\n").first(where: { $0.contains("listening") && $0.contains("port=") }),
                  let start = line.range(of: "port=")?.upperBound
            else { return false }
            answer.give(Int(line[start...].prefix { $0.isNumber }))
            return true
        }
        errors.withLock { errors in
            if !check(String(decoding: errors, as: UTF8.self)) { errorWaiters.withLock { $0.append(check) } }
        }
        let exit = Task { _ = await exitStatus(); answer.give(nil) }
        let timeout = Task {
            try? await Task.sleep(for: .seconds(30))
            answer.give(nil)
        }
        let port = await answer.value()
        exit.cancel()
        timeout.cancel()
        guard let port else {
            process.terminate()
            throw TestFailure("logsync-server did not log its port: \(await finish())")
        }
        return port
    }

    /// Sends SIGTERM and waits for the process to exit.
    func terminate() async throws -> Finished {
        process.terminate()
        return await finish()
    }

    /// Waits for the process to exit and returns what it wrote.
    func finish() async -> Finished {
        let status = await exitStatus()
        for done in [outputDone, errorsDone] { await done.wait() }
        return Finished(
            status: status, output: output.withLock { String(decoding: $0, as: UTF8.self) },
            errorOutput: errors.withLock { String(decoding: $0, as: UTF8.self) })
    }

    private let outputDone = Latch()
    private let errorsDone = Latch()

    /// Reads `handle` to its end on a thread of its own, handing each chunk to `append`.
    private func drain(_ handle: FileHandle, into latch: Latch, _ append: @escaping @Sendable (Data) -> Void) {
        let thread = Thread {
            // read(2) returns what has arrived; FileHandle.read(upToCount:) waits for the count.
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                append(Data(buffer[0..<count]))
            }
            latch.open()
        }
        thread.start()
    }

    private func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = exited.withLock { state -> Int32? in
                if let status = state.status { return status }
                state.waiters.append(continuation)
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}

/// A one-shot signal: ``wait()`` returns once ``open()`` was called.
final class Latch: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}

/// The first of several possible answers: ``give(_:)`` keeps the first value, ``value()`` waits
/// for it.
final class OneAnswer<Value: Sendable>: Sendable {
    private let state = Mutex<(value: Value?, given: Bool, waiters: [CheckedContinuation<Value, Never>])>((nil, false, []))

    func give(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard !state.given else { return [] }
            state.given = true
            state.value = value
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let value = state.withLock { state -> Value? in
                if state.given { return state.value }
                state.waiters.append(continuation)
                return nil
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}
