import Foundation
import LogStore
import Logging
import Metrics
import SyncModel
import Tracing

extension SyncEngine {
    /// How to build a ``SyncEngine``: the database to sync with, where its device log lives, and
    /// the delegate (F1–F6).
    ///
    /// Mirrors `CKSyncEngine.Configuration`, with one difference: there is no
    /// `stateSerialization`. The engine keeps its state in its device log, so the app passes the
    /// log's directory (or an open ``DeviceLog``) instead of a serialized state; the same
    /// directory next launch continues where the engine stopped (F3, F28).
    ///
    /// ```swift
    /// var configuration = SyncEngine.Configuration(
    ///     database: server.database(for: "alice", scope: .private, device: "phone"),
    ///     logDirectory: appSupport.appending(path: "sync"),
    ///     delegate: notes)
    /// configuration.automaticallySync = false
    /// let engine = try SyncEngine(configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The database to sync with: the user's private or shared database (F2).
        public var database: any CloudDatabase
        /// Where the device log is: a directory (opened with durable commits), or an open log.
        public var storage: Storage
        /// The delegate, held weakly (F4): keep it alive for as long as the engine runs.
        public weak var delegate: (any SyncEngineDelegate)?
        /// Whether the engine syncs on its own (F5); `true` by default: changes are sent after a
        /// short debounce, push hints and start-up trigger fetches, transient failures are
        /// retried. With `false` nothing reaches the server until `sendChanges()` or
        /// `fetchChanges()` is called — the mode for deterministic tests.
        public var automaticallySync: Bool = true
        /// The database subscription to use for push hints, or `nil` to let the engine find or
        /// create its own (F6, F111).
        public var subscriptionID: Subscription.ID?
        /// The clock the scheduler waits on (a `TestClock` from LogSyncTesting in tests).
        public var clock: any Clock<Duration> = ContinuousClock()
        /// Whether the network and power allow automatic syncs, and when that (or the account)
        /// changes (F81).
        public var conditions: any SyncConditionsProvider = AlwaysAvailableConditions()
        /// The scheduler's debounce and backoff.
        public var schedulePolicy = SchedulePolicy()
        /// The seed of the retry jitter and of the engine's request-ID prefix; the same seed gives
        /// the same waits and IDs. Random by default; give each device of a simulation its own.
        public var randomSeed: UInt64 = UInt64.random(in: .min ... .max)
        /// Where the engine reports what it does (each send and fetch, at `debug`).
        public var logger: Logger = Logger(label: "LogSync.SyncEngine")
        /// The most changes to ask for per fetch request, or `nil` for the server's page size.
        /// Smaller pages mean more, smaller `fetched…Changes` events.
        public var fetchResultsLimit: Int?
        /// Where the engine keeps the contents of fetched assets, one file per content named by
        /// its digest's hex digits (`<directory>/<64 hex digits>`), shared by every record that
        /// references it; `nil` (the default) for the `Assets` directory inside the device log's
        /// directory. Files there are read-only; the app may delete any of them (or the whole
        /// directory) to free space: a later fetch or ``SyncEngine/fetchAssetContents(_:in:)``
        /// downloads the content again.
        public var assetCacheDirectory: URL?
        /// The file holding this device's private key for encrypted fields (F129), made the first
        /// time a record with `Record/encryptedValues` is sent or fetched; `nil` (the default)
        /// for `DeviceKey` inside the device log's directory. Losing it loses nothing on the
        /// server: the device registers a new key, and another device of the zone wraps the
        /// zone's keys for it (`Docs/Encryption.md`).
        public var deviceKeyFile: URL?
        /// Whether the engine runs in a shipping app (``Environment/production``) or in
        /// development and tests (``Environment/development``, the default) (F118). A production
        /// engine is refused while another production engine of this process syncs the same
        /// database (server, signed-in user and scope) or uses the same device log directory,
        /// or while another process's production engine uses that directory:
        /// ``DuplicateEngineError``. Development engines are never refused, so that one process
        /// can simulate several devices of one user.
        public var environment: Environment = .development
        /// Where the engine's spans go: a `sync.send` or `sync.fetch` span per sync, and one per
        /// request below it (`sync.send.batch`, `sync.send.zones`, `sync.fetch.page`), tagged
        /// with the device-log offsets of the entries they wrote (`logsync.device_log.offset`)
        /// and the request ID (`logsync.request_id`). A database over the network carries the
        /// request's span to the server (`HTTPSyncClient`: W3C `traceparent`), and the entry of
        /// each request records its trace context, which `logtool dump` shows as `trace <id>`
        /// (Docs/Engine.md, "Traces"). The tracer bootstrapped in `InstrumentationSystem` by
        /// default: with none, a no-op tracer that records nothing.
        public var tracer: any Tracer = InstrumentationSystem.tracer
        /// What makes the engine's metrics (sync durations, pending changes, retries, conflicts;
        /// Docs/Deployment.md, "Operating"): swift-metrics' global factory by default, which
        /// records nothing and costs nothing until the app bootstraps a backend.
        public var metricsFactory: any MetricsFactory = MetricsSystem.factory

        /// Where a device log is.
        public enum Storage: Sendable {
            /// The log in this directory, created if missing, with durable commits.
            case directory(URL)
            /// A log already open.
            case deviceLog(DeviceLog)
        }

        /// A configuration whose device log is in `logDirectory` (created if missing).
        ///
        /// - Parameters:
        ///   - database: The database to sync with (private or shared scope).
        ///   - logDirectory: The device log's directory; one per engine.
        ///   - delegate: The delegate, held weakly.
        public init(database: any CloudDatabase, logDirectory: URL, delegate: any SyncEngineDelegate) {
            self.database = database
            self.storage = .directory(logDirectory)
            self.delegate = delegate
        }

        /// A configuration on an open device log (for example one opened with `.fast` commits
        /// in tests).
        ///
        /// - Parameters:
        ///   - database: The database to sync with (private or shared scope).
        ///   - deviceLog: The device log; one per engine.
        ///   - delegate: The delegate, held weakly.
        public init(database: any CloudDatabase, deviceLog: DeviceLog, delegate: any SyncEngineDelegate) {
            self.database = database
            self.storage = .deviceLog(deviceLog)
            self.delegate = delegate
        }
    }

    /// A `sendChanges` or `fetchChanges` call made from inside the engine's own delegate
    /// callbacks (F11), which would otherwise wait for itself forever. (`cancelOperations()`
    /// waits for nothing and may be called from anywhere.)
    ///
    /// Move the call out of the callback, for example into a `Task.detached` that the callback
    /// starts. (A plain `Task { }` inherits the callback's context and is refused too.)
    public struct ReentrantCallError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The call that was refused, such as `sendChanges`.
        public let operation: String

        /// Why the call was refused.
        public var description: String {
            "\(operation)() was called from inside a SyncEngineDelegate callback of the same engine; it would wait for its own event delivery"
        }
    }

    /// The timings of automatic sync (Docs/Engine.md, Automatic sync).
    public struct SchedulePolicy: Sendable, Hashable {
        /// How long a send waits after the first change, so that changes made together go
        /// together; 1 s by default.
        public var debounce: Duration
        /// The wait after a first transient failure without a retry-after; 2 s by default.
        public var initialBackoff: Duration
        /// The longest wait between retries; 15 minutes by default.
        public var maximumBackoff: Duration
        /// The share of a backoff added or removed at random, in 0..<1; 0.2 by default.
        public var jitter: Double

        /// A policy.
        public init(
            debounce: Duration = .seconds(1), initialBackoff: Duration = .seconds(2),
            maximumBackoff: Duration = .seconds(15 * 60), jitter: Double = 0.2
        ) {
            self.debounce = debounce
            self.initialBackoff = initialBackoff
            self.maximumBackoff = maximumBackoff
            self.jitter = min(max(jitter, 0), 0.99)
        }
    }

    /// Whether an engine serves a shipping app or development and tests (F118).
    ///
    /// CloudKit's containers have a development and a production environment too; an app built
    /// for development talks to the development one until it is configured for production. Here
    /// the environment decides only whether an engine may share its database with another engine.
    public enum Environment: String, Sendable, Hashable, CustomStringConvertible {
        /// Development and tests: any number of engines may sync one database, each with its own
        /// device log, to simulate several devices. The default.
        case development
        /// A shipping app: one engine per database (F118) and per device log.
        case production

        /// The case name.
        public var description: String { rawValue }
    }

    /// A production engine was refused because another one is syncing the same database or
    /// using the same device log (F118): two engines of one device on one database would each
    /// fetch every change and race each other's sends.
    ///
    /// Keep one engine per database (a private-database engine and a shared-database engine are
    /// two databases), or use ``Environment/development`` where several engines on one database
    /// simulate several devices.
    public struct DuplicateEngineError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What the two engines share: the database (its scope and who it belongs to), or the
        /// device log directory.
        public let conflict: String
        /// The other engine, as its description reads (``SyncEngine/description``).
        public let otherEngine: String

        /// Why the engine was refused.
        public var description: String {
            "a production SyncEngine already uses \(conflict) (\(otherEngine)); run one engine per database and device log (F118)"
        }
    }

    /// The configuration names a public database, which the engine does not sync (F2).
    public struct UnsupportedDatabaseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The database's scope.
        public let scope: DatabaseScope

        /// Why the engine refused the database.
        public var description: String {
            "a SyncEngine syncs a private or shared database, not the \(scope) database"
        }
    }
}
