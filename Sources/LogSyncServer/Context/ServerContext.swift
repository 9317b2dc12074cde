import Foundation
import SyncModel
import Synchronization
import Tracing

/// What the rules of a database need beyond the database's own log: built once by
/// ``SyncServer`` and handed to every database it opens (`ServerDatabase`), from which each rule
/// (`RecordModification`, `ChangeFeed`, `ShareRules`, `SharePropagation`, `ZoneKeyRules`,
/// `ServerAssets`…) takes the parts it uses.
///
/// Nothing in it points back at the server: a database reaches other users' databases through
/// ``databases``, a small interface, and the server owns the lifetimes (it shuts the storage
/// down and ends the push streams).
final class ServerContext: Sendable {
    /// Where logs and asset contents are kept, with the storage-wide locks and the push notices
    /// between the nodes that share it.
    let storage: any ServerStorage
    /// The registered users: their numbers, e-mail addresses and record names.
    let users: UserRegistry
    /// Every user's databases, as sharing (acceptance, propagation to participants' shared
    /// databases, a participant's requests decided in the owner's database), change feeds and
    /// zone keys reach the databases of other users.
    let databases: any DatabaseDirectory
    /// How much one fetch returns, and each user's quota (F141, F153).
    let limits: ServerLimits
    /// The production schema, or none in development mode (F137).
    let schema: DeployedSchema
    /// The server's clock, for creation and modification dates.
    let now: @Sendable () -> Date
    /// The push streams of the devices connected to this node.
    let pushHub: PushHub
    /// What runs before each request: failures injected by ``ServerAdmin`` or the test kit;
    /// none in production.
    let requestHooks: RequestHooks
    /// The asset uploads under way in this process.
    let uploads: ActiveUploads
    /// Where commits and log writes are traced (``SyncServer/Configuration/tracer``).
    let tracer: any Tracer
    /// The server's metrics.
    let metrics: ServerMetricHandles

    init(
        storage: any ServerStorage, users: UserRegistry, databases: any DatabaseDirectory, limits: ServerLimits,
        schema: DeployedSchema, now: @escaping @Sendable () -> Date, pushHub: PushHub,
        tracer: any Tracer, metrics: ServerMetricHandles
    ) {
        self.metrics = metrics
        self.storage = storage
        self.users = users
        self.databases = databases
        self.limits = limits
        self.schema = schema
        self.now = now
        self.pushHub = pushHub
        self.tracer = tracer
        requestHooks = RequestHooks()
        uploads = ActiveUploads()
    }

    /// Where asset contents are kept.
    var assets: any ServerAssetStore { storage.assets }

    /// The database of `user` and `scope`, opened on first use.
    func database(_ user: UserID, _ scope: DatabaseScope) throws -> ServerDatabase {
        ServerDatabase(try databases.open(user, scope), context: self)
    }
}

/// The limits a server sets beyond the protocol's own (`Limits`): how much one fetch returns
/// (F141), and each user's storage quota (F153).
final class ServerLimits: Sendable {
    /// The most changes one fetch returns, whatever the client asks for.
    let maxChangesPerPage: Int
    /// About the most record bytes one fetch returns, counted as the records are stored.
    let maxBytesPerPage: Int
    private let quotas = Mutex<[UserID: Int]>([:])

    init(maxChangesPerPage: Int, maxBytesPerPage: Int) {
        self.maxChangesPerPage = maxChangesPerPage
        self.maxBytesPerPage = maxBytesPerPage
    }

    /// `user`'s quota in bytes of record data, or `nil` for none.
    func quota(of user: UserID) -> Int? { quotas.withLock { $0[user] } }

    /// Sets `user`'s quota (`nil`: unlimited).
    func setQuota(_ bytes: Int?, for user: UserID) { quotas.withLock { $0[user] = bytes } }
}

/// The production schema a server enforces (F137): read from the registry when the server
/// starts and replaced by each deployment through it; `nil` in development mode.
final class DeployedSchema: Sendable {
    private let current: Mutex<RecordSchema?>

    init(_ schema: RecordSchema?) {
        current = Mutex(schema)
    }

    /// The schema enforced, or `nil` in development mode.
    var schema: RecordSchema? { current.withLock { $0 } }

    /// Deploys `schema` through `users`' registry log and enforces the result from now on (see
    /// ``SyncServer/deploySchema(_:)``).
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an empty schema while none is deployed, or one
    ///   giving a deployed field another kind; nothing is written.
    func deploy(_ schema: RecordSchema, in users: UserRegistry) throws -> SchemaDeployment {
        if schema.isEmpty, self.schema == nil {
            throw SyncError(
                .invalidArguments,
                "the schema to deploy has no record type; a production server would refuse every record")
        }
        let (deployed, offset, appended) = try users.deploy(schema)
        current.withLock { $0 = deployed }
        return SchemaDeployment(schema: deployed, offset: offset.rawValue, appended: appended)
    }
}
