import ChildProcesses
import Foundation
import LogSyncHTTP
import LogSyncWire
import SyncModel
import TemporaryDirectory
import Testing

/// Devices signed in with real identity tokens, against a `logsync-server` process on LMDB: a
/// local issuer made by `logsync-server dev-issuer`, trusted by `--identity-config`.
@Suite("Sign-in with dev-issuer tokens against a logsync-server process", .timeLimit(.minutes(3)))
struct SignInProcessTests {
    /// The bound on how soon a signed-out device's push channel ends, from the revocation's
    /// answer: a security bound, so measured here, on whatever machine runs the test.
    static let cutOffBound: Duration = .seconds(1)

    /// How many whole binary WebSocket frames (the `subscribed` frame, hints) a raw push channel
    /// has received after the upgrade's answer: pings, which the server sends every 30 seconds,
    /// are control frames and not counted.
    static func binaryFrames(_ channel: RawConnection) -> Int {
        let bytes = channel.bytes
        guard let head = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return 0 }
        var at = head.upperBound
        var count = 0
        // Server frames are unmasked: an opcode byte, a length byte, 2 or 8 more for long ones.
        while at + 2 <= bytes.count {
            var start = at + 2
            var length = Int(bytes[at + 1] & 0x7F)
            let extra = length == 126 ? 2 : length == 127 ? 8 : 0
            if extra > 0 {
                guard start + extra <= bytes.count else { break }
                length = bytes[start..<start + extra].reduce(0) { $0 << 8 | Int($1) }
                start += extra
            }
            guard start + length <= bytes.count else { break }
            if bytes[at] & 0x0F == 0x2 { count += 1 }
            at = start + length
        }
        return count
    }

    @Test(
        "alice's phone and laptop sign in with JWTs and sync; the phone signed out from the laptop loses its push channel within a second and its tokens are refused, while the laptop syncs on"
    )
    func revokedDeviceCutOffOtherSyncs() async throws {
        try await withServerData { data in
            let directory = data.deletingLastPathComponent()
            let issuer = directory.appendingPathComponent("issuer")
            let made = try await ChildProcess.run(["dev-issuer", "init", "--directory", issuer.path])
            try #require(made.status == 0, "\(made)")
            let configuration = directory.appendingPathComponent("identity.json")
            try Data(made.output.utf8).write(to: configuration)
            let signed = try await ChildProcess.run(
                ["dev-issuer", "sign", "--directory", issuer.path, "--subject", "alice", "--audience", "logsync-dev"])
            try #require(signed.status == 0, "\(signed)")
            let identityToken = signed.output.trimmingCharacters(in: .whitespacesAndNewlines)

            let server = try ChildProcess.start(
                ["--data", data.path, "--port", "0", "--identity-config", configuration.path])
            let port = try await server.waitForPort()
            let url = URL(string: "http://127.0.0.1:\(port)")!
            let sessions = SessionClient(serverURL: url)

            // Both devices sign in with the same identity token: two sessions of dev:alice.
            let phone = try await sessions.signIn(identityToken: identityToken, device: "phone", name: "Phone")
            let laptop = try await sessions.signIn(identityToken: identityToken, device: "laptop", name: "Laptop")
            #expect(phone.user == "dev:alice" && laptop.user == "dev:alice")
            let phoneChannel = try await TokenRevocationTests.openPushChannel(
                port: port, token: phone.accessToken, device: "phone")
            defer { phoneChannel.close() }
            let laptopChannel = try await TokenRevocationTests.openPushChannel(
                port: port, token: laptop.accessToken, device: "laptop")
            defer { laptopChannel.close() }
            let phoneClient = HTTPSyncClient(
                .init(serverURL: url, credentials: .token(phone.accessToken), device: "phone"))
            defer { phoneClient.close() }
            let laptopClient = HTTPSyncClient(
                .init(serverURL: url, credentials: .token(laptop.accessToken), device: "laptop"))
            defer { laptopClient.close() }

            // The phone saves a note: the laptop is told on its push channel (F113; the phone's own
            // commits are not hinted to it, F114) and fetches it.
            let zone = RecordZone.ID(zoneName: "Notes")
            _ = try await laptopClient.database().modifySubscriptions(
                saving: [Subscription(subscriptionID: "notes")], deleting: [])
            try await laptopChannel.waitUntil("the laptop's subscribed frame is whole") { Self.binaryFrames($0) >= 1 }
            let hintsBefore = Self.binaryFrames(laptopChannel)
            _ = try await phoneClient.database().modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            let fromPhone = Record(recordType: "Note", recordID: Record.ID(recordName: "from-phone", zoneID: zone))
            let phoneSave = try await phoneClient.database().modifyRecords(saving: [fromPhone], deleting: [])
            _ = try #require(phoneSave.saveResults[fromPhone.recordID]).get()
            try await laptopChannel.waitUntil("the laptop is told of the phone's changes") {
                Self.binaryFrames($0) > hintsBefore  // a hint, not a ping
            }
            let seen = try await laptopClient.database().fetchZoneChanges(zoneID: zone, since: nil)
            #expect(seen.modifications.map(\.record.recordID) == [fromPhone.recordID])

            // The laptop signs the phone out. From the answer, the phone's push channel ends
            // within the bound, closed as revoked.
            try await sessions.revoke(device: "phone", accessToken: laptop.accessToken)
            let revoked = ContinuousClock.now
            try await TokenRevocationTests.waitUntil(
                "the phone's push channel is closed", by: revoked + TokenRevocationTests.patience
            ) { TokenRevocationTests.closedAsRevoked(phoneChannel) }
            let cutOff = ContinuousClock.now - revoked
            #expect(cutOff < Self.cutOffBound, "the phone's push channel ended \(cutOff) after the revocation")

            // The phone's access and refresh tokens are refused; the laptop saves and fetches on.
            #expect(try await TokenRevocationTests.fetchZones(port: port, token: phone.accessToken).status == 401)
            await #expect(throws: SyncError.self) { try await sessions.refresh(phone.refreshToken) }
            await #expect(throws: SyncError.self) {
                _ = try await phoneClient.database().fetchZoneChanges(zoneID: zone, since: nil)
            }
            let fromLaptop = Record(recordType: "Note", recordID: Record.ID(recordName: "from-laptop", zoneID: zone))
            let laptopSave = try await laptopClient.database().modifyRecords(saving: [fromLaptop], deleting: [])
            _ = try #require(laptopSave.saveResults[fromLaptop.recordID]).get()
            let after = try await laptopClient.database().fetchZoneChanges(zoneID: zone, since: nil)
            #expect(
                Set(after.modifications.map(\.record.recordID)) == [fromPhone.recordID, fromLaptop.recordID])
            #expect(!TokenRevocationTests.closedAsRevoked(laptopChannel) && !laptopChannel.isClosed)
            #expect(try await sessions.devices(accessToken: laptop.accessToken).map(\.device) == ["laptop"])

            let stopped = try await server.terminate()
            #expect(stopped.status == 0, "\(stopped)")
            #expect(stopped.errorOutput.contains("device signed out"), "\(stopped.errorOutput)")
            let left = try await ChildProcess.run(["sessions", "list", "--user", "dev:alice", "--data", data.path])
            #expect(left.output.hasPrefix("laptop\t") && left.output.hasSuffix("\tLaptop\n"), "\(left)")
        }
    }
}
