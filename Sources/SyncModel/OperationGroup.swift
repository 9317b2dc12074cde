import Foundation

/// A group of requests that belong to one task of the app, for the server's telemetry (F69).
///
/// Mirrors `CKOperationGroup`: an ID, an optional name, how many items the task covers and how
/// much data it expects to send and receive. The engine tags every request of a sync with the
/// group of its options, or with a default group of its own when the options carry none; the
/// server writes one `operationGroupStarted` entry per group in the database's log, the first
/// time a request of the group reaches it, and names the group on the `requestOutcome` of each
/// modify request (Docs/Protocol.md, "Operation groups").
///
/// ```swift
/// var options = SyncEngine.SendChangesOptions()
/// options.operationGroup = OperationGroup(name: "Import photos", quantity: 120, expectedSendSize: .hundredsOfMegabytes)
/// try await engine.sendChanges(options)
/// ```
public struct OperationGroup: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The group's ID: a new UUID by default. The server keeps one entry per ID and database.
    public var operationGroupID: String
    /// What the group is for, in words, or `nil`.
    public var name: String?
    /// How many items (records, files…) the task covers; 0, the default, for unknown.
    public var quantity: Int
    /// About how much data the task sends.
    public var expectedSendSize: TransferSize
    /// About how much data the task receives.
    public var expectedReceiveSize: TransferSize

    /// About how much data a group's requests move (`CKOperationGroup.TransferSize`; the raw
    /// values are CloudKit's).
    public enum TransferSize: Int, Sendable, Hashable, Codable, CaseIterable {
        case unknown = 0
        case kilobytes = 1
        case megabytes = 2
        case tensOfMegabytes = 3
        case hundredsOfMegabytes = 4
        case gigabytes = 5
        case tensOfGigabytes = 6
        case hundredsOfGigabytes = 7
    }

    /// The most UTF-8 bytes of a group's name: 1,024.
    public static let maxNameBytes = 1024

    /// Creates a group.
    ///
    /// - Parameters:
    ///   - operationGroupID: The group's ID; a new UUID by default.
    ///   - name: What the group is for, or `nil`.
    ///   - quantity: How many items the task covers; 0 for unknown.
    ///   - expectedSendSize: About how much data the task sends.
    ///   - expectedReceiveSize: About how much data the task receives.
    public init(
        operationGroupID: String = UUID().uuidString, name: String? = nil, quantity: Int = 0,
        expectedSendSize: TransferSize = .unknown, expectedReceiveSize: TransferSize = .unknown
    ) {
        self.operationGroupID = operationGroupID
        self.name = name
        self.quantity = quantity
        self.expectedSendSize = expectedSendSize
        self.expectedReceiveSize = expectedReceiveSize
    }

    /// Checks the group: its ID follows the rules of ``Identifier/operationGroupID``, its name
    /// (when set) is not empty, holds no control character and has at most ``maxNameBytes``
    /// bytes, and its quantity is not negative.
    ///
    /// - Parameter requestID: The request the group came with, named by the error.
    /// - Throws: ``SyncError`` `invalidArguments` naming the field, such as
    ///   `invalid operation group "…": quantity is -1; it must not be negative`.
    public func validate(requestID: RequestID? = nil) throws(SyncError) {
        if let problem = Identifier.operationGroupID.violation(operationGroupID) {
            throw SyncError(
                .invalidArguments, "invalid operation group ID \(Identifier.shown(operationGroupID)): \(problem)",
                requestID: requestID)
        }
        if let name {
            let problem: String?
            if name.isEmpty {
                problem = "must not be empty (no name is nil)"
            } else if name.utf8.count > Self.maxNameBytes {
                problem = "is \(name.utf8.count) bytes long, more than \(Self.maxNameBytes)"
            } else if let control = name.unicodeScalars.first(where: {
                $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
            }) {
                problem =
                    "must not hold control characters (it holds U+\(String(control.value, radix: 16, uppercase: true)))"
            } else {
                problem = nil
            }
            if let problem {
                throw SyncError(
                    .invalidArguments,
                    "invalid operation group \(Identifier.shown(operationGroupID)): name \(Identifier.shown(name)) \(problem)",
                    requestID: requestID)
            }
        }
        if quantity < 0 {
            throw SyncError(
                .invalidArguments,
                "invalid operation group \(Identifier.shown(operationGroupID)): quantity is \(quantity); it must not be negative",
                requestID: requestID)
        }
    }

    /// A one-line rendering, such as
    /// `operation group "1F2…" "Import photos" (quantity 120, send hundredsOfMegabytes)`.
    public var description: String {
        var text = "operation group \(quoted(operationGroupID))"
        if let name { text += " \(quoted(name))" }
        var details: [String] = []
        if quantity != 0 { details.append("quantity \(quantity)") }
        if expectedSendSize != .unknown { details.append("send \(expectedSendSize)") }
        if expectedReceiveSize != .unknown { details.append("receive \(expectedReceiveSize)") }
        if !details.isEmpty { text += " (\(details.joined(separator: ", ")))" }
        return text
    }
}
