// logsync-asset-bench: one large asset uploaded and downloaded over loopback HTTP, against a
// plain file copy on the same disk, in the same run, with the peak memory of both processes.
//
// 1. A file of N MB (default 200) is written to the scratch directory.
// 2. File copy: the file is copied with read/write in 1 MiB pieces and synced (what a server
//    that keeps contents durably must do at least), then read back as a download would: MB/s.
// 3. A server process (this executable, `serve`) keeps its data in the scratch directory
//    (LMDB store, durable) and listens on loopback; this process uploads the file with
//    `HTTPCloudDatabase.uploadAsset`, then downloads it with `downloadAsset` to a new file.
//    MB/s of each and the ratio to the file copy (target ≥ 0.5).
// 4. Memory: before each transfer both processes' peak resident size is reset
//    (/proc/<pid>/clear_refs); after it, the peak (VmHWM) above the resident size at rest
//    (target: below 64 MiB for both, whatever the asset's size).
//
//   swift build -c release --product logsync-asset-bench --scratch-path .build-h
//   .build-h/release/logsync-asset-bench [--megabytes N] [--quick] [--dir PATH]
//
// Docs/Performance.md ("Assets") has the figures of the reference machine.
import ArgumentParser
import BenchSupport
import Foundation
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncPlatform
import LogSyncServer
import Logging
import SyncModel

@main
struct AssetBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-asset-bench",
        abstract:
            "A large asset over loopback HTTP against a plain file copy, and the peak memory of client and server.",
        discussion: "Docs/Performance.md (\"Assets\") has the figures of the reference machine.",
        subcommands: [Measure.self, Serve.self], defaultSubcommand: Measure.self)
}

/// The user and token of the benchmark's server.
let benchToken = "lsk_asset-bench-token-0123456789abcdef"

struct Measure: BenchCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure", abstract: "Run the measurements (the default).")

    @OptionGroup var common: CommonOptions

    @Option(
        help: ArgumentHelp("The asset's size in MB (default 200, 20 with --quick).", valueName: "N"), transform: count()
    )
    var megabytes: Int?

    var size: Int { (megabytes ?? common.size(200, quick: 20)) * 1_000_000 }

    func measure(in scratch: ScratchDirectory) async throws {
        printHeader(
            "logsync-asset-bench — one asset over loopback HTTP against a file copy on the same disk", scratch: scratch)
        emit(
            "  asset: \(grouped(size)) bytes; pieces of \(AssetTransfer.chunkSize) bytes; server store: LMDB (files beside it), durable"
        )
        let source = scratch.url.appendingPathComponent("source.bin")
        try writeSource(source, size: size)
        let hashStarted = ContinuousClock.now
        let digest = try AssetDigest.ofFile(at: source).digest
        let hashSeconds = (ContinuousClock.now - hashStarted).seconds

        emit("  file copy…")
        let copy = try fileCopy(source, to: scratch.url.appendingPathComponent("copy.bin"))
        let readBack = try readFile(
            scratch.url.appendingPathComponent("copy.bin"), to: scratch.url.appendingPathComponent("copy2.bin"))

        emit("  starting the server process…")
        let server = try ServerProcess.start(data: scratch.url.appendingPathComponent("server"), scratch: scratch.url)
        defer { server.stop() }
        let client = HTTPSyncClient(
            .init(
                serverURL: URL(string: "http://127.0.0.1:\(server.port)")!, credentials: .token(benchToken),
                device: DeviceID("bench")
            ))
        defer { client.close() }
        let database = client.database(.private)
        let zone = RecordZone.ID(zoneName: "Photos")
        _ = try await database.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])

        emit("  upload…")
        let upload = try await measured(server) {
            let response = try await database.uploadAsset(
                AssetUploadRequest(zoneID: zone, digest: digest, size: Int64(size), fileURL: source))
            guard response.bytesSent == Int64(size) else {
                throw BenchError("the upload sent \(response.bytesSent) bytes, not \(size)")
            }
        }
        emit("  download…")
        let destination = scratch.url.appendingPathComponent("downloaded.bin")
        let download = try await measured(server) {
            _ = try await database.downloadAsset(
                AssetDownloadRequest(zoneID: zone, digest: digest, size: Int64(size), destination: destination))
        }
        guard try AssetDigest.ofFile(at: destination).digest == digest else {
            throw BenchError("the downloaded file differs")
        }

        let megabytes = Double(size) / 1_000_000
        func rate(_ seconds: Double) -> String { String(format: "%.0f", megabytes / seconds) }
        emit()
        emit(
            table([
                [
                    "transfer", "seconds", "MB/s", "HTTP / file copy", "client peak above rest",
                    "server peak above rest", "CPU s client", "CPU s server",
                ],
                ["file copy (write + fsync)", String(format: "%.2f", copy), rate(copy), "", "", "", "", ""],
                [
                    "upload (HTTP, stored durably)", String(format: "%.2f", upload.seconds), rate(upload.seconds),
                    ratio(copy / upload.seconds), "\(mib(upload.clientPeak)) MiB", "\(mib(upload.serverPeak)) MiB",
                    String(format: "%.2f", upload.clientCPU), String(format: "%.2f", upload.serverCPU),
                ],
                ["file read + write (+ fsync)", String(format: "%.2f", readBack), rate(readBack), "", "", "", "", ""],
                [
                    "download (HTTP, checked, synced)", String(format: "%.2f", download.seconds),
                    rate(download.seconds),
                    ratio(readBack / download.seconds), "\(mib(download.clientPeak)) MiB",
                    "\(mib(download.serverPeak)) MiB",
                    String(format: "%.2f", download.clientCPU), String(format: "%.2f", download.serverCPU),
                ],
            ]))
        emit("SHA-256 of the \(grouped(size)) bytes on one core, for scale: \(String(format: "%.2f", hashSeconds)) s")
        emit("targets: HTTP / file copy ≥ 0.50; each peak above rest below 64 MiB (flat in the asset's size)")
        printLoadAtEnd()
    }

    /// Runs `body` with both processes' peaks reset; returns its seconds and each process's peak
    /// resident size above what it held at rest before, in kB.
    func measured(
        _ server: ServerProcess, _ body: () async throws -> Void
    ) async throws -> (seconds: Double, clientPeak: Int, serverPeak: Int, clientCPU: Double, serverCPU: Double) {
        let clientRest = ProcessMemory.resident(of: nil)
        let serverRest = ProcessMemory.resident(of: server.pid)
        ProcessMemory.resetPeak(of: nil)
        ProcessMemory.resetPeak(of: server.pid)
        let (clientCPU, serverCPU) = (ProcessMemory.cpuSeconds(of: nil), ProcessMemory.cpuSeconds(of: server.pid))
        let started = ContinuousClock.now
        try await body()
        let seconds = (ContinuousClock.now - started).seconds
        return (
            seconds, max(0, ProcessMemory.peak(of: nil) - clientRest),
            max(0, ProcessMemory.peak(of: server.pid) - serverRest),
            ProcessMemory.cpuSeconds(of: nil) - clientCPU, ProcessMemory.cpuSeconds(of: server.pid) - serverCPU
        )
    }

    /// Writes `size` bytes of a fast pseudo-random sequence (incompressible, unlike zeros).
    func writeSource(_ url: URL, size: Int) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw BenchError("cannot create \(url.path)")
        }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var piece = [UInt64](repeating: 0, count: AssetTransfer.chunkSize / 8)
        var written = 0
        while written < size {
            for index in piece.indices {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                piece[index] = state
            }
            let count = min(AssetTransfer.chunkSize, size - written)
            try piece.withUnsafeBytes { try handle.write(contentsOf: Data($0.prefix(count))) }
            written += count
        }
        try handle.synchronize()
    }

    /// Copies `source` to `destination` in 1 MiB pieces and syncs it: seconds.
    func fileCopy(_ source: URL, to destination: URL) throws -> Double {
        let started = ContinuousClock.now
        try copy(source, to: destination)
        return (ContinuousClock.now - started).seconds
    }

    /// The file copy again, from the copy: the disk work of a download (read a stored content,
    /// write and sync a new file).
    func readFile(_ source: URL, to destination: URL) throws -> Double {
        try fileCopy(source, to: destination)
    }

    func copy(_ source: URL, to destination: URL) throws {
        let input = open(source.path, O_RDONLY)
        let output = open(destination.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard input >= 0, output >= 0 else { throw BenchError("cannot open \(source.path) or \(destination.path)") }
        defer {
            close(input)
            close(output)
        }
        var buffer = [UInt8](repeating: 0, count: AssetTransfer.chunkSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            guard count >= 0 else { throw BenchError("reading \(source.path) failed") }
            if count == 0 { break }
            let written = buffer.withUnsafeBytes { write(output, $0.baseAddress, count) }
            guard written == count else { throw BenchError("writing \(destination.path) failed") }
        }
        guard fsync(output) == 0 else { throw BenchError("syncing \(destination.path) failed") }
    }
}

/// `logsync-asset-bench serve`: the server process of the measurements.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Serve the benchmark's server on loopback (used by measure).",
        shouldDisplay: false)

    @Option(help: "The server's data directory.") var data: String
    @Option(help: "The file the listening port is written to.") var portFile: String

    func run() async throws {
        let server = try SyncServer(
            SyncServer.Configuration(directory: URL(fileURLWithPath: data), durability: .durable))
        let tokens = TokenStore()
        try tokens.add(token: benchToken, for: "bench")
        let running = try await RunningHTTPSyncServer.start(
            HTTPSyncServer(
                server: server, tokens: tokens, configuration: .init(port: 0),
                logger: Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })))
        try Data("\(running.port)".utf8).write(to: URL(fileURLWithPath: portFile + ".tmp"))
        guard rename(portFile + ".tmp", portFile) == 0 else { throw BenchError("cannot write \(portFile)") }
        // Serve until the parent kills this process.
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}

/// The server process: this executable running `serve`.
final class ServerProcess {
    let process: Process
    let port: Int
    var pid: Int32 { process.processIdentifier }

    init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    static func start(data: URL, scratch: URL) throws -> ServerProcess {
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let portFile = scratch.appendingPathComponent("port")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["serve", "--data", data.path, "--port-file", portFile.path]
        try process.run()
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let text = try? String(contentsOf: portFile, encoding: .utf8), let port = Int(text) {
                return ServerProcess(process: process, port: port)
            }
            guard process.isRunning else {
                throw BenchError("the server process exited with status \(process.terminationStatus)")
            }
            usleep(20_000)
        }
        process.terminate()
        throw BenchError("the server process did not start listening within 60 s")
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// Resident sizes of a process (this one for `nil`), from /proc, in kB.
enum ProcessMemory {
    static func status(of pid: Int32?) -> [String: Int] {
        let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [:] }
        var fields: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\t" })
            if parts.count >= 2, let kB = Int(parts[1]) { fields[String(parts[0])] = kB }
        }
        return fields
    }

    static func resident(of pid: Int32?) -> Int { status(of: pid)["VmRSS"] ?? 0 }

    /// The processor time the process has used, user and system, in seconds (10 ms ticks).
    static func cpuSeconds(of pid: Int32?) -> Double {
        let path = pid.map { "/proc/\($0)/stat" } ?? "/proc/self/stat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), let close = text.lastIndex(of: ")") else {
            return 0
        }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15 (1-based, whole line).
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    static func peak(of pid: Int32?) -> Int { status(of: pid)["VmHWM"] ?? 0 }

    /// Resets the peak resident size (VmHWM) to the current one.
    static func resetPeak(of pid: Int32?) {
        let path = pid.map { "/proc/\($0)/clear_refs" } ?? "/proc/self/clear_refs"
        try? Data("5".utf8).write(to: URL(fileURLWithPath: path))
    }
}
