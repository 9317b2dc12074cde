/// Every kind of identifier a client sends a server, with the rules each must follow.
///
/// One place checks them all, so that the server refuses a bad identifier with
/// `invalidArguments` at its edge, before anything is stored (Docs/Protocol.md, "Identifiers").
/// CloudKit's documented rules apply where it has them: record names and zone names are
/// ASCII, at most 255 characters, and do not start with `_` (`_defaultZone` is the one zone name
/// that does), F126, F127. LogSync is stricter, and says so:
///
/// - no identifier is empty, holds a NUL or another control character (U+0000–U+001F,
///   U+007F–U+009F), or the replacement character U+FFFD, which marks bytes that were not UTF-8
///   when they were decoded;
/// - each has a limit in UTF-8 bytes, so that every key the server builds from identifiers
///   fits LMDB's 511-byte key limit: 255 bytes for every kind but user IDs, 511 for user IDs
///   (the user registry's key is the ID alone);
/// - owner names, record types and field keys are ASCII, like record and zone names;
/// - a user ID has no leading or trailing spaces (the token file's lines could not keep them).
///
/// ```swift
/// try Identifier.subscriptionID.validate("engine")           // passes
/// Identifier.zoneName.violation("_Notes")                    // "must not start with \"_\""
/// ```
public enum Identifier: String, Sendable, CaseIterable, CustomStringConvertible {
    case recordName = "record name"
    case zoneName = "zone name"
    case ownerName = "owner name"
    case recordType = "record type"
    case fieldKey = "field key"
    case subscriptionID = "subscription ID"
    case requestID = "request ID"
    case deviceID = "device ID"
    case userID = "user ID"
    case operationGroupID = "operation group ID"

    /// The kind in words, as error messages name it: `record name`, `request ID`, …
    public var description: String { rawValue }

    /// The most UTF-8 bytes an identifier of this kind may hold.
    public var maxBytes: Int {
        switch self {
        case .userID: 511
        default: Limits.maxNameLength
        }
    }

    /// Whether identifiers of this kind must be ASCII.
    public var isASCIIOnly: Bool {
        switch self {
        case .recordName, .zoneName, .ownerName, .recordType, .fieldKey: true
        case .subscriptionID, .requestID, .deviceID, .userID, .operationGroupID: false
        }
    }

    /// Whether a leading `_` is reserved (for the server's names, such as `_defaultZone`).
    public var reservesLeadingUnderscore: Bool {
        switch self {
        case .recordName, .zoneName: true
        default: false
        }
    }

    /// The rule `text` breaks, in words (`"must not be empty"`), or `nil` if it follows them all.
    ///
    /// - Parameters:
    ///   - text: The identifier to check.
    ///   - exception: A reserved name this one may be although it starts with `_`
    ///     (`_defaultZone` for zone names).
    /// - Complexity: O(n) in the length of `text`.
    public func violation(_ text: String, allowing exception: String? = nil) -> String? {
        if text.isEmpty { return "must not be empty" }
        // Printable ASCII, as most identifiers are, breaks none of the character rules: its bytes
        // are checked at once, without decoding scalars.
        let printableASCII =
            text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy { $0 >= 0x20 && $0 < 0x7F } } ?? false
        if !printableASCII {
            for scalar in text.unicodeScalars {
                switch scalar.value {
                case 0: return "must not hold a NUL character"
                case 0x01...0x1F, 0x7F...0x9F:
                    return "must not hold control characters (it holds U+\(hex(scalar.value)))"
                case 0xFFFD: return "must be valid UTF-8 (it holds U+FFFD, the mark of bytes that were not)"
                default: break
                }
            }
            if isASCIIOnly, !text.utf8.allSatisfy({ $0 < 0x80 }) { return "must be ASCII" }
        }
        let bytes = text.utf8.count
        if bytes > maxBytes { return "is \(bytes) bytes long, more than \(maxBytes)" }
        if reservesLeadingUnderscore, text.hasPrefix("_"), text != exception { return "must not start with \"_\"" }
        if self == .userID, text.first!.isWhitespace || text.last!.isWhitespace {
            return "must not start or end with a space"
        }
        return nil
    }

    /// The rule broken by bytes that should be UTF-8 text (an HTTP header, say), or `nil` if they
    /// are valid UTF-8 and the text they hold follows the rules.
    public func violation(utf8 bytes: some Collection<UInt8>) -> String? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return "must be valid UTF-8" }
        return violation(text)
    }

    /// Checks `text` against the rules of this kind.
    ///
    /// - Parameters:
    ///   - text: The identifier.
    ///   - exception: A reserved name allowed to start with `_`.
    ///   - item: The item the error names, if the identifier belongs to one.
    ///   - context: Words appended to the message, such as ` in zone "Notes"`; built only when
    ///     the identifier breaks a rule.
    /// - Throws: ``SyncError`` `invalidArguments` whose message names the kind, the identifier
    ///   and the broken rule: `invalid subscription ID "": must not be empty`.
    public func validate(
        _ text: String, allowing exception: String? = nil, item: @autoclosure () -> SyncError.ItemID? = nil,
        context: @autoclosure () -> String = ""
    ) throws(SyncError) {
        if let problem = violation(text, allowing: exception) {
            throw SyncError(
                .invalidArguments, "invalid \(self) \(Self.shown(text))\(context()): \(problem)", item: item())
        }
    }

    /// The identifier quoted for a message, cut to its first 64 characters when longer.
    static func shown(_ text: String) -> String {
        text.count <= 64 ? quoted(text) : "\(quoted(String(text.prefix(64))))… (\(text.utf8.count) bytes)"
    }
}

private func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
