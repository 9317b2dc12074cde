import ChildProcesses
import Foundation
import LogStore
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncServer
import LogSyncTesting
import NIOSSL
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

/// HTTPS and wss: a server with the test certificate (Fixtures/tls, a chain under a test root CA),
/// clients that trust the root and clients that do not.
@Suite("TLS", .timeLimit(.minutes(2)))
struct TLSTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/tls", isDirectory: true)
    static let rootCA = fixtures.appendingPathComponent("ca.pem")
    static let serverChain = fixtures.appendingPathComponent("server-chain.pem")
    static let serverKey = fixtures.appendingPathComponent("server-key.pem")
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// The server side: the chain and key of the fixtures.
    static func serverTLS() throws -> TLSConfiguration {
        try HTTPSyncServer.tlsConfiguration(certificateChainFile: serverChain, privateKeyFile: serverKey)
    }

    /// A client side that trusts the test root CA only.
    static func trustingTLS() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(rootCA.path))
        return tls
    }

    /// A client of alice's for `url`, with `tls` (`nil`: the system's trust store).
    static func client(_ url: String, device: DeviceID, tls: TLSConfiguration?) -> HTTPSyncClient {
        HTTPSyncClient(
            .init(
                serverURL: URL(string: url)!, credentials: .token(LiveServer.aliceToken), device: device,
                reconnect: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200)),
                tlsConfiguration: tls))
    }

    /// Runs `body` with a live server speaking HTTPS only.
    static func withHTTPSServer(_ body: (LiveServer, URL) async throws -> Void) async throws {
        try await withLiveServer(configuration: .init(tlsConfiguration: try serverTLS()), body)
    }

    /// The zones of `client`'s private database.
    static func zoneIDs(of client: HTTPSyncClient) async throws -> [RecordZone.ID] {
        try await client.database().fetchAllZones().map(\.zoneID)
    }

    /// Alice's phone, trusting the test CA, after it created the zone Notes over https; and the
    /// last offset of her log then.
    static func phoneWithNotes(on live: LiveServer) async throws -> (phone: HTTPSyncClient, before: LogOffset) {
        let phone = client("https://localhost:\(live.port)", device: "phone", tls: try trustingTLS())
        _ = try await phone.database().modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        return (phone, try live.lastOffset(of: "alice"))
    }

    @Test("a client trusting the CA syncs over https and receives a push over wss")
    func trustedClientSyncsAndGetsPushes() async throws {
        try await Self.withHTTPSServer { live, _ in
            // Push channels send the URL's host as the TLS server name, so they need a host name.
            let url = "https://localhost:\(live.port)"
            let phone = Self.client(url, device: "phone", tls: try Self.trustingTLS())
            let laptop = Self.client(url, device: "laptop", tls: try Self.trustingTLS())
            defer {
                phone.close()
                laptop.close()
            }

            _ = try await phone.database().modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await phone.database().modifySubscriptions(
                saving: [Subscription(subscriptionID: "engine")], deleting: [])
            var hints = laptop.database().pushHints().makeAsyncIterator()
            await laptop.waitForPushChannels()
            #expect(laptop.pushConnectionCount == 1)

            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))
            note["title"] = "over https"
            let saved = try await phone.database().modifyRecords(saving: [note], deleting: [])
            #expect(saved.saveResults.count == 1)

            let hint = await hints.next()
            #expect(hint?.zoneID == Self.notes)
            let fetched = try await laptop.database().fetchZoneChanges(zoneID: Self.notes, since: nil)
            #expect(fetched.modifications.map { $0.record["title"] } == [.string("over https")])

            // The certificate names 127.0.0.1 too (an IP SAN): requests to the address work.
            let byAddress = Self.client("https://127.0.0.1:\(live.port)", device: "tablet", tls: try Self.trustingTLS())
            #expect(try await Self.zoneIDs(of: byAddress).contains(Self.notes))
        }
    }

    @Test("a client not trusting the CA gets networkFailure naming the certificate, and nothing is written")
    func untrustedCertificateIsANetworkFailure() async throws {
        try await Self.withHTTPSServer { live, _ in
            let (trusted, before) = try await Self.phoneWithNotes(on: live)

            // The system trust store does not know the test CA.
            for url in ["https://localhost:\(live.port)", "https://127.0.0.1:\(live.port)"] {
                let untrusted = Self.client(url, device: "laptop", tls: nil)
                var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))
                note["title"] = "must not arrive"
                let error = try await #require(throws: SyncError.self) {
                    _ = try await untrusted.database().modifyRecords(saving: [note], deleting: [])
                }
                // Not serverResponseLost: nothing is sent before the handshake succeeds.
                #expect(error.code == .networkFailure, "\(error)")
                #expect(error.isTransient)
                #expect(error.message.contains("not trusted"), "\(error)")
                let read = try await #require(throws: SyncError.self) {
                    _ = try await untrusted.database().fetchAllZones()
                }
                #expect(read.code == .networkFailure, "\(read)")
            }

            // A CA that is not the server's is no better than none.
            var otherCA = TLSConfiguration.makeClientConfiguration()
            otherCA.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(Self.serverChain.path).suffix(1))
            let wrongRoot = Self.client("https://localhost:\(live.port)", device: "laptop", tls: otherCA)
            let error = try await #require(throws: SyncError.self) {
                _ = try await wrongRoot.database().fetchAllZones()
            }
            #expect(error.code == .networkFailure, "\(error)")

            #expect(try live.lastOffset(of: "alice") == before)
            #expect(try await Self.zoneIDs(of: trusted).contains(Self.notes))
        }
    }

    @Test("an engine whose server's certificate is not trusted keeps its changes: the error is one it retries")
    func engineKeepsChangesOnCertificateFailure() async throws {
        try await Self.withHTTPSServer { live, directory in
            let (_, before) = try await Self.phoneWithNotes(on: live)

            let untrusted = Self.client("https://localhost:\(live.port)", device: "laptop", tls: nil)
            let device = try TestDevice(
                "laptop", database: untrusted.database(),
                directory: directory.appendingPathComponent("laptop", isDirectory: true))
            let engine = device.engine
            let id = Record.ID(recordName: "n1", zoneID: Self.notes)
            try device.write(id, "kept")

            let failure = try await #require(throws: SyncError.self) { try await engine.sendChanges() }
            let error = failure.partialErrors[.record(id)] ?? failure
            #expect(error.code == .networkFailure, "\(failure)")
            #expect(error.isTransient, "the engine retries it by itself")
            #expect(try engine.state.pendingRecordZoneChanges == [.saveRecord(id)])
            #expect(try live.lastOffset(of: "alice") == before)
        }
    }

    @Test("plain http to the https port fails cleanly with networkFailure, and the server serves on")
    func protocolMismatchFailsCleanly() async throws {
        try await Self.withHTTPSServer { live, _ in
            let plain = Self.client("http://127.0.0.1:\(live.port)", device: "laptop", tls: nil)
            let error = try await #require(throws: SyncError.self) { _ = try await plain.database().fetchAllZones() }
            #expect(error.code == .networkFailure, "\(error)")
            let write = try await #require(throws: SyncError.self) {
                _ = try await plain.database().modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            }
            #expect(write.code == .networkFailure, "\(write)")

            // The server still serves TLS clients.
            let trusted = Self.client("https://localhost:\(live.port)", device: "phone", tls: try Self.trustingTLS())
            let zones = try await Self.zoneIDs(of: trusted)
            #expect(!zones.contains(Self.notes), "the zone sent in plain HTTP was not saved")
        }
    }

    @Test("logsync-server --tls-certificate --tls-key serves https and wss")
    func serverProcess() async throws {
        try await withServerData { data in
            let token = try await addUser("alice", data: data)
            let server = try ChildProcess.start([
                "--data", data.path, "--port", "0", "--tls-certificate", Self.serverChain.path, "--tls-key",
                Self.serverKey.path,
            ])
            let port = try await server.waitForPort()
            let url = URL(string: "https://localhost:\(port)")!
            let laptop = HTTPSyncClient(
                .init(
                    serverURL: url, credentials: .token(token), device: "laptop",
                    tlsConfiguration: try Self.trustingTLS()))
            let phone = HTTPSyncClient(
                .init(
                    serverURL: url, credentials: .token(token), device: "phone",
                    tlsConfiguration: try Self.trustingTLS()))
            _ = try await phone.database().modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            _ = try await phone.database().modifySubscriptions(
                saving: [Subscription(subscriptionID: "engine")], deleting: [])
            var hints = laptop.database().pushHints().makeAsyncIterator()
            await laptop.waitForPushChannels()
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: Self.notes))
            note["title"] = "from the phone"
            _ = try await phone.database().modifyRecords(saving: [note], deleting: [])
            let hint = await hints.next()
            let fetched = try await laptop.database().fetchZoneChanges(zoneID: Self.notes, since: nil)
            laptop.close()
            let plain = HTTPSyncClient(
                .init(serverURL: URL(string: "http://127.0.0.1:\(port)")!, credentials: .token(token)))
            await #expect(throws: SyncError.self) { _ = try await plain.database().fetchAllZones() }

            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(hint?.zoneID == Self.notes)
            #expect(fetched.modifications.map { $0.record["title"] } == [.string("from the phone")])
            let listening = stopped.errorOutput.split(separator: "\n").first {
                $0.contains("listening") && $0.contains("port=")
            }
            #expect(listening?.contains("scheme=https") == true, "\(stopped)")
            #expect(listening?.contains("port=\(port)") == true, "\(stopped)")
        }
    }

    @Test("--tls-certificate and --tls-key come together, and unusable files are named")
    func serverFlags() async throws {
        let alone = try await ChildProcess.run(["--data", "/tmp/unused", "--tls-certificate", Self.serverChain.path])
        #expect(alone.status != 0)
        #expect(alone.errorOutput.contains("--tls-certificate needs --tls-key"), "\(alone)")
        let keyAlone = try await ChildProcess.run(["--data", "/tmp/unused", "--tls-key", Self.serverKey.path])
        #expect(keyAlone.status != 0)
        #expect(keyAlone.errorOutput.contains("--tls-key needs --tls-certificate"), "\(keyAlone)")

        try await withTemporaryDirectory { directory in
            // The root CA's certificate with the server's key: the key is not that certificate's.
            let mismatched = try await ChildProcess.run([
                "--data", directory.path, "--port", "0", "--tls-certificate", Self.rootCA.path, "--tls-key",
                Self.serverKey.path,
            ])
            #expect(mismatched.status != 0)
            #expect(mismatched.errorOutput.contains("cannot start"), "\(mismatched)")
            #expect(mismatched.errorOutput.contains(Self.serverKey.path), "\(mismatched)")

            let missing = directory.appendingPathComponent("missing.pem")
            let error = try #require(throws: HTTPSyncServer.TLSFileError.self) {
                _ = try HTTPSyncServer.tlsConfiguration(certificateChainFile: missing, privateKeyFile: Self.serverKey)
            }
            #expect(error.path == missing.path)
            let notAKey = try #require(throws: HTTPSyncServer.TLSFileError.self) {
                _ = try HTTPSyncServer.tlsConfiguration(
                    certificateChainFile: Self.serverChain, privateKeyFile: Self.rootCA)
            }
            #expect(notAKey.path == Self.rootCA.path, "\(notAKey)")
            #expect(notAKey.problem.contains("private key"), "\(notAKey)")
        }
    }
}
