import Logging
import SyncModel
import Tracing

/// What the engine's flows work with: the device log, the database, the delegate, the keys, the
/// asset cache and the logger, and the two settings a flow reads.
///
/// A flow (``SendFlow``, ``FetchFlow``, ``AssetUploads``, ``AssetDownloads``, ``ZoneKeyUpkeep``,
/// ``Redelivery``, ``AccountCheck``) is built from a context and keeps, as its stored properties,
/// only the parts it uses, so its dependencies are what it stores. None of them reaches the
/// ``SyncEngine``: the engine owns the lifetimes (its tasks, the scheduler, the operation queue)
/// and hands each sync to a flow. A test builds a context of its own, with an in-memory database
/// and a delegate gateway that records, and runs a flow with no engine and no server.
///
/// There is no clock here: no flow reads the time. The device log stamps its entries with its
/// own clock, and the scheduler, which waits, takes the configured one.
struct EngineContext: Sendable {
    /// The log every step of a sync is appended to, and the state is read from.
    let deviceLog: DeviceLog
    /// The server database the flows send to and fetch from.
    let database: any CloudDatabase
    /// How the flows deliver events and ask the app's delegate for batches and fetch options.
    let delegate: any DelegateGateway
    /// The device key and the zone keys of encrypted fields (F129).
    let keyring: ZoneKeyring
    /// Where fetched asset contents are kept.
    let assetCache: AssetCache
    let logger: Logger
    /// The first part of every request ID the engine makes (F103), drawn from the
    /// configuration's seed; the second part is the offset of the batch's entry. Each
    /// `batchPrepared` records the ID its batch is sent under, so a batch whose outcome is
    /// unknown is sent again under its ID after a relaunch too (`UnansweredBatch`).
    let requestIDPrefix: String
    /// The most changes to ask for per fetch request, or `nil` for the server's page size.
    let fetchResultsLimit: Int?
    /// Where the flows' spans go (``SyncTracing``): the configuration's tracer.
    var tracer: any Tracer = InstrumentationSystem.tracer
    /// The engine's metrics; none in a flow's own tests.
    var metrics: EngineMetrics = .none
}
