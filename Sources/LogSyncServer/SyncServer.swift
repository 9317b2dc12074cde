import Foundation
import LogStore
import Metrics
import SyncModel
import Synchronization
import Tracing

/// A LogSync server: users' databases as logs, change tokens as offsets, CloudKit's rules.
///
/// ```swift
/// let server = try SyncServer(.init(directory: dataDirectory))
/// let database = server.database(for: "alice", device: "phone")   // any CloudDatabase
/// _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
/// ```
///
/// Each user's databases live in an LMDB environment of their own under
/// `directory/users/u<number>` (numbers from the registry in `directory/registry`), so one user's requests can never read or write another's data. Within
/// it, each database (private, shared) is a log whose offsets are its change tokens; the
/// indexes the server answers from are a projection of that log (Docs/Protocol.md, Server data
/// layout).
public final class SyncServer: Sendable {
    /// How a server stores its data and tells time.
    public struct Configuration: Sendable {
        /// The directory holding every user's databases.
        public var directory: URL
        /// `.durable` commits each request to disk before answering; `.fast` is for tests.
        public var durability: Durability
        /// The server's clock, for creation and modification dates.
        public var now: @Sendable () -> Date
        /// The most changes one fetch returns, whatever the client asks for (F141).
        public var maxChangesPerPage: Int
        /// About the most record bytes one fetch returns, counted as the records are stored
        /// (encoded); at least one record is always returned.
        public var maxBytesPerPage: Int
        /// Where each modification is traced: a `server.commit` span per request that writes
        /// (`modifyRecords`, `modifyZones`, `modifySubscriptions`), and a `server.store.append`
        /// span per write to a log below it, tagged with the user (`logsync.user`), the database
        /// (`logsync.database`), the request ID (`logsync.request_id`) and the offsets written
        /// (`logsync.server_log.offset`, the first; `logsync.server_log.end_offset`, the last).
        /// They are children of the caller's current span: over HTTP, the request's
        /// (`HTTPSyncServer`). The tracer bootstrapped in `InstrumentationSystem` by default: with
        /// none, nothing is recorded.
        public var tracer: any Tracer
        /// What makes the server's metrics (Docs/Deployment.md, "Operating"): the global factory
        /// by default, which does nothing until an executable bootstraps a backend.
        public var metricsFactory: any MetricsFactory
        /// The largest support bundle (its `data.mdb`) a user may upload, in bytes; 64 MiB by
        /// default (Docs/Deployment.md, "Support bundles").
        public var maxSupportBundleBytes: Int64 = 64 << 20
        /// How long an uploaded support bundle is kept, from its upload: 30 days by default.
        /// ``SyncServer/removeExpiredSupportBundles(now:)`` removes the older ones.
        public var supportBundleRetention: TimeInterval = 30 * 86_400
        /// What sharing's lock covers: one participant (the default), or the whole storage, as
        /// in earlier versions; `logsync-store-bench` measures the one against the other.
        package var sharingLock: SharingLockScope = .perParticipant

        public init(
            directory: URL, durability: Durability = .durable, now: @escaping @Sendable () -> Date = { Date() },
            maxChangesPerPage: Int = 400, maxBytesPerPage: Int = 4_000_000,
            tracer: any Tracer = InstrumentationSystem.tracer,
            metricsFactory: any MetricsFactory = MetricsSystem.factory
        ) {
            self.directory = directory
            self.durability = durability
            self.now = now
            self.maxChangesPerPage = maxChangesPerPage
            self.maxBytesPerPage = maxBytesPerPage
            self.tracer = tracer
            self.metricsFactory = metricsFactory
        }
    }

    public let configuration: Configuration
    /// Where the logs are kept: `configuration.directory` in LMDB unless another storage was given.
    public let storage: any ServerStorage
    /// What every database's rules need beyond the database's own log.
    let context: ServerContext
    /// The databases open in this process; forgetting them is what a restart does.
    let databases: OpenDatabases
    /// The support bundle uploads under way in this process (``SupportBundleUpload``).
    let bundleUploads = Mutex<Set<SupportBundleUpload.Key>>([])

    /// Opens (creating it if needed) the server's data directory, its logs in LMDB.
    ///
    /// - Throws: `LogStoreError` if the directory cannot be created.
    public convenience init(_ configuration: Configuration) throws {
        try self.init(
            configuration,
            storage: LMDBStorage(directory: configuration.directory, durability: configuration.durability))
    }

    /// A server whose logs are kept in `storage` (several servers may share a PostgreSQL store);
    /// `configuration.directory` is then unused.
    public init(_ configuration: Configuration, storage: any ServerStorage) throws {
        self.configuration = configuration
        self.storage = storage
        let users = try UserRegistry(storage: storage)
        databases = OpenDatabases(storage: storage, users: users, sharingLock: configuration.sharingLock)
        let metrics = ServerMetricHandles(factory: configuration.metricsFactory, store: storage.metricsStoreName)
        context = ServerContext(
            storage: storage, users: users, databases: databases,
            limits: ServerLimits(
                maxChangesPerPage: configuration.maxChangesPerPage, maxBytesPerPage: configuration.maxBytesPerPage),
            schema: DeployedSchema(try users.deployedSchema()?.schema), now: configuration.now,
            pushHub: PushHub(delivered: { sent in metrics.pushFanout.record(max(0, Date().timeIntervalSince(sent))) }),
            tracer: configuration.tracer, metrics: metrics)
        let hub = context.pushHub
        storage.startNotifications(
            { notice in
                hub.publish(
                    notice.hint, to: notice.key, from: notice.originDevice, devices: notice.devices ?? true,
                    sentAt: notice.sentAt)
            },
            missed: { hub.publishToEveryone() })
    }

    /// A device's view of `user`'s database of `scope`: what an embedded app and the tests use.
    public func database(
        for user: UserID, scope: DatabaseScope = .private, device: DeviceID? = nil
    ) -> InProcessDatabase {
        InProcessDatabase(server: self, user: user, scope: scope, device: device)
    }

    /// The record ID that stands for `user` (what `currentUserRecordID()` returns), registering
    /// the user on first use.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a user ID that breaks the rules of
    ///   `Identifier.userID` (empty, over 511 bytes, a control character…).
    public func userRecordID(for user: UserID) throws -> Record.ID {
        UserRegistry.recordID(ofNumber: try users.number(of: user))
    }

    /// Reads the end of the registry's log through the storage (a query on PostgreSQL), so that a
    /// store that cannot be reached throws: the store check of `/health/ready`.
    ///
    /// - Throws: The storage's error.
    public func checkStore() throws {
        _ = try users.log.lastOffset
    }

    /// Gives `user` (registered if new) an e-mail address, by which owners invite them to shares.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid user ID or address, or an address
    ///   another user has; nothing is written then.
    public func registerUser(_ user: UserID, emailAddress: String? = nil) throws {
        if let emailAddress {
            // Refused before the user is registered, so that a refusal writes nothing.
            try UserIdentity.validate(emailAddress: emailAddress)
            if let holder = try users.number(ofEmail: emailAddress), try users.user(number: holder) != user {
                throw SyncError(
                    .invalidArguments, "the e-mail address \"\(emailAddress)\" already belongs to another user")
            }
        }
        _ = try users.number(of: user)
        if let emailAddress { try users.setEmail(emailAddress, of: user) }
    }

    /// The identity of the user with this e-mail address (compared without case), or `nil`.
    public func userIdentity(forEmailAddress email: String) throws -> UserIdentity? {
        guard let number = try users.number(ofEmail: email) else { return nil }
        return UserIdentity(userRecordName: "_user\(number)", emailAddress: try users.email(ofNumber: number))
    }

    /// The identity of the user with this user record name (`_user<N>`), or `nil`.
    public func userIdentity(forUserRecordName name: String) throws -> UserIdentity? {
        guard let (_, number) = try users.owner(named: name) else { return nil }
        return UserIdentity(userRecordName: name, emailAddress: try users.email(ofNumber: number))
    }

    /// Test and operations hooks: injected failures, quotas, purges, tombstone compaction.
    public var admin: ServerAdmin { ServerAdmin(server: self) }

    /// Ends every push stream and stops the storage's notifications. Committed data is already
    /// stored.
    public func shutdown() {
        storage.shutdown()
        context.pushHub.finishAll()
    }

    // MARK: Internals

    /// The registered users.
    var users: UserRegistry { context.users }

    /// The push streams of the devices connected to this node.
    var pushHub: PushHub { context.pushHub }

    /// The production schema this server enforces, if one is deployed (F137).
    var deployed: DeployedSchema { context.schema }

    /// The asset rules (F134).
    var assets: ServerAssets { ServerAssets(context: context) }

    /// The open database of `user` and `scope`, opened on first use.
    func store(_ user: UserID, _ scope: DatabaseScope) throws -> ServerDatabase {
        try context.database(user, scope)
    }
}
