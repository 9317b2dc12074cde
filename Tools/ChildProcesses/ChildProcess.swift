import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process of a test (`logsync-server`, `notes-device`, `logtool`, `logstore-crasher`)
/// with its standard output and error collected. Every test that starts a process uses this.
///
/// Spawned with `posix_spawn`, not Foundation's `Process`: `Process.run()` on Linux can crash
/// when other tests launch processes at the same time (seen here in the whole suite). The child
/// gets standard input from `/dev/null` and no other descriptor of the test process.
package final class ChildProcess: Sendable {
    package struct Finished: CustomStringConvertible, Sendable {
        package var status: Int32
        package var output: String
        package var errorOutput: String
        package var description: String { "exit \(status)\nstdout:\n\(output)\nstderr:\n\(errorOutput)" }
    }

    /// The child's process ID.
    package let pid: pid_t
    private let output = Mutex(Data())
    private let errors = Mutex(Data())
    /// Called with the standard error so far, each time more arrives.
    private let errorWaiters = Mutex<[@Sendable (String) -> Bool]>([])
    /// Called with the standard output so far, each time more arrives.
    private let outputWaiters = Mutex<[@Sendable (String) -> Bool]>([])
    private let exited = OneAnswer<Int32>()
    private let outputDone = Latch()
    private let errorsDone = Latch()

    private init(pid: pid_t) {
        self.pid = pid
    }

    /// An executable SwiftPM built next to the test bundle, or the path in the environment
    /// variable named after it (`LOGSYNC_SERVER_PATH` for `logsync-server`, `LOGTOOL_PATH`);
    /// an absolute path (a system program such as `/usr/bin/chromium`) is itself.
    package static func executableURL(_ name: String) -> URL? {
        if name.hasPrefix("/") { return URL(fileURLWithPath: name) }
        let variable = name.uppercased().replacingOccurrences(of: "-", with: "_") + "_PATH"
        if let path = ProcessInfo.processInfo.environment[variable] { return URL(fileURLWithPath: path) }
        var directory = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
        ).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// Starts `program arguments` (by default `logsync-server`), in `directory` if given (else
    /// this process's), with `environment` if given (else this process's). With
    /// `descriptorLimit`, the program runs with at most that many open descriptors (`ulimit -n`,
    /// set by `/bin/sh` before it execs the program, so the process ID is the program's).
    package static func start(
        _ arguments: [String], program: String = "logsync-server", environment: [String: String]? = nil,
        directory: URL? = nil, descriptorLimit: Int? = nil
    ) throws -> ChildProcess {
        guard var executable = executableURL(program) else {
            throw ChildProcessError("no \(program) binary next to the test bundle")
        }
        var arguments = arguments
        if let descriptorLimit {
            arguments = ["-c", "ulimit -n \(descriptorLimit) && exec \"$0\" \"$@\"", executable.path] + arguments
            executable = URL(fileURLWithPath: "/bin/sh")
        }
        var out: [Int32] = [-1, -1]
        var err: [Int32] = [-1, -1]
        guard pipe(&out) == 0, pipe(&err) == 0 else { throw ChildProcessError("pipe failed: \(errno)") }
        // Not inherited by other children this process spawns (the dup2s below clear the flag).
        for descriptor in out + err { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, out[1], 1)
        posix_spawn_file_actions_adddup2(&actions, err[1], 2)
        // Nothing else of this process's: its servers' listening sockets above all, which a
        // child holding them would keep open after the test stopped the server.
        try closeFrom3(&actions)
        if let directory { try changeDirectory(&actions, to: directory) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable.path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { environment in
            environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let spawned =
            envp.map { posix_spawn(&pid, executable.path, &actions, nil, argv, $0) }
            ?? posix_spawn(&pid, executable.path, &actions, nil, argv, environ)
        close(out[1])
        close(err[1])
        guard spawned == 0 else {
            close(out[0])
            close(err[0])
            throw ChildProcessError("posix_spawn \(executable.path) failed: \(spawned)")
        }
        let childPID = pid
        let child = ChildProcess(pid: childPID)
        // Each pipe is read to its end by a thread of its own, with blocking reads.
        child.drain(out[0], into: child.outputDone) { data in
            child.output.withLock { output in
                output.append(data)
                let text = String(decoding: output, as: UTF8.self)
                child.outputWaiters.withLock { waiters in waiters.removeAll { $0(text) } }
            }
        }
        child.drain(err[0], into: child.errorsDone) { data in
            // Under the errors' lock, so a waiter is never added between a chunk and its check.
            child.errors.withLock { errors in
                errors.append(data)
                let text = String(decoding: errors, as: UTF8.self)
                child.errorWaiters.withLock { waiters in waiters.removeAll { $0(text) } }
            }
        }
        let reaper = Thread {
            var status: Int32 = 0
            while waitpid(childPID, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED: the low 7 bits are 0; then WEXITSTATUS is the next byte. A signal: 128 + it.
            child.exited.give(status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
        }
        reaper.start()
        return child
    }

    /// `posix_spawn_file_actions_addclosefrom_np(actions, 3)` (glibc 2.34 and later), looked up
    /// at run time since the Glibc module does not export it: every descriptor from 3 up is
    /// closed in the child, atomically, however many other threads open and close meanwhile.
    private static func closeFrom3(_ actions: inout posix_spawn_file_actions_t) throws {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw ChildProcessError(
                "this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)")
        }
        let result = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        guard result == 0 else { throw ChildProcessError("posix_spawn_file_actions_addclosefrom_np failed: \(result)") }
    }

    /// `posix_spawn_file_actions_addchdir_np(actions, directory)` (glibc 2.29 and later), looked up
    /// at run time as ``closeFrom3(_:)`` is: the child starts in `directory`.
    private static func changeDirectory(_ actions: inout posix_spawn_file_actions_t, to directory: URL) throws {
        typealias ChangeDirectory =
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else {
            throw ChildProcessError("this C library has no posix_spawn_file_actions_addchdir_np (glibc 2.29 or later)")
        }
        let result = directory.path.withCString { unsafeBitCast(symbol, to: ChangeDirectory.self)(&actions, $0) }
        guard result == 0 else { throw ChildProcessError("posix_spawn_file_actions_addchdir_np failed: \(result)") }
    }

    /// Runs `program arguments` (by default `logsync-server`) to its end, with at most
    /// `descriptorLimit` open descriptors if given (as ``start(_:program:environment:directory:descriptorLimit:)``).
    package static func run(
        _ arguments: [String], program: String = "logsync-server", environment: [String: String]? = nil,
        directory: URL? = nil, descriptorLimit: Int? = nil
    ) async throws -> Finished {
        let child = try start(
            arguments, program: program, environment: environment, directory: directory,
            descriptorLimit: descriptorLimit)
        return await child.finish()
    }

    /// Mints an admin token with `logsync-server admin-token add --file file` (its digest added
    /// to `file`) and returns the token; fails, naming the run, if the command does not succeed.
    package static func addAdminToken(to file: URL, directory: URL? = nil) async throws -> String {
        let added = try await run(["admin-token", "add", "--file", file.path], directory: directory)
        guard added.status == 0 else { throw ChildProcessError("admin-token add failed: \(added)") }
        return added.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The port of the server's `listening … port=N` log line; fails after 30 seconds or if the
    /// process exits first.
    package func waitForPort() async throws -> Int {
        let port = await firstLine(ofErrors: true) { line -> Int? in
            guard line.contains("listening"), let start = line.range(of: "port=")?.upperBound else { return nil }
            return Int(line[start...].prefix { $0.isNumber })
        }
        guard let port else { throw ChildProcessError("logsync-server did not log its port: \(await finish())") }
        return port
    }

    /// Waits until the standard output holds a line containing `text`, and returns that line;
    /// fails after 30 seconds or if the process exits first.
    @discardableResult
    package func waitForOutputLine(containing text: String) async throws -> String {
        let line = await firstLine(ofErrors: false) { $0.contains(text) ? String($0) : nil }
        guard let line else { throw ChildProcessError("no output line containing \"\(text)\": \(await finish())") }
        return line
    }

    /// Waits until the standard error holds a line containing every one of `texts`, and returns
    /// that line; fails after 30 seconds or if the process exits first.
    @discardableResult
    package func waitForErrorLine(containing texts: String...) async throws -> String {
        let line = await firstLine(ofErrors: true) { line in texts.allSatisfy(line.contains) ? String(line) : nil }
        guard let line else { throw ChildProcessError("no error line containing \(texts): \(await finish())") }
        return line
    }

    /// The first line of the standard error (or output) for which `match` has a value (with
    /// `wholeText`, the whole text so far is matched as one), waiting
    /// for more as it arrives; `nil`, and the process killed, after 30 seconds or if the process
    /// exits (and its stream ends) first.
    private func firstLine<T: Sendable>(
        ofErrors: Bool, wholeText: Bool = false, _ match: @escaping @Sendable (Substring) -> T?
    ) async -> T? {
        let answer = OneAnswer<T?>()
        let check: @Sendable (String) -> Bool = { text in
            for line in wholeText ? [Substring(text)] : text.split(separator: "\n") {
                if let value = match(line) {
                    answer.give(value)
                    return true
                }
            }
            return false
        }
        // Checked under the stream's lock, so no chunk arrives between the check and the waiter.
        if ofErrors {
            errors.withLock { data in
                if !check(String(decoding: data, as: UTF8.self)) { errorWaiters.withLock { $0.append(check) } }
            }
        } else {
            output.withLock { data in
                if !check(String(decoding: data, as: UTF8.self)) { outputWaiters.withLock { $0.append(check) } }
            }
        }
        let done = ofErrors ? errorsDone : outputDone
        let exit = Task {
            _ = await exited.value()
            await done.wait()  // every line it wrote was checked
            answer.give(nil)
        }
        let timeout = Task {
            try? await Task.sleep(for: .seconds(30))
            answer.give(nil)
        }
        let value = await answer.value()
        exit.cancel()
        timeout.cancel()
        if value == nil { kill(pid, SIGKILL) }
        return value
    }

    /// The first `count` complete lines of the standard output, once written; fails after 30
    /// seconds or if the process exits first.
    package func waitForOutputLines(_ count: Int) async throws -> [String] {
        let lines = await firstLine(ofErrors: false, wholeText: true) { text -> [String]? in
            let complete = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            return complete.count >= count ? complete.prefix(count).map(String.init) : nil
        }
        guard let lines else { throw ChildProcessError("fewer than \(count) output lines: \(await finish())") }
        return lines
    }

    /// Sends `signal` to the process.
    package func send(_ signal: Int32) {
        kill(pid, signal)
    }

    /// Sends SIGTERM and waits for the process to exit.
    package func terminate() async throws -> Finished {
        kill(pid, SIGTERM)
        return await finish()
    }

    /// Waits for the process to exit and its output to end, and returns what it wrote.
    package func finish() async -> Finished {
        let status = await exited.value()
        for done in [outputDone, errorsDone] { await done.wait() }
        return Finished(
            status: status, output: output.withLock { String(decoding: $0, as: UTF8.self) },
            errorOutput: errors.withLock { String(decoding: $0, as: UTF8.self) })
    }

    /// Reads `descriptor` to its end on a thread of its own, handing each chunk to `append`.
    private func drain(_ descriptor: Int32, into latch: Latch, _ append: @escaping @Sendable (Data) -> Void) {
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                append(Data(buffer[0..<count]))
            }
            close(descriptor)
            latch.open()
        }
        thread.start()
    }
}

/// A one-shot signal: ``wait()`` returns once ``open()`` was called.
package final class Latch: Sendable {
    package init() {}

    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    package func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    package func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}

/// The first of several possible answers: ``give(_:)`` keeps the first value, ``value()`` waits
/// for it.
package final class OneAnswer<Value: Sendable>: Sendable {
    package init() {}

    private let state = Mutex<(value: Value?, given: Bool, waiters: [CheckedContinuation<Value, Never>])>(
        (nil, false, []))

    package func give(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard !state.given else { return [] }
            state.given = true
            state.value = value
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    package func value() async -> Value {
        await withCheckedContinuation { continuation in
            let value = state.withLock { state -> Value? in
                if state.given { return state.value }
                state.waiters.append(continuation)
                return nil
            }
            if let value { continuation.resume(returning: value) }
        }
    }
}

/// What went wrong starting or watching a child process.
package struct ChildProcessError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
