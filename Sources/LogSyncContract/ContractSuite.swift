import Foundation
import SyncModel

/// The `CloudDatabase` contract as checks any implementation can run: the rules of zones,
/// records, change feeds and isolation between users and databases that the engine relies on.
///
/// The package's own transports (in process and over HTTP, on LMDB and on PostgreSQL) pass every
/// check; a database of your own passes them too before an engine syncs through it.
///
/// ```swift
/// import LogSyncContract
///
/// let failures = await ContractSuite.run { user, scope, device in
///     try await MyServer.shared.database(user: user.name, scope: scope, device: device)
/// }
/// for failure in failures { print(failure) }
/// ```
///
/// A check works with users of its own (their names carry a prefix unique to the run), so one
/// running server serves the whole suite, and checks may run one after another or in parallel.
/// The suite uses no test framework: it returns failures, which a test records in its own way
/// (``verify(checks:against:)`` throws them all as one error).
public enum ContractSuite {
    /// Makes a device's view of a user's database: what a server gives a signed-in device.
    ///
    /// - Parameters:
    ///   - user: Whose database: the same name must give the same user's data every time, and
    ///     different names different users.
    ///   - scope: Which database of the user (`.private`, `.shared` or `.public`).
    ///   - device: Which of the user's devices asks.
    public typealias MakeDatabase =
        @Sendable (
            _ user: ContractUser, _ scope: DatabaseScope, _ device: DeviceID
        ) async throws -> any CloudDatabase

    /// Every check of the suite, in a fixed order.
    public static var checks: [ContractCheck] {
        IsolationChecks.all + ZoneChecks.all + RecordChecks.all + SharingChecks.all
    }

    /// Runs `checks` one after another against the databases `makeDatabase` gives.
    ///
    /// - Parameters:
    ///   - checks: The checks to run; every check by default.
    ///   - makeDatabase: A device's view of a user's database.
    /// - Returns: Every failure, in the order the checks found them; empty when the database
    ///   keeps the contract.
    /// - Complexity: Each check makes a few users and a few dozen requests.
    public static func run(
        checks: [ContractCheck] = ContractSuite.checks, against makeDatabase: @escaping MakeDatabase
    ) async -> [ContractCheckFailure] {
        var failures: [ContractCheckFailure] = []
        for check in checks { failures += await check.run(against: makeDatabase) }
        return failures
    }

    /// Runs `checks` as ``run(checks:against:)`` does, and throws when any failed.
    ///
    /// - Throws: ``ContractSuiteFailure`` listing every failure.
    public static func verify(
        checks: [ContractCheck] = ContractSuite.checks, against makeDatabase: @escaping MakeDatabase
    ) async throws(ContractSuiteFailure) {
        let failures = await run(checks: checks, against: makeDatabase)
        if !failures.isEmpty { throw ContractSuiteFailure(failures: failures) }
    }
}

/// A user of the database under test, named by the suite: `alice`, `bob`, with the run's prefix.
public struct ContractUser: Sendable, Hashable, CustomStringConvertible {
    /// The user's name, unique to one run of one check.
    public let name: String

    /// A user named `name`.
    public init(name: String) { self.name = name }

    public var description: String { "user \"\(name)\"" }
}

/// One rule of the contract, run on its own against fresh users.
///
/// ```swift
/// for check in ContractSuite.checks {
///     let failures = await check.run(against: makeDatabase)
///     print(check, failures.isEmpty ? "passed" : "failed")
/// }
/// ```
public struct ContractCheck: Sendable, Identifiable, CustomStringConvertible {
    /// A stable name, such as `isolation.sameRecordIDTwoUsers`.
    public let id: String
    /// The rule in one sentence, with the feature numbers of Docs/Features.md.
    public let summary: String
    let body: @Sendable (ContractProbe) async throws -> Void

    init(_ id: String, _ summary: String, body: @escaping @Sendable (ContractProbe) async throws -> Void) {
        self.id = id
        self.summary = summary
        self.body = body
    }

    public var description: String { summary }

    /// Runs the check against the databases `makeDatabase` gives, with users of its own.
    ///
    /// - Returns: What failed; empty when the rule holds. An error thrown by the database or by
    ///   `makeDatabase` ends the check and is its last failure.
    public func run(against makeDatabase: @escaping ContractSuite.MakeDatabase) async -> [ContractCheckFailure] {
        let probe = ContractProbe(check: self, makeDatabase: makeDatabase)
        do {
            try await body(probe)
        } catch is ContractCheckFailure {
            // A requirement that failed: the probe recorded it before throwing.
        } catch {
            probe.record("threw \(error)", fileID: #fileID, line: #line)
        }
        return probe.failures
    }
}

/// One expectation of a check that did not hold.
public struct ContractCheckFailure: Error, Sendable, CustomStringConvertible {
    /// The check's ``ContractCheck/id``.
    public let check: String
    /// What was expected and what happened.
    public let message: String
    /// Where in the suite the expectation is (`LogSyncContract/Checks/…`).
    public let fileID: String
    /// The expectation's line.
    public let line: Int

    public var description: String { "\(check): \(message) (\(fileID):\(line))" }
}

/// The failures of a run of the suite.
public struct ContractSuiteFailure: Error, Sendable, CustomStringConvertible {
    /// Every failure, in order.
    public let failures: [ContractCheckFailure]

    public var description: String {
        "\(failures.count) contract failure(s):\n" + failures.map { "- \($0)" }.joined(separator: "\n")
    }
}
