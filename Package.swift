// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "LogSync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LogStore", targets: ["LogStore"]),
        .library(name: "SyncModel", targets: ["SyncModel"]),
        .library(name: "LogSync", targets: ["LogSync"]),
        .library(name: "LogSyncServer", targets: ["LogSyncServer"]),
        .library(name: "LogSyncDiagnostics", targets: ["LogSyncDiagnostics"]),
        .library(name: "LogSyncTesting", targets: ["LogSyncTesting"]),
        .library(name: "LogSyncContract", targets: ["LogSyncContract"]),
        .library(name: "LogSyncWire", targets: ["LogSyncWire"]),
        .library(name: "LogSyncHTTP", targets: ["LogSyncHTTP"]),
        .library(name: "LogSyncHTTPServer", targets: ["LogSyncHTTPServer"]),
        .library(name: "LogSyncConsole", targets: ["LogSyncConsole"]),
        .library(name: "LogSyncPostgres", targets: ["LogSyncPostgres"]),
        .library(name: "LogSyncIdentity", targets: ["LogSyncIdentity"]),
        .library(name: "LogSyncSQLite", targets: ["LogSyncSQLite"]),
        .executable(name: "logsync-server", targets: ["logsync-server"]),
        .executable(name: "logtool", targets: ["logtool"]),
        .executable(name: "two-devices", targets: ["two-devices"]),
        .executable(name: "notes-device", targets: ["notes-device"]),
        .executable(name: "backend-indexer", targets: ["backend-indexer"]),
    ],
    traits: [
        // `swift build --traits OTLP`: logsync-server exports its traces over OTLP/HTTP with
        // swift-otel, configured by the standard OTEL_* environment variables
        // (Docs/Deployment.md, "Operating"). Off by default: swift-otel's build is heavy.
        .trait(name: "OTLP", description: "logsync-server exports traces over OTLP (swift-otel)")
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Metrics and traces as APIs only (the engine, the server core, the clients): nothing is
        // recorded until an app or the server bootstraps a backend. Hummingbird builds both anyway.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // The server's metrics as Prometheus text at /metrics (LogSyncHTTPServer only).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // OTLP export of traces, for logsync-server with the OTLP trait only.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
        // The network transport only (LogSyncHTTP, LogSyncHTTPServer, logsync-server): the
        // engine, the server core and their tests never build these.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // TLS (already built for AsyncHTTPClient and Hummingbird), SHA-256 for stored tokens and
        // asset contents.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // PostgreSQL's wire protocol, for LogSyncPostgres only.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // JSON Web Tokens (RS256, ES256, EdDSA signatures, JWKS), for LogSyncIdentity only: the
        // server core, the engine and the clients never build it (Tools/check-client-graph.sh).
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // SQLite through GRDB (Debian: libsqlite3-dev), for LogSyncSQLite only: tables that sync
        // themselves. About 20 s of a clean build; the engine and the server never build it.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // `swift package generate-documentation`: CI builds every DocC catalog and fails on a
        // warning (Tools/docs.sh). A command plugin: no target links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // LMDB from the system (Debian: liblmdb-dev).
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // CRC-32C with the CPU's checksum instruction (SSE4.2, arm64 CRC), for entry checksums.
        .target(name: "CCRC32C"),
        // The append-only log and its projections. Knows nothing of sync.
        // The platform layer: the C library (Glibc, Musl or Darwin) and the few calls whose
        // spelling differs between them (file status, allocator tuning, resource limits). The
        // one module with platform conditionals; everything else imports it for POSIX.
        .target(name: "LogSyncPlatform"),
        // `TypedRawValue`: one raw value with a type of its own (offsets, kinds, IDs), shared by
        // the log and the model, which must not depend on each other.
        .target(name: "TypedValues"),

        .target(name: "LogStore", dependencies: ["CLMDB", "CCRC32C", "LogSyncPlatform", "TypedValues"]),

        // Records, zones, IDs, values, SyncError, change tokens, requests and responses, and the
        // CloudDatabase protocol: what a device and a server say to each other. No storage: a
        // client that links the model and the network never builds LMDB
        // (Tools/check-client-graph.sh).
        .target(
            name: "SyncModel",
            dependencies: [
                // CRC-32C, the checksum that seals change tokens.
                "CCRC32C", "LogSyncPlatform", "TypedValues",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                // SHA-256 of asset contents, by which servers keep them.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Proto/README.md", "Proto/model.proto"]
        ),
        // LogStore for its seeded random generator only.
        .testTarget(name: "SyncModelTests", dependencies: ["SyncModel", "LogStore"]),
        // The model on logs, for the engine and the server: decoding a log entry's model message
        // with errors that name the entry, and log offsets as the positions change tokens carry.
        .target(
            name: "ModelEntries",
            dependencies: ["SyncModel", "LogStore", .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),

        // The engine: SyncEngine and its state, all on the device log.
        .target(
            name: "LogSync",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                "SyncModel", "LogStore", "ModelEntries", "LogSyncPlatform",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["DeviceLog/Proto/device_log.proto"]
        ),
        // SQLite tables that sync themselves, and a synced key-value store, on the engine
        // (Docs/SQLite.md).
        .target(
            name: "LogSyncSQLite",
            dependencies: [
                "LogSync", "SyncModel", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LogSyncSQLiteTests",
            dependencies: [
                "LogSyncSQLite", "LogSync", "SyncModel", "LogSyncServer", "LogSyncTesting", "SyncTestKit",
                "LogSyncDiagnostics",
                "TemporaryDirectory", .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "LogSyncTests",
            dependencies: [
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                "LogSync", "SyncModel", "LogStore", "LogSyncServer", "LogSyncDiagnostics", "LogSyncTesting",
                "SyncTestKit",
                "TemporaryDirectory",
            ]),

        // What a developer runs on a production log: entry descriptions for dumps, time travel
        // on device logs (state at an offset, rewind, replay, diff), replay against a server.
        .target(
            name: "LogSyncDiagnostics",
            dependencies: ["LogSync", "LogSyncServer", "SyncModel", "LogStore", "ModelEntries", "LogSyncPlatform"]),

        // Tools for the tests of apps and of the engine: a test clock, simulated accounts and
        // network, one test device with the policies a test chooses, and the seeded simulation.
        .target(
            name: "LogSyncTesting",
            dependencies: [
                "LogSync", "LogSyncDiagnostics", "SyncModel", "LogSyncServer", "LogStore",
                .product(name: "Logging", package: "swift-log"),
            ]),

        .testTarget(
            name: "LogSyncDiagnosticsTests",
            dependencies: [
                "LogSyncDiagnostics", "LogSync", "SyncModel", "LogStore", "LogSyncServer", "LogSyncTesting",
                "SyncTestKit",
                "TemporaryDirectory",
            ]),
        .testTarget(
            name: "LogSyncTestingTests",
            dependencies: [
                "LogSyncTesting", "LogSync", "SyncModel", "LogStore", "LogSyncServer", "SyncTestKit",
                "TemporaryDirectory",
            ]),
        // What the engine's test targets share: servers and devices of their own in a temporary
        // directory, a delegate whose every answer a test scripts, readers of event lists.
        .target(
            name: "SyncTestKit",
            dependencies: [
                "LogSync", "LogSyncServer", "LogSyncTesting", "SyncModel", "LogStore", "TemporaryDirectory",
            ],
            path: "Tests/SyncTestKit"
        ),

        // The server: each database a log, change tokens as offsets, CloudKit's server rules.
        .target(
            name: "LogSyncServer",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                "SyncModel", "LogStore", "ModelEntries", "LogSyncPlatform",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Proto/server_log.proto"]
        ),
        .testTarget(
            name: "LogSyncServerTests",
            dependencies: [
                "LogSyncServer", "SyncModel", "LogStore", "LogSyncTesting", "SyncTestKit",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]),
        // The CloudDatabase contract as checks anyone runs against their own database, with no
        // test framework: what an outside server must do for the engine to sync through it.
        .target(name: "LogSyncContract", dependencies: ["SyncModel"]),
        // The CloudDatabase contract, written once and run against every transport: in process
        // and over HTTP on loopback, on LMDB and on PostgreSQL; LogSyncContract's checks among it.
        .testTarget(
            name: "ContractTests",
            dependencies: [
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                "LogSyncContract", "LogSyncServer", "SyncModel", "LogSyncHTTP", "LogSyncHTTPServer", "LogSyncPostgres",
                "PostgresProcess", "LogSyncWire", "TemporaryDirectory", "LogSyncTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]),

        // The network. LogSyncWire is the body format (Protocol Buffers messages of every
        // request and response, JSON on request, versioning, errors ↔ HTTP statuses) and
        // depends on no HTTP library, so both ends and their unit tests share it cheaply.
        .target(
            name: "LogSyncWire",
            dependencies: ["SyncModel", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            exclude: ["Proto/wire.proto"]
        ),
        .testTarget(name: "LogSyncWireTests", dependencies: ["LogSyncWire", "SyncModel"]),
        // The client: CloudDatabase over HTTP (AsyncHTTPClient) with push over WebSocket. An app
        // links this and never a server.
        .target(
            name: "LogSyncHTTP",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                "LogSyncWire", "SyncModel", "LogSyncPlatform",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The server's HTTP face: routes on Hummingbird, bearer tokens, body limits, push.
        .target(
            name: "LogSyncHTTPServer",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                "LogSyncWire", "LogSyncServer", "SyncModel", "LogSyncPlatform",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "LogSyncHTTPTests",
            dependencies: [
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Metrics", package: "swift-metrics"),
                "LogSyncHTTP", "LogSyncHTTPServer", "LogSyncWire", "LogSyncServer", "LogSync", "LogSyncTesting",
                "SyncModel", "LogSyncContract",
                "LogStore", "logsync-server", "notes-device", "backend-indexer", "logtool", "ChildProcesses",
                "PostgresProcess", "TemporaryDirectory", "logsync-push-load",
                "SyncTestKit",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["Fixtures"]  // TLS certificates, read by path
        ),

        // The operations console: read-only HTML pages of the server's state behind the admin
        // credential (users, databases, records and their history, the server log's timeline),
        // and the last hour of metrics for its charts. Added to HTTPSyncServer's routes by
        // logsync-server; no JavaScript build step.
        .target(
            name: "LogSyncConsole",
            dependencies: [
                "LogSyncHTTPServer", "LogSyncServer", "LogSyncDiagnostics", "LogSyncWire", "SyncModel", "LogStore",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LogSyncConsoleTests",
            dependencies: [
                "LogSyncConsole", "LogSyncHTTPServer", "LogSyncHTTP", "LogSyncServer", "LogSyncWire", "SyncModel",
                "LogStore", "LogSync", "LogSyncTesting", "LogSyncDiagnostics", "BrowserTestSupport", "ChildProcesses",
                "TemporaryDirectory", "logsync-server",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // What the browser tests share: Chromium found and run headless, and its screenshots read.
        .target(name: "BrowserTestSupport", dependencies: ["ChildProcesses"], path: "Tests/BrowserTestSupport"),

        // The server's PostgreSQL store, for several server nodes on one database: each log an
        // entries table keyed by (log, offset), its index as rows updated in the same
        // transaction; a blocking connection pool (sessions, transactions retried on
        // serialization failures), schema migrations, and push notices between nodes by
        // LISTEN/NOTIFY on a connection that survives restarts.
        .target(
            name: "LogSyncPostgres",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                "SyncModel", "LogStore", "LogSyncServer",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "LogSyncPostgresTests",
            dependencies: [
                "LogSyncPostgres", "PostgresProcess", "SyncModel", "LogSyncServer", "LogStore", "LogSync",
                "LogSyncTesting", "SyncTestKit", .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Identity tokens from the app's identity providers: JWTs checked against each trusted
        // issuer's keys (a JWKS file, a JWKS URL, or OpenID Connect discovery), fetched and cached,
        // behind LogSyncServer's IdentityVerifier. The one module that links jwt-kit.
        .target(
            name: "LogSyncIdentity",
            dependencies: [
                "LogSyncServer",
                .product(name: "JWTKit", package: "jwt-kit"),
                // Keys of the development issuer (RSA from CryptoExtras).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "LogSyncIdentityTests",
            dependencies: [
                "LogSyncIdentity", "LogSyncServer", "SyncModel", "TemporaryDirectory", "ChildProcesses",
                "logsync-server",
                // Sign-in over HTTP against a logsync-server process, then a sync as the session.
                "LogSyncHTTP", "LogSyncWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `logsync-server migrate`: an LMDB store copied into PostgreSQL serves the same devices on.
        .testTarget(
            name: "StoreMigrationTests",
            dependencies: [
                "LogSyncServer", "LogSyncPostgres", "PostgresProcess", "SyncModel", "LogStore", "ChildProcesses",
                "logsync-server", "LogSyncHTTPServer", "LogSyncTesting",
            ]
        ),
        // Several logsync-server processes on one PostgreSQL database, end to end: records,
        // conflicts and pushes across nodes, a node killed mid-stream, PostgreSQL restarted.
        .testTarget(
            name: "MultiNodeTests",
            dependencies: [
                "LogSync", "LogSyncHTTP", "LogSyncServer", "LogSyncTesting", "SyncModel", "LogSyncPostgres",
                "PostgresProcess", "ChildProcesses", "logsync-server", "TemporaryDirectory",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A directory of its own for each test, removed when the test ends.
        .target(name: "TemporaryDirectory", path: "Tests/TemporaryDirectory"),
        // LogStore on its own: a key–value history and its latest-value projection, which
        // `logtool demo` writes and the LogStore tests, crash child and benchmark use.
        .target(name: "KeyValueLog", dependencies: ["LogStore"], path: "Sources/Examples/KeyValueLog"),
        .testTarget(
            name: "LogStoreTests",
            dependencies: ["LogStore", "KeyValueLog", "logstore-crasher", "ChildProcesses", "TemporaryDirectory"]
        ),

        // Tools.
        // Child processes for the tests and tools that start executables (posix_spawn, never
        // Foundation's Process, which crashes when tests launch processes at the same time).
        .target(name: "ChildProcesses", path: "Tools/ChildProcesses"),
        // A throwaway PostgreSQL server: initdb in a temporary directory, a free loopback port,
        // restarts for fault tests. The PostgreSQL tests and logsync-store-bench start theirs
        // with it, so it lives with the tools: a tool never depends on test code.
        .target(name: "PostgresProcess", dependencies: ["ChildProcesses"], path: "Tools/PostgresProcess"),
        // logtool's terminal plumbing: standard output, progress lines, its own errors.
        .target(
            name: "LogToolCore", dependencies: ["LogStore", "LogSyncDiagnostics", "LogSyncPlatform"],
            path: "Tools/LogToolCore"),
        .testTarget(
            name: "LogToolTests",
            dependencies: [
                "LogToolCore", "LogSyncDiagnostics", "LogStore", "KeyValueLog", "logtool", "LogSyncServer", "LogSync",
                "LogSyncTesting", "ChildProcesses", "TemporaryDirectory", "two-devices", "BrowserTestSupport",
                "SyncTestKit",
                // `logsync-server export-log`, whose extract logtool reads beside a device's bundle.
                "logsync-server",
            ]
        ),
        .executableTarget(
            name: "logtool",
            dependencies: [
                "LogStore", "LogSync", "LogSyncServer", "LogSyncDiagnostics", "LogToolCore", "KeyValueLog",
                "ModelEntries",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/logtool"
        ),
        .executableTarget(
            name: "logsync-server",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLP"])),
                .product(
                    name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["OTLP"])),
                "LogSyncHTTPServer", "LogSyncServer", "LogSyncPostgres", "LogSyncIdentity", "LogStore", "SyncModel",
                "LogSyncConsole", "LogSyncHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // dev-issuer: signing keys and tokens, and its JWKS served on loopback.
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            path: "Tools/logsync-server"
        ),
        .executableTarget(
            name: "logstore-crasher",
            dependencies: ["LogStore", "KeyValueLog"],
            path: "Tools/logstore-crasher"
        ),
        // The fuzz target of every reader of untrusted bytes: built with libFuzzer and the address
        // sanitizer by Tools/fuzz.sh (-D FUZZING); built plainly, it reruns inputs from files.
        .executableTarget(
            name: "fuzz-decoders",
            dependencies: ["LogStore", "LogSync", "LogSyncServer", "LogSyncWire", "SyncModel"],
            path: "Tools/fuzz-decoders"
        ),
        // What the benchmarks share: the command line's common options and the run around the
        // measurements, memory figures, tables, scratch space, the sync benchmarks' records, and
        // measurements in a child process.
        .target(
            name: "BenchSupport",
            dependencies: [
                "SyncModel", "LogStore", "LogSyncPlatform",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/BenchSupport"
        ),
        .executableTarget(
            name: "logstore-bench",
            dependencies: [
                "LogStore", "KeyValueLog", "CLMDB", "BenchSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/logstore-bench"
        ),
        .executableTarget(
            name: "logsync-server-bench",
            dependencies: [
                "LogSyncServer", "LogSyncWire", "SyncModel", "LogStore", "BenchSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/logsync-server-bench"
        ),
        .executableTarget(
            name: "logsync-http-bench",
            dependencies: [
                "LogSync", "LogSyncHTTP", "LogSyncHTTPServer", "LogSyncServer", "LogStore", "LogSyncWire", "SyncModel",
                "BenchSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/logsync-http-bench"
        ),
        // Many devices' push channels from a process of its own against running logsync-server
        // processes: push and commit latency, errors, the servers' memory per connection.
        .executableTarget(
            name: "logsync-push-load",
            dependencies: [
                "LogSyncHTTP", "LogSyncWire", "SyncModel", "BenchSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/logsync-push-load"
        ),
        // One large asset over loopback HTTP against a file copy, with both processes' peak
        // memory.
        .executableTarget(
            name: "logsync-asset-bench",
            dependencies: [
                "LogSyncHTTP", "LogSyncHTTPServer", "LogSyncServer", "SyncModel", "BenchSupport", "LogSyncPlatform",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/logsync-asset-bench"
        ),
        // First verifications of identity tokens per second on one core, for RS256, ES256 and
        // EdDSA.
        .executableTarget(
            name: "logsync-identity-bench",
            dependencies: [
                "LogSyncIdentity", "LogSyncServer",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/logsync-identity-bench"
        ),
        // The PostgreSQL store against LMDB, and one node against two; starts its own
        // PostgreSQL with PostgresProcess, as the tests do.
        .executableTarget(
            name: "logsync-store-bench",
            dependencies: [
                "LogSyncServer", "LogSyncPostgres", "LogSyncHTTP", "LogSyncHTTPServer", "SyncModel", "LogStore",
                "BenchSupport",
                "PostgresProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/logsync-store-bench"
        ),
        .executableTarget(
            name: "logsync-engine-bench",
            dependencies: [
                "LogSync", "LogSyncServer", "SyncModel", "LogStore", "LogSyncWire", "BenchSupport", "LogSyncPlatform",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The cost of instrumentation: metrics into a Prometheus registry, spans in memory.
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            path: "Tools/logsync-engine-bench"
        ),
        // A synced SQLite store (LogSyncSQLite) against GRDB alone and against a plain engine:
        // the initial sync, the send of local edits, the initial sync's memory.
        .executableTarget(
            name: "logsync-sqlite-bench",
            dependencies: [
                "LogSyncSQLite", "LogSync", "LogSyncServer", "SyncModel", "LogStore", "BenchSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/logsync-sqlite-bench"
        ),

        // The soak of the seeded simulation: many seeds of one configuration in worker processes
        // on every core, each failing seed named with the line that reruns it (Docs/Testing.md).
        // A test harness on the test kit, so it lives with the tests and is no product.
        .executableTarget(
            name: "logsync-soak",
            dependencies: ["LogSyncTesting", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tests/logsync-soak"
        ),

        // Examples.
        .executableTarget(
            name: "two-devices",
            dependencies: ["LogSync", "LogSyncServer", "SyncModel", "LogSyncDiagnostics"],
            path: "Sources/Examples/TwoDevices"
        ),
        // One device of a notes app as its own process, syncing through a logsync-server.
        .executableTarget(
            name: "notes-device",
            dependencies: [
                "LogSync", "LogSyncHTTP", "LogSyncSQLite", "SyncModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/Examples/NotesDevice"
        ),
        // An app's backend indexing every user's records through the admin change stream, with
        // an admin token, resuming from the tokens it saved after its index.
        .executableTarget(
            name: "backend-indexer",
            dependencies: [
                "LogSyncHTTP", "SyncModel", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/Examples/BackendIndexer"
        ),
    ],
    swiftLanguageModes: [.v6]
)
