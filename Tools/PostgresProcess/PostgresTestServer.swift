import ChildProcesses
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL server for tests and benchmarks: `initdb` into a temporary directory,
/// started on a free loopback port with durability off (tests never survive a power cut),
/// stopped when the process exits.
///
/// Most tests share one server (``shared()``) and take a fresh database each
/// (``createDatabase()``); fault tests that restart or stop PostgreSQL start their own with
/// ``init(directory:)`` so they do not break their neighbours. PostgreSQL refuses to run as
/// root, so as root every command runs as an unprivileged user (`postgres` when it exists,
/// else `nobody`) who owns the directory. A machine without PostgreSQL fails the test with a
/// message saying what to install: the tests never skip.
package final class PostgresTestServer: Sendable {
    /// The loopback port the server listens on; the same across restarts.
    package let port: Int
    /// Whether the server syncs its writes to disk (`fsync`, synchronous commits): off for
    /// tests, on for benchmarks that compare it with a durable LMDB store.
    package let durable: Bool
    /// The data directory, which also holds the server's socket and its log (`log`).
    package let directory: URL
    /// The directory holding `initdb`, `pg_ctl` and `createdb`.
    let binaries: URL
    /// The user commands run as (`runuser -u`), when this process is root.
    let runAs: String?
    /// Settings beyond the defaults, each `name=value`, given to the server as `-c` options
    /// (which win over `ALTER SYSTEM`).
    package let settings: [String]
    private let counter = Mutex(0)

    private static let sharedServers = Mutex<[Task<PostgresTestServer, any Error>]>([])

    /// The server the whole test process shares, started on first use.
    package static func shared() async throws -> PostgresTestServer {
        try await shared(number: 0)
    }

    /// Another server the whole test process shares, started on first use: the `number`th
    /// (0 is ``shared()``), for tests of several clusters.
    package static func shared(number: Int) async throws -> PostgresTestServer {
        let task = sharedServers.withLock { tasks in
            while tasks.count <= number { tasks.append(Task { try await PostgresTestServer() }) }
            return tasks[number]
        }
        return try await task.value
    }

    /// A server whose data directory is already made (a standby's), started on `port`.
    init(
        binaries: URL, runAs: String?, directory: URL, port: Int, durable: Bool, settings: [String]
    ) {
        self.binaries = binaries
        self.runAs = runAs
        self.directory = directory
        self.port = port
        self.durable = durable
        self.settings = settings
    }

    /// Creates a cluster in `directory` (a new temporary directory when nil) and starts it on a
    /// free port.
    ///
    /// - Throws: ``PostgresTestServerError`` when PostgreSQL is not installed, `initdb` fails,
    ///   or the server does not start (with the tail of its log).
    package init(directory: URL? = nil, durable: Bool = false, settings: [String] = []) async throws {
        self.durable = durable
        self.settings = settings
        binaries = try Self.findBinaries()
        runAs = geteuid() == 0 ? Self.unprivilegedUser() : nil
        let directory =
            directory
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("logsync-pg-\(UUID().uuidString.prefix(8).lowercased())")
        self.directory = directory
        try Self.makeDirectory(directory, for: runAs)
        let initdb = try await Self.command(
            binaries, runAs,
            ["initdb", "-D", directory.path, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"])
        guard initdb.status == 0 else {
            throw PostgresTestServerError("initdb into \(directory.path) failed: \(initdb)")
        }
        // A port that was free a moment ago may be taken by the time the server binds: try a few.
        var lastError: (any Error)?
        for _ in 0..<3 {
            let port = try Self.freePort()
            do {
                try await Self.start(
                    binaries, runAs, directory: directory, port: port, durable: durable, settings: settings)
                self.port = port
                Self.register(self.stopCommand)
                return
            } catch {
                lastError = error
            }
        }
        throw lastError ?? PostgresTestServerError("PostgreSQL did not start")
    }

    /// A new, empty database with a unique name, and its URL:
    /// `postgres://postgres@127.0.0.1:PORT/NAME`.
    package func createDatabase() async throws -> String {
        let number = counter.withLock { counter in
            counter += 1
            return counter
        }
        let name = "logsync_\(getpid())_\(number)_\(UUID().uuidString.prefix(6).lowercased())"
        let created = try await Self.command(
            binaries, runAs, ["createdb", "-h", directory.path, "-p", "\(port)", "-U", "postgres", name])
        guard created.status == 0 else {
            throw PostgresTestServerError("createdb \(name) failed: \(created)")
        }
        return "postgres://postgres@127.0.0.1:\(port)/\(name)"
    }

    /// Restarts the server on the same port, ending every connection (`-m fast`): what a
    /// PostgreSQL restart in production looks like to clients.
    package func restart() async throws {
        let restarted = try await Self.command(
            binaries, runAs,
            [
                "pg_ctl", "restart", "-w", "-m", "fast", "-D", directory.path, "-l", logPath,
                "-o", Self.serverOptions(directory: directory, port: port, durable: durable, settings: settings),
            ])
        guard restarted.status == 0 else {
            throw PostgresTestServerError("pg_ctl restart failed: \(restarted)\nlog:\n\(logTail())")
        }
    }

    /// Stops the server (`-m fast`); ``startAgain()`` starts it again on the same port.
    package func stop() async throws {
        let stopped = try await Self.command(
            binaries, runAs, ["pg_ctl", "stop", "-w", "-m", "fast", "-D", directory.path])
        guard stopped.status == 0 else {
            throw PostgresTestServerError("pg_ctl stop failed: \(stopped)\nlog:\n\(logTail())")
        }
    }

    /// Starts the server stopped by ``stop()`` again, on the same port.
    package func startAgain() async throws {
        try await Self.start(binaries, runAs, directory: directory, port: port, durable: durable, settings: settings)
    }

    /// Stops the server at once and deletes its directory; for tests with a server of their own.
    package func destroy() async {
        _ = try? await Self.command(binaries, runAs, ["pg_ctl", "stop", "-w", "-m", "immediate", "-D", directory.path])
        try? FileManager.default.removeItem(at: directory)
    }

    /// The server's log file.
    var logPath: String { directory.appendingPathComponent("log").path }

    /// The last 40 lines of the server's log, for failure messages.
    package func logTail() -> String {
        Self.logTail(directory: directory)
    }

    /// Remembers this server for the exit handler, which stops it and deletes its directory.
    func registerForExit() { Self.register(stopCommand) }

    /// What the exit handler runs: `pg_ctl stop -m immediate` as the right user, then the
    /// directory's removal.
    var stopCommand: RegisteredServer {
        RegisteredServer(
            arguments: Self.arguments(
                binaries, runAs, ["pg_ctl", "stop", "-w", "-m", "immediate", "-D", directory.path]),
            directory: directory.path)
    }

    // MARK: Commands

    /// Creates `directory`, owned by `runAs` when given, readable by its owner alone (as
    /// PostgreSQL wants a data directory).
    static func makeDirectory(_ directory: URL, for runAs: String?) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if let runAs {
            guard let user = getpwnam(runAs) else { throw PostgresTestServerError("no user \(runAs)") }
            guard chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                throw PostgresTestServerError("cannot chown \(directory.path) to \(runAs): errno \(errno)")
            }
        }
        _ = chmod(directory.path, 0o700)
    }

    /// Runs a PostgreSQL program from `binaries`, as `runAs` when given.
    static func command(
        _ binaries: URL, _ runAs: String?, _ arguments: [String]
    ) async throws -> ChildProcess.Finished {
        let full = Self.arguments(binaries, runAs, arguments)
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        environment.removeValue(forKey: "PGDATA")
        return try await ChildProcess.run(Array(full.dropFirst()), program: full[0], environment: environment)
    }

    /// `[program path, arguments…]`, prefixed by `runuser -u USER --` when running as another
    /// user.
    private static func arguments(_ binaries: URL, _ runAs: String?, _ arguments: [String]) -> [String] {
        let program = binaries.appendingPathComponent(arguments[0]).path
        if let runAs {
            return ["/usr/sbin/runuser", "-u", runAs, "--", program] + arguments.dropFirst()
        }
        return [program] + arguments.dropFirst()
    }

    /// The server's `-o` options: loopback only, the socket in the data directory, durability
    /// off, and room for the many pools tests open at once.
    static func serverOptions(directory: URL, port: Int, durable: Bool, settings: [String]) -> String {
        "-p \(port) -c listen_addresses=127.0.0.1 -c unix_socket_directories=\(directory.path) -c max_connections=1000"
            + (durable ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off")
            + settings.map { " -c \($0)" }.joined()
    }

    /// `pg_ctl start`, waiting until the server accepts connections.
    static func start(
        _ binaries: URL, _ runAs: String?, directory: URL, port: Int, durable: Bool, settings: [String]
    ) async throws {
        let started = try await command(
            binaries, runAs,
            [
                "pg_ctl", "start", "-w", "-t", "60", "-D", directory.path, "-l",
                directory.appendingPathComponent("log").path,
                "-o", serverOptions(directory: directory, port: port, durable: durable, settings: settings),
            ])
        guard started.status == 0 else {
            throw PostgresTestServerError(
                "PostgreSQL in \(directory.path) did not start on port \(port): \(started)\nlog:\n\(logTail(directory: directory))"
            )
        }
    }

    /// The last 40 lines of the log in `directory`.
    static func logTail(directory: URL) -> String {
        let text = (try? String(contentsOf: directory.appendingPathComponent("log"), encoding: .utf8)) ?? "(no log)"
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(40).joined(separator: "\n")
    }

    /// The directory of `initdb` and `pg_ctl`: `$LOGSYNC_PG_BIN`, else the newest
    /// `/usr/lib/postgresql/<version>/bin` (Debian), else the `PATH`.
    static func findBinaries() throws -> URL {
        let manager = FileManager.default
        func complete(_ directory: String) -> Bool {
            ["initdb", "pg_ctl", "createdb"].allSatisfy { manager.isExecutableFile(atPath: "\(directory)/\($0)") }
        }
        if let configured = ProcessInfo.processInfo.environment["LOGSYNC_PG_BIN"] {
            guard complete(configured) else {
                throw PostgresTestServerError("LOGSYNC_PG_BIN=\(configured) has no initdb, pg_ctl and createdb")
            }
            return URL(fileURLWithPath: configured)
        }
        let versions = ((try? manager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap { name in Double(name).map { (name, $0) } }
            .sorted { $0.1 > $1.1 }
        for (name, _) in versions where complete("/usr/lib/postgresql/\(name)/bin") {
            return URL(fileURLWithPath: "/usr/lib/postgresql/\(name)/bin")
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        where complete(String(directory)) {
            return URL(fileURLWithPath: String(directory))
        }
        throw PostgresTestServerError(
            "PostgreSQL is not installed: no initdb, pg_ctl and createdb in $LOGSYNC_PG_BIN, /usr/lib/postgresql/*/bin or "
                + "the PATH. Install it (Debian: apt-get install postgresql) or set LOGSYNC_PG_BIN to its bin directory."
        )
    }

    /// `postgres` when that user exists, else `nobody`.
    private static func unprivilegedUser() -> String {
        getpwnam("postgres") != nil ? "postgres" : "nobody"
    }

    /// A TCP port on 127.0.0.1 that nothing listens on now: bind port 0, read it, close.
    static func freePort() throws -> Int {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { throw PostgresTestServerError("socket failed: errno \(errno)") }
        defer { close(socketDescriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socketDescriptor, address, length) == 0 && getsockname(socketDescriptor, address, &length) == 0
            }
        }
        guard bound else { throw PostgresTestServerError("binding a loopback port failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    // MARK: Stopping at exit

    /// A started server, as the exit handler needs it.
    struct RegisteredServer: Sendable {
        var arguments: [String]
        var directory: String
    }

    private static let registered = Mutex<(handlerInstalled: Bool, servers: [RegisteredServer])>((false, []))

    /// Remembers `server` for the exit handler, installing the handler the first time.
    static func register(_ server: RegisteredServer) {
        let install = registered.withLock { state in
            state.servers.append(server)
            defer { state.handlerInstalled = true }
            return !state.handlerInstalled
        }
        if install { atexit { PostgresTestServer.stopAllAtExit() } }
    }

    /// Stops every server this process started (`pg_ctl stop -m immediate`) and deletes their
    /// directories. Runs at exit, when async code cannot, hence a plain `posix_spawn` and
    /// `waitpid`.
    private static func stopAllAtExit() {
        let servers = registered.withLock { state in
            defer { state.servers = [] }
            return state.servers
        }
        for server in servers {
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = server.arguments.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            if posix_spawn(&pid, server.arguments[0], &actions, nil, argv, environ) == 0 {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
            try? FileManager.default.removeItem(atPath: server.directory)
        }
    }
}

/// A test PostgreSQL server that could not be found, set up or controlled, and why.
package struct PostgresTestServerError: Error, Sendable, CustomStringConvertible {
    /// What failed, with the command's output or the server's log tail.
    package let description: String

    /// Creates the error.
    package init(_ description: String) { self.description = description }
}
