import Foundation
import LogSync
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncTesting
import LogSyncWire
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSyncServer

/// The client side of sessions: an `HTTPSyncClient` whose credentials are a session refreshes it
/// by itself, keeps each pair where the app says, and an engine on it sees the device signed
/// out as an account change (F86, F104).
@Suite("Session credentials", .timeLimit(.minutes(2)))
struct SessionCredentialsTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// `device`'s session on `served`, kept in `file` when given, on the server's clock.
    static func session(
        _ served: SessionHTTPTests.Served, device: DeviceID, file: URL? = nil
    ) -> SessionCredentials {
        SessionCredentials(
            sessions: served.client, device: device, storage: file.map { .file($0) } ?? .memory,
            now: { served.clock.now })
    }

    /// A client of `device` presenting `session`.
    static func client(
        _ served: SessionHTTPTests.Served, _ session: SessionCredentials, device: DeviceID
    ) -> HTTPSyncClient {
        HTTPSyncClient(.init(serverURL: served.url, credentials: session.credentials, device: device))
    }

    /// Alice's phone signed in on a session server, its session kept in `directory/session.json`,
    /// and a client presenting it (closed after `body`).
    static func withSignedInPhone(
        _ body: (
            _ served: SessionHTTPTests.Served, _ session: SessionCredentials, _ client: HTTPSyncClient,
            _ directory: URL
        ) async throws -> Void
    ) async throws {
        try await SessionHTTPTests().withSessionServer { served in
            try await withTemporaryDirectory { directory in
                let session = Self.session(
                    served, device: "phone", file: directory.appendingPathComponent("session.json"))
                try await session.signIn(identityToken: SessionHTTPTests.aliceIdentity, name: "phone")
                let client = Self.client(served, session, device: "phone")
                defer { client.close() }
                try await body(served, session, client, directory)
            }
        }
    }

    /// The phone's engine and app on `client`, syncing by hand unless `automatic` (on a test clock).
    static func phone(_ client: HTTPSyncClient, in directory: URL, automatic: Bool = false) throws -> TestDevice {
        try TestDevice(
            "phone", database: client.database(),
            directory: directory.appendingPathComponent("phone", isDirectory: true)
        ) { configuration in
            configuration.automaticallySync = automatic
            configuration.clock = TestClock()
        }
    }

    @Test(
        "a client refreshes its session by itself once the access token expires, once for requests racing, and keeps the new pair"
    )
    func refreshesByItself() async throws {
        try await Self.withSignedInPhone { served, session, phone, directory in
            let file = directory.appendingPathComponent("session.json")
            let first = try #require(try await session.currentTokens)
            _ = try await phone.database().modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])

            // The access token expires; eight requests at once each meet a 401, and one
            // refresh serves them all (a second would reuse the refresh token and end the
            // session).
            served.clock.advance(by: 900)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask { _ = try await phone.database().currentUserRecordID() }
                }
                try await group.waitForAll()
            }
            let kept = try #require(try await session.currentTokens)
            #expect(kept.accessToken != first.accessToken && kept.refreshToken != first.refreshToken)
            #expect(try served.sessions.sessions(of: SessionHTTPTests.alice).map(\.device) == ["phone"])

            // After a relaunch the session comes from the file, and works.
            let relaunched = Self.session(served, device: "phone", file: file)
            #expect(try await relaunched.currentTokens == kept)
            let again = Self.client(served, relaunched, device: "phone")
            defer { again.close() }
            #expect(try await again.database().fetchZones(FetchZonesRequest()).results.keys.contains(Self.notes))
        }
    }

    @Test(
        "F86 F104 a phone signed out by the laptop sees accountChange (signed out) through its engine, its stored session removed"
    )
    func signedOutElsewhere() async throws {
        try await Self.withSignedInPhone { served, session, phoneClient, directory in
            let file = directory.appendingPathComponent("session.json")
            let phone = try Self.phone(phoneClient, in: directory)
            try phone.createZone(Self.notes)
            try phone.write(Record.ID(recordName: "n", zoneID: Self.notes), "from the phone")
            try await phone.sync()
            let alice = try await phoneClient.database().currentUserRecordID()

            let laptop = try await served.client.signIn(
                identityToken: SessionHTTPTests.aliceIdentity, device: "laptop")
            try await served.client.revoke(device: "phone", accessToken: laptop.accessToken)

            // The phone's next sync: its access token is refused, so is its refresh token,
            // and the engine learns that nobody is signed in.
            phone.delegate.clearEvents()
            await #expect(throws: SyncError.self) { try await phone.sync() }
            let changes = phone.events.compactMap { event -> SyncEngine.Event.AccountChange? in
                if case .accountChange(let change) = event { change } else { nil }
            }
            #expect(changes.map(\.changeType) == [.signOut(previousUser: alice)])
            #expect(try await session.isSignedIn == false)
            #expect(!FileManager.default.fileExists(atPath: file.path))

            // Signed in again, the same device syncs: a sign-in, as CloudKit reports one.
            phone.delegate.clearEvents()
            try await session.signIn(identityToken: SessionHTTPTests.aliceIdentity)
            try await phone.sync()
            #expect(
                phone.events.contains { event in
                    if case .accountChange(let change) = event {
                        change.changeType == .signIn(currentUser: alice)
                    } else {
                        false
                    }
                })
        }
    }

    @Test(
        "F104 an automatic engine learns at once that its device was signed out elsewhere: its push channel's close asks the session again, and the engine fetches and finds nobody signed in"
    )
    func automaticEngineSignedOutByPush() async throws {
        try await Self.withSignedInPhone { served, session, phoneClient, directory in
            let phone = try Self.phone(phoneClient, in: directory, automatic: true)
            try await phone.waitForEvents("the phone's catch-up fetch") {
                $0.contains { $0.kind == .didFetchChanges }
            }
            await phoneClient.waitForPushChannels()

            let laptop = try await served.client.signIn(
                identityToken: SessionHTTPTests.aliceIdentity, device: "laptop")
            try await served.client.revoke(device: "phone", accessToken: laptop.accessToken)
            try await phone.waitForEvents("the phone's engine saw the sign-out") { events in
                events.contains { event in
                    if case .accountChange(let change) = event, case .signOut = change.changeType {
                        true
                    } else {
                        false
                    }
                }
            }
            #expect(try await session.isSignedIn == false)
        }
    }

    @Test(
        "a provider without a token: requests fail with notAuthenticated unsent; a provider that replaces a refused token gets the request sent again"
    )
    func providers() async throws {
        try await SessionHTTPTests().withSessionServer { served in
            let asked = Mutex<[Credentials.Request]>([])
            let signedOut = HTTPSyncClient(
                .init(
                    serverURL: served.url,
                    credentials: .provider(account: "nobody") { request in
                        asked.withLock { $0.append(request) }
                        return nil
                    }))
            let error = await #expect(throws: SyncError.self) { try await signedOut.database().currentUserRecordID() }
            #expect(error?.code == .notAuthenticated)
            #expect(asked.withLock { $0 } == [Credentials.Request()])

            // A provider whose first token is stale: the 401 makes it asked again, naming the
            // refused token, and the request goes through with the new one.
            let tokens = try await served.client.signIn(identityToken: SessionHTTPTests.aliceIdentity, device: "phone")
            let stale = "lsa_" + String(repeating: "A", count: 43)
            asked.withLock { $0 = [] }
            let client = HTTPSyncClient(
                .init(
                    serverURL: served.url,
                    credentials: .provider(account: "alice") { request in
                        asked.withLock { $0.append(request) }
                        return request.rejected == nil ? stale : tokens.accessToken
                    }, device: "phone"))
            _ = try await client.database().currentUserRecordID()
            #expect(asked.withLock { $0 } == [Credentials.Request(), Credentials.Request(rejected: stale)])
            _ = try await client.database().currentUserRecordID()
            #expect(asked.withLock { $0.count } == 2, "the accepted token is kept")
        }
    }
}
