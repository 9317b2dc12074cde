import AsyncHTTPClient
import ChildProcesses
import Foundation
import LogSync
import LogSyncHTTP
import LogSyncServer
import LogSyncTesting
import LogSyncWire
import NIOCore
import NIOHTTP1
import PostgresProcess
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

/// Support bundles uploaded over HTTP to a `logsync-server` process (Docs/Protocol.md, "Support
/// bundles"; Docs/Privacy.md, "Uploaded bundles"): the user uploads, resuming a cut upload; the
/// server verifies before it stores; only the operator lists and downloads.
@Suite("Support bundles: upload, verify, read by the operator only", .timeLimit(.minutes(5)))
struct SupportBundleUploadTests {
    /// The store a server process keeps its data in.
    enum Store: String, CustomTestStringConvertible, CaseIterable {
        case lmdb, postgres
        var testDescription: String { rawValue }

        /// The options naming a new store of this kind for a test in `directory`.
        func arguments(in directory: URL) async throws -> [String] {
            switch self {
            case .lmdb: ["--data", directory.appendingPathComponent("data").path]
            case .postgres: ["--store", try await PostgresTestServer.shared().createDatabase()]
            }
        }
    }

    /// A phone's support bundle: a zone and two notes synced with a server of its own, exported
    /// into `directory/report.lsb`.
    static func phoneBundle(in directory: URL) async throws -> URL {
        let server = try makeServer(directory.appendingPathComponent("phone-server"))
        defer { server.shutdown() }
        let phone = try TestDevice("phone", server: server, directory: directory)
        let zone = RecordZone.ID(zoneName: "Notes")
        try phone.createZone(zone)
        try phone.edit(Record.ID(recordName: "groceries", zoneID: zone), ["title": "Groceries", "body": "milk"])
        try phone.edit(Record.ID(recordName: "todo", zoneID: zone), ["title": "To do", "body": "call"])
        try await phone.sync()
        let bundle = directory.appendingPathComponent("report.lsb")
        try phone.engine.exportSupportBundle(to: bundle, options: .init(appVersion: "2.3 (118)"))
        return bundle
    }

    /// A `logsync-server` process on `data` (or `store`) with an admin token, alice and bob.
    struct Served {
        var process: ChildProcess
        var url: URL
        var adminToken: String
        var alice: String
        var bob: String
        var storeArguments: [String]
        var admin: AdminClient { AdminClient(serverURL: url, adminToken: adminToken) }

        func client(_ token: String) -> HTTPSyncClient {
            HTTPSyncClient(.init(serverURL: url, credentials: .token(token), device: "phone"))
        }

        /// `logsync-server arguments --server URL` with the admin token in the environment.
        func command(_ arguments: [String]) async throws -> ChildProcess.Finished {
            var environment = ProcessInfo.processInfo.environment
            environment["LOGSYNC_ADMIN_TOKEN"] = adminToken
            return try await ChildProcess.run(arguments + ["--server", url.absoluteString], environment: environment)
        }
    }

    /// Serves `storeArguments` (`--data DIR` or `--store postgres://…`) with `options`.
    static func serve(
        _ storeArguments: [String], in directory: URL, options: [String] = [], environment: [String: String]? = nil
    ) async throws -> Served {
        let adminFile = directory.appendingPathComponent("admin-tokens")
        let adminToken = try await ChildProcess.addAdminToken(to: adminFile)
        var tokens: [String] = []
        for user in ["alice", "bob"] {
            let user = try await ChildProcess.run(["user", "add", user] + storeArguments, environment: environment)
            guard user.status == 0 else { throw TestFailure("user add failed: \(user)") }
            tokens.append(user.output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let process = try ChildProcess.start(
            ["serve"] + storeArguments + ["--admin-token-file", adminFile.path, "--port", "0"] + options,
            environment: environment)
        let port = try await process.waitForPort()
        return Served(
            process: process, url: URL(string: "http://127.0.0.1:\(port)")!,
            adminToken: adminToken, alice: tokens[0],
            bob: tokens[1], storeArguments: storeArguments)
    }

    /// Every regular file under the users' `bundles` directories of an LMDB store, with its size.
    static func bundleFiles(_ data: URL) -> [String: Int] {
        var files: [String: Int] = [:]
        let users = data.appendingPathComponent("users")
        for user in (try? FileManager.default.contentsOfDirectory(atPath: users.path)) ?? [] {
            let bundles = users.appendingPathComponent(user).appendingPathComponent("bundles")
            let walk = FileManager.default.enumerator(at: bundles, includingPropertiesForKeys: [.fileSizeKey])
            while let file = walk?.nextObject() as? URL {
                let values = try? file.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey])
                if values?.isRegularFile == true { files[file.path] = values?.fileSize ?? 0 }
            }
        }
        return files
    }

    /// A raw request to `url` + `path`.
    static func raw(
        _ url: URL, _ path: String, method: HTTPMethod = .GET, token: String?, body: [UInt8]? = nil
    ) async throws -> (status: Int, body: String, count: Int) {
        var request = HTTPClientRequest(url: url.absoluteString + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/octet-stream")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        let buffer = try await response.body.collect(upTo: 16 << 20)
        return (
            Int(response.status.code), String(decoding: buffer.readableBytesView, as: UTF8.self), buffer.readableBytes
        )
    }

    /// The upload, the listing and the download, over HTTP against a server process on
    /// `storeArguments`; the bundle downloaded is byte for byte the one uploaded, and logtool
    /// reads it.
    static func uploadListGet(
        _ storeArguments: [String], in directory: URL, environment: [String: String]? = nil
    )
        async throws
    {
        let bundle = try await phoneBundle(in: directory)
        let bytes = try Data(contentsOf: bundle.appendingPathComponent("data.mdb"))
        let served = try await serve(storeArguments, in: directory, environment: environment)
        let alice = served.client(served.alice)
        defer { alice.close() }

        // 10:00 alice's phone uploads its report: the ID is the bundle's SHA-256.
        let id = try await alice.uploadSupportBundle(at: bundle)
        #expect(id == AssetHasher.digest(of: bytes).hex)
        // The same upload again stores nothing twice.
        #expect(try await alice.uploadSupportBundle(at: bundle) == id)

        // 10:05 the operator lists it, as JSON and as a table, and downloads it.
        let listed = try await served.command(["bundles", "list", "--json", "--user", "alice"])
        #expect(listed.status == 0, "\(listed)")
        let list = try WireSessions.decode(WireBundles.Bundles.self, from: Array(listed.output.utf8))
        #expect(list.bundles.map(\.id) == [id])
        let stored = try #require(list.bundles.first)
        #expect(stored.user == "alice" && stored.size == Int64(bytes.count) && stored.appVersion == "2.3 (118)")
        #expect(stored.firstOffset == 1 && stored.lastOffset > 1 && stored.baseOffset == 0 && stored.keyID.count == 16)
        #expect(stored.database == "private")
        let table = try await served.command(["bundles", "list"])
        #expect(table.status == 0 && table.output.contains(id) && table.output.contains("alice"), "\(table)")
        let bobs = try await served.admin.supportBundles(of: "bob")
        #expect(bobs.isEmpty)

        let copy = directory.appendingPathComponent("copy.lsb")
        let got = try await served.command(["bundles", "get", id, "--output", copy.path])
        #expect(got.status == 0, "\(got)")
        #expect(try Data(contentsOf: copy.appendingPathComponent("data.mdb")) == bytes)
        let dump = try await ChildProcess.run(["dump", copy.path], program: "logtool")
        #expect(dump.status == 0 && !dump.output.isEmpty, "\(dump)")

        #expect(try await served.process.terminate().status == 0)
    }

    @Test(
        "a bundle uploaded over HTTP to a server process is listed and downloaded byte for byte by the operator, and logtool reads it",
        arguments: Store.allCases)
    func uploadListGet(store: Store) async throws {
        try await withTemporaryDirectory { directory in
            try await Self.uploadListGet(try await store.arguments(in: directory), in: directory)
        }
    }

    @Test("an upload cut after half its bytes resumes from where the server stands", arguments: Store.allCases)
    func resumedUpload(store: Store) async throws {
        try await withTemporaryDirectory { directory in
            let bundle = try await Self.phoneBundle(in: directory)
            let bytes = [UInt8](try Data(contentsOf: bundle.appendingPathComponent("data.mdb")))
            let id = AssetHasher.digest(of: bytes).hex
            let served = try await Self.serve(try await store.arguments(in: directory), in: directory)
            let alice = served.client(served.alice)
            defer { alice.close() }

            // The phone's first attempt ends after half the bundle (the body ends there).
            let half = bytes.count / 2
            let first = try await Self.raw(
                served.url, WireBundles.uploadPath(id) + "?size=\(bytes.count)&offset=0", method: .PUT,
                token: served.alice, body: Array(bytes[..<half]))
            #expect(first.status == 200, "\(first)")
            let status = try await alice.bundleUploadStatus(id, size: Int64(bytes.count))
            #expect(status == WireBundles.UploadStatus(received: Int64(half), size: Int64(bytes.count), bundle: nil))
            #expect(try await served.admin.supportBundles().isEmpty)

            // A piece out of order is refused, naming where the server stands.
            let wrong = try await Self.raw(
                served.url, WireBundles.uploadPath(id) + "?size=\(bytes.count)&offset=0", method: .PUT,
                token: served.alice, body: Array(bytes[..<10]))
            #expect(wrong.status == 400 && wrong.body.contains("holds \(half) bytes"), "\(wrong)")

            // The next attempt sends the rest only.
            #expect(try await alice.uploadSupportBundle(at: bundle) == id)
            let stored = try await served.admin.supportBundles()
            #expect(stored.map(\.id) == [id] && stored.first?.size == Int64(bytes.count))
            let copy = directory.appendingPathComponent("copy.lsb")
            try await served.admin.downloadSupportBundle(id, to: copy)
            #expect([UInt8](try Data(contentsOf: copy.appendingPathComponent("data.mdb"))) == bytes)
            #expect(try await served.process.terminate().status == 0)
        }
    }

    @Test(
        "a truncated, a tampered (one bit flipped) and an oversized bundle are refused with a typed error naming the part, and nothing is stored",
        arguments: Store.allCases)
    func damagedBundlesRefused(store: Store) async throws {
        try await withTemporaryDirectory { directory in
            let bundle = try await Self.phoneBundle(in: directory)
            let bytes = [UInt8](try Data(contentsOf: bundle.appendingPathComponent("data.mdb")))
            let data = directory.appendingPathComponent("data")
            let served = try await Self.serve(
                try await store.arguments(in: directory), in: directory,
                options: ["--max-bundle-bytes", "\(bytes.count)"])
            let alice = served.client(served.alice)
            defer { alice.close() }

            func variant(_ name: String, _ bytes: [UInt8]) throws -> URL {
                let directory = directory.appendingPathComponent(name)
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try Data(bytes).write(to: directory.appendingPathComponent("data.mdb"))
                return directory
            }
            // Cut at a page boundary, as a copy that stopped early is.
            let truncated = try variant("truncated.lsb", Array(bytes[..<(bytes.count / 4096 / 2 * 4096)]))
            // A bit of the manifest flipped: the entry's checksum no longer matches.
            var flipped = bytes
            let keyID = Array("\"keyID\"".utf8)
            let at = try #require(
                (0...(bytes.count - keyID.count)).first { Array(bytes[$0..<($0 + keyID.count)]) == keyID })
            flipped[at + 2] ^= 0x01
            let tampered = try variant("tampered.lsb", flipped)
            // A page past the server's limit.
            let oversized = try variant("oversized.lsb", bytes + [UInt8](repeating: 0, count: 4096))

            let cut = await #expect(throws: SyncError.self) { try await alice.uploadSupportBundle(at: truncated) }
            #expect(cut?.code == .invalidArguments, "\(String(describing: cut))")
            #expect(cut?.message.contains("support bundle") == true, "\(String(describing: cut))")
            let bit = await #expect(throws: SyncError.self) { try await alice.uploadSupportBundle(at: tampered) }
            #expect(bit?.code == .invalidArguments, "\(String(describing: bit))")
            #expect(
                bit?.message.contains("page") == true || bit?.message.contains("offset") == true,
                "the error names the page or the offset: \(String(describing: bit))")
            let big = await #expect(throws: SyncError.self) { try await alice.uploadSupportBundle(at: oversized) }
            #expect(big?.code == .limitExceeded, "\(String(describing: big))")

            #expect(try await served.admin.supportBundles().isEmpty)
            #expect(Self.bundleFiles(data).isEmpty, "\(Self.bundleFiles(data))")
            #expect(try await served.process.terminate().status == 0)
        }
    }

    @Test(
        "no user, the uploader included, lists or downloads a bundle: a user's token, a wrong token or none gets the same 401 whether the bundle exists or not, and nothing is written"
    )
    func onlyTheOperatorReads() async throws {
        try await withTemporaryDirectory { directory in
            let bundle = try await Self.phoneBundle(in: directory)
            let data = directory.appendingPathComponent("data")
            let served = try await Self.serve(["--data", data.path], in: directory)
            let alice = served.client(served.alice)
            defer { alice.close() }
            let id = try await alice.uploadSupportBundle(at: bundle)
            let missing = String(repeating: "0", count: 64)
            let before = Self.bundleFiles(data)

            var answers: Set<String> = []
            for token in [served.alice, served.bob, "lsk_not-a-token-0123456789abcdef", nil] {
                for path in [
                    WireBundles.adminBundlesPath, WireBundles.adminBundlesPath(user: "alice"),
                    WireBundles.adminBundlePath(id), WireBundles.adminBundlePath(missing),
                ] {
                    let answer = try await Self.raw(served.url, path, token: token)
                    #expect(answer.status == 401, "\(path): \(answer)")
                    answers.insert(answer.body)
                }
                // No route reads a bundle back with a user's token.
                let back = try await Self.raw(served.url, WireBundles.uploadPath(id), token: token)
                #expect(back.status != 200, "\(back)")
            }
            #expect(answers.count == 1, "every refusal answers alike: \(answers)")
            let refused = await #expect(throws: SyncError.self) {
                try await AdminClient(serverURL: served.url, adminToken: served.alice).supportBundles()
            }
            #expect(refused?.code == .notAuthenticated)
            #expect(Self.bundleFiles(data) == before)
            // The operator reads it; an ID not stored is 404 for the operator only.
            let stored = try await served.admin.supportBundles()
            #expect(stored.map(\.id) == [id])
            let unknown = await #expect(throws: SyncError.self) {
                try await served.admin.downloadSupportBundle(missing, to: directory.appendingPathComponent("x.lsb"))
            }
            #expect(unknown?.code == .unknownItem)

            // The console lists it on alice's page, with a download link for the operator's
            // session; a user's token gets the console's 401.
            let page = try await Self.raw(served.url, "/console/users/alice", token: served.adminToken)
            #expect(page.status == 200 && page.body.contains("data-bundle=\"\(id)\""), "\(page)")
            let console = try await Self.raw(served.url, "/console/bundles/\(id)", token: served.adminToken)
            let size = try #require(stored.first).size
            #expect(console.status == 200 && console.count == Int(size))
            for token in [served.alice, nil] {
                let refused = try await Self.raw(served.url, "/console/bundles/\(id)", token: token)
                #expect(refused.status == 401, "\(refused)")
            }
            #expect(try await served.process.terminate().status == 0)
        }
    }

    @Test(
        "bundles past the retention period are removed by the sweep, on the server's clock, and an abandoned partial upload with them"
    )
    func retentionSweep() async throws {
        try await withTemporaryDirectory { directory in
            let bundle = try await Self.phoneBundle(in: directory)
            let bytes = [UInt8](try Data(contentsOf: bundle.appendingPathComponent("data.mdb")))
            // The server's clock starts now (a partial upload's age is its file's), in whole
            // seconds as the stored description keeps them.
            let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            let clock = Mutex(start)
            var configuration = SyncServer.Configuration(
                directory: directory.appendingPathComponent("server"), durability: .fast,
                now: { clock.withLock { $0 } })
            configuration.supportBundleRetention = 30 * 86_400
            let server = try SyncServer(configuration)
            defer { server.shutdown() }

            // Day 0: alice uploads a bundle; bob's upload stops half way and is never resumed.
            let upload = try await server.beginSupportBundleUpload(
                user: "alice", id: AssetHasher.digest(of: bytes), size: Int64(bytes.count))
            try await upload.write(bytes, at: 0)
            let stored = try await upload.finish()
            upload.close()
            #expect(stored.uploaded == start)
            var flipped = bytes
            flipped[0] ^= 1
            let abandoned = try await server.beginSupportBundleUpload(
                user: "bob", id: AssetHasher.digest(of: flipped), size: Int64(bytes.count))
            try await abandoned.write(Array(flipped[..<(bytes.count / 2)]), at: 0)
            abandoned.close()
            let files = Self.bundleFiles(directory.appendingPathComponent("server"))
            #expect(files.keys.filter { $0.contains("/partial/") }.count == 1, "\(files)")

            // Day 29: both kept.
            clock.withLock { $0 = $0.addingTimeInterval(29 * 86_400) }
            #expect(try await server.removeExpiredSupportBundles().isEmpty)
            #expect(try await server.supportBundles().map(\.id) == [stored.id])
            #expect(Self.bundleFiles(directory.appendingPathComponent("server")) == files)
            // Day 31: removed, their files with them.
            clock.withLock { $0 = $0.addingTimeInterval(2 * 86_400) }
            #expect(try await server.removeExpiredSupportBundles().map(\.id) == [stored.id])
            #expect(try await server.supportBundles().isEmpty)
            #expect(Self.bundleFiles(directory.appendingPathComponent("server")).isEmpty)
        }
    }
}
