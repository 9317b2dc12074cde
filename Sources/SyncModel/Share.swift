import Foundation

/// A share: the record that gives other users access to a zone or to a record hierarchy.
///
/// Mirrors `CKShare` (F119–F124). A share is a record of the reserved type ``recordType``
/// (`cloudkit.share`), saved by its owner with `modifyRecords` in the owner's private database,
/// in the zone it shares. It comes in two kinds:
///
/// - a **zone-wide share** (`Share(recordZoneID:)`), whose record name is the reserved
///   ``zoneWideShareRecordName`` (`cloudkit.zoneshare`): it shares every record of the zone;
/// - a **record-hierarchy share** (`Share(rootRecord:)`), which shares its root record and every
///   record that reaches the root through `parent` references.
///
/// A zone or a record belongs to at most one share (F123). Adding or removing a participant is a
/// save of the share; the server sets the ``url``, the owner and each participant's
/// ``Participant/acceptanceStatus``. A participant accepts a share from its URL
/// (``ShareOperations``), after which the zone appears in the participant's shared database,
/// its ID carrying the owner's name (F119, F120).
///
/// ```swift
/// var share = Share(recordZoneID: notes)
/// share.publicPermission = .none
/// share.addParticipant(Share.Participant(emailAddress: "bob@example.com", permission: .readWrite))
/// let saved = try await privateDatabase.modifyRecords(saving: [share.record], deleting: [])
/// ```
public struct Share: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The reserved record type of every share, `cloudkit.share` (as in CloudKit).
    public static let recordType: Record.RecordType = "cloudkit.share"
    /// The reserved record name of a zone-wide share, `cloudkit.zoneshare` (`CKRecordNameZoneWideShare`).
    public static let zoneWideShareRecordName = "cloudkit.zoneshare"

    /// The fields of a share record, by key. Apps may set other keys (a title, say) freely.
    public enum FieldKey {
        /// A reference to the root record of a hierarchy share; absent for a zone-wide share.
        public static let rootRecord = "rootRecord"
        /// The ``Participant/Permission`` of anyone holding the URL, as an int64.
        public static let publicPermission = "publicPermission"
        /// The share's URL, set by the server.
        public static let url = "url"
        /// The participants, as parallel lists: user record names ("" when only an e-mail
        /// address is known), e-mail addresses ("" when none), roles, permissions, statuses.
        public static let participantUsers = "participantUsers"
        public static let participantEmails = "participantEmails"
        public static let participantRoles = "participantRoles"
        public static let participantPermissions = "participantPermissions"
        public static let participantStatuses = "participantStatuses"
        /// The share's title, as `CKShare.SystemFieldKey.title`.
        public static let title = "title"
    }

    /// The share as a record: what is saved and fetched.
    public private(set) var record: Record

    // MARK: Creating

    /// A new zone-wide share of `recordZoneID` (CloudKit's `CKShare(recordZoneID:)`).
    public init(recordZoneID: RecordZone.ID) {
        record = Record(
            recordType: Self.recordType,
            recordID: Record.ID(recordName: Self.zoneWideShareRecordName, zoneID: recordZoneID))
        publicPermission = .none
        participants = []
    }

    /// A new share of the hierarchy rooted at `rootRecordID`, in the root's zone.
    ///
    /// - Parameters:
    ///   - rootRecordID: The root record; the records reaching it through `parent` are shared too.
    ///   - shareID: The share record's ID; a new random name in the root's zone by default.
    public init(rootRecordID: Record.ID, shareID: Record.ID? = nil) {
        record = Record(recordType: Self.recordType, recordID: shareID ?? Record.ID(zoneID: rootRecordID.zoneID))
        record[FieldKey.rootRecord] = .reference(Record.Reference(recordID: rootRecordID))
        publicPermission = .none
        participants = []
    }

    /// The share a record holds, such as a share fetched from a zone's change feed.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the record and the field that is not a
    ///   share's: another record type, a participant list whose parts differ in length, an
    ///   unknown role, permission or status.
    public init(record: Record) throws(SyncError) {
        guard record.recordType == Self.recordType else {
            throw SyncError(
                .invalidArguments, "\(record.recordID) is a \(record.recordType), not a share (\(Self.recordType))",
                item: .record(record.recordID))
        }
        self.record = record
        func invalid(_ what: String) -> SyncError {
            SyncError(.invalidArguments, "share \(record.recordID): \(what)", item: .record(record.recordID))
        }
        if let value = record[FieldKey.rootRecord] {
            guard case .reference(let root) = value else { throw invalid("\(FieldKey.rootRecord) is not a reference") }
            guard root.recordID.zoneID == record.recordID.zoneID else {
                throw invalid("its root \(root.recordID) is in another zone")
            }
            guard record.recordID.recordName != Self.zoneWideShareRecordName else {
                throw invalid("a zone-wide share (\(Self.zoneWideShareRecordName)) has no root record")
            }
        }
        _ = try Self.permission(record[FieldKey.publicPermission], invalid)
        _ = try Self.participants(of: record, invalid)
    }

    // MARK: What it shares

    /// The share record's ID.
    public var recordID: Record.ID { record.recordID }
    /// The zone the share lives in: the shared zone, or the zone of the shared hierarchy.
    public var zoneID: RecordZone.ID { record.recordID.zoneID }

    /// Whether the share shares its whole zone.
    public var isZoneWide: Bool { record.recordID.recordName == Self.zoneWideShareRecordName && rootRecordID == nil }

    /// The root of a hierarchy share; `nil` for a zone-wide share.
    public var rootRecordID: Record.ID? {
        if case .reference(let root)? = record[FieldKey.rootRecord] { return root.recordID }
        return nil
    }

    /// The share's URL, set by the server when the share is first saved; `nil` before.
    public var url: URL? {
        if case .string(let text)? = record[FieldKey.url] { return URL(string: text) }
        return nil
    }

    /// The share's title, if any (`CKShare.SystemFieldKey.title`).
    public var title: String? {
        get { if case .string(let text)? = record[FieldKey.title] { text } else { nil } }
        set { record[FieldKey.title] = newValue.map(RecordValue.string) }
    }

    /// What anyone holding the URL may do: ``Participant/Permission/none`` (the default) makes
    /// the share private, open to its participants only.
    public var publicPermission: Participant.Permission {
        get {
            (try? Self.permission(record[FieldKey.publicPermission], { _ in SyncError(.invalidArguments) })) ?? .none
        }
        set { record[FieldKey.publicPermission] = .int64(Int64(newValue.rawValue)) }
    }

    /// Every participant, the owner included once the server has saved the share.
    public var participants: [Participant] {
        get { (try? Self.participants(of: record, { _ in SyncError(.invalidArguments) })) ?? [] }
        set {
            record[FieldKey.participantUsers] = .list(newValue.map { .string($0.userIdentity.userRecordName ?? "") })
            record[FieldKey.participantEmails] = .list(newValue.map { .string($0.userIdentity.emailAddress ?? "") })
            record[FieldKey.participantRoles] = .list(newValue.map { .int64(Int64($0.role.rawValue)) })
            record[FieldKey.participantPermissions] = .list(newValue.map { .int64(Int64($0.permission.rawValue)) })
            record[FieldKey.participantStatuses] = .list(newValue.map { .int64(Int64($0.acceptanceStatus.rawValue)) })
        }
    }

    /// The owner, once the server has saved the share.
    public var owner: Participant? { participants.first { $0.role == .owner } }

    /// Adds a participant, or replaces the one with the same identity (CKShare's `addParticipant`).
    public mutating func addParticipant(_ participant: Participant) {
        var all = participants
        if let index = all.firstIndex(where: { $0.userIdentity.matches(participant.userIdentity) }) {
            all[index] = participant
        } else {
            all.append(participant)
        }
        participants = all
    }

    /// Removes the participant with this identity, if any (CKShare's `removeParticipant`).
    public mutating func removeParticipant(_ identity: UserIdentity) {
        participants = participants.filter { !$0.userIdentity.matches(identity) }
    }

    /// The participant with this user record name, if any.
    public func participant(userRecordName: String) -> Participant? {
        participants.first { $0.userIdentity.userRecordName == userRecordName }
    }

    /// A one-line rendering, for example `Share(zone "Notes", 2 participants)`.
    public var description: String {
        let what = rootRecordID.map { "root \($0)" } ?? "\(zoneID)"
        let count = participants.count
        return "Share(\(what), \(count) participant\(count == 1 ? "" : "s"))"
    }

    /// The same share with its record replaced (the server's normalised copy, say).
    package init(validated record: Record) {
        self.record = record
    }

    // MARK: Decoding the fields

    private static func permission(
        _ value: RecordValue?, _ invalid: (String) -> SyncError
    ) throws(SyncError) -> Participant.Permission {
        guard let value else { return .none }
        guard case .int64(let raw) = value, let permission = Participant.Permission(rawValue: Int(raw)) else {
            throw invalid("\(FieldKey.publicPermission) is not a permission (1 none, 2 readOnly, 3 readWrite)")
        }
        return permission
    }

    private static func participants(
        of record: Record, _ invalid: (String) -> SyncError
    ) throws(SyncError) -> [Participant] {
        func list(_ key: String) throws(SyncError) -> [RecordValue] {
            switch record[key] {
            case nil: return []
            case .list(let values)?: return values
            case let other?: throw invalid("\(key) is a \(other.kindName), not a list")
            }
        }
        let users = try list(FieldKey.participantUsers)
        let emails = try list(FieldKey.participantEmails)
        let roles = try list(FieldKey.participantRoles)
        let permissions = try list(FieldKey.participantPermissions)
        let statuses = try list(FieldKey.participantStatuses)
        guard Set([users.count, emails.count, roles.count, permissions.count, statuses.count]).count == 1 else {
            throw invalid("its participant lists differ in length")
        }
        var participants: [Participant] = []
        for index in users.indices {
            guard case .string(let user) = users[index], case .string(let email) = emails[index] else {
                throw invalid("participant \(index) has a user or e-mail address that is not a string")
            }
            guard case .int64(let role) = roles[index], let role = Participant.Role(rawValue: Int(role)) else {
                throw invalid("participant \(index) has no valid role (1 owner, 3 privateUser, 4 publicUser)")
            }
            guard case .int64(let permission) = permissions[index],
                let permission = Participant.Permission(rawValue: Int(permission))
            else { throw invalid("participant \(index) has no valid permission (1 none, 2 readOnly, 3 readWrite)") }
            guard case .int64(let status) = statuses[index],
                let status = Participant.AcceptanceStatus(rawValue: Int(status))
            else { throw invalid("participant \(index) has no valid status (1 pending, 2 accepted, 3 removed)") }
            guard !user.isEmpty || !email.isEmpty else {
                throw invalid("participant \(index) has neither a user record name nor an e-mail address")
            }
            var participant = Participant(
                userIdentity: UserIdentity(
                    userRecordName: user.isEmpty ? nil : user, emailAddress: email.isEmpty ? nil : email),
                permission: permission)
            participant.role = role
            participant.acceptanceStatus = status
            participants.append(participant)
        }
        return participants
    }
}

extension Share {
    /// A user taking part in a share, with what they may do and whether they accepted.
    ///
    /// Mirrors `CKShare.Participant`. An owner adds participants by e-mail address or user record
    /// name; the server resolves e-mail addresses to users when the share is saved.
    public struct Participant: Sendable, Hashable, Codable, CustomStringConvertible {
        /// A participant's role; raw values match `CKShare.ParticipantRole`.
        public enum Role: Int, Sendable, Hashable, Codable, CaseIterable {
            /// The user who owns the share and its zone.
            case owner = 1
            /// A user the owner invited.
            case privateUser = 3
            /// A user who joined a public share from its URL.
            case publicUser = 4
        }

        /// What a participant may do; raw values match `CKShare.ParticipantPermission`.
        public enum Permission: Int, Sendable, Hashable, Codable, CaseIterable {
            /// Nothing: as a public permission, the share is private.
            case none = 1
            /// Read the shared records.
            case readOnly = 2
            /// Read, save and delete the shared records.
            case readWrite = 3
        }

        /// Whether a participant accepted; raw values match `CKShare.ParticipantAcceptanceStatus`.
        public enum AcceptanceStatus: Int, Sendable, Hashable, Codable, CaseIterable {
            /// Invited, not accepted yet.
            case pending = 1
            /// Accepted: the shared zone is in the participant's shared database.
            case accepted = 2
            /// Removed by the owner, or left.
            case removed = 3
        }

        /// Who the participant is.
        public var userIdentity: UserIdentity
        /// The participant's role.
        public package(set) var role: Role
        /// What the participant may do.
        public var permission: Permission
        /// Whether the participant accepted; set by the server.
        public package(set) var acceptanceStatus: AcceptanceStatus

        /// A participant to invite: a private user, pending until they accept.
        ///
        /// - Parameters:
        ///   - userIdentity: Who: an e-mail address the server knows, or a user record name.
        ///   - permission: What they may do; read-only by default.
        public init(userIdentity: UserIdentity, permission: Permission = .readOnly) {
            self.userIdentity = userIdentity
            self.role = .privateUser
            self.permission = permission
            self.acceptanceStatus = .pending
        }

        /// A participant to invite by e-mail address.
        public init(emailAddress: String, permission: Permission = .readOnly) {
            self.init(userIdentity: UserIdentity(emailAddress: emailAddress), permission: permission)
        }

        /// A participant to invite by user record name (what `currentUserRecordID()` returns).
        public init(userRecordName: String, permission: Permission = .readOnly) {
            self.init(userIdentity: UserIdentity(userRecordName: userRecordName), permission: permission)
        }

        /// A participant as the server records it.
        package init(userIdentity: UserIdentity, role: Role, permission: Permission, acceptanceStatus: AcceptanceStatus)
        {
            self.userIdentity = userIdentity
            self.role = role
            self.permission = permission
            self.acceptanceStatus = acceptanceStatus
        }

        /// A one-line rendering, for example `Participant(user "_user2", privateUser, readWrite, accepted)`.
        public var description: String {
            "Participant(\(userIdentity), \(role), \(permission), \(acceptanceStatus))"
        }
    }

    /// What a user learns of a share from its URL before accepting it.
    ///
    /// Mirrors `CKShare.Metadata`: the share, its root record, the owner, and the role,
    /// permission and status the share gives the user who asked.
    public struct Metadata: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The share, with its zone named as the participant sees it (the owner's user record name
        /// as owner name, F120).
        public var share: Share
        /// The root of a hierarchy share; `nil` for a zone-wide share.
        public var hierarchicalRootRecordID: Record.ID?
        /// The share's owner.
        public var ownerIdentity: UserIdentity
        /// The asking user's role in the share.
        public var participantRole: Participant.Role
        /// The asking user's permission.
        public var participantPermission: Participant.Permission
        /// The asking user's acceptance status.
        public var participantStatus: Participant.AcceptanceStatus

        /// Creates metadata; the server makes it.
        public init(
            share: Share, hierarchicalRootRecordID: Record.ID?, ownerIdentity: UserIdentity,
            participantRole: Participant.Role, participantPermission: Participant.Permission,
            participantStatus: Participant.AcceptanceStatus
        ) {
            self.share = share
            self.hierarchicalRootRecordID = hierarchicalRootRecordID
            self.ownerIdentity = ownerIdentity
            self.participantRole = participantRole
            self.participantPermission = participantPermission
            self.participantStatus = participantStatus
        }

        /// The share's URL (every metadata comes from one).
        public var url: URL? { share.url }

        /// A one-line rendering.
        public var description: String {
            "Share.Metadata(\(share), owner \(ownerIdentity), \(participantRole), \(participantPermission), \(participantStatus))"
        }
    }
}

/// Who a user is, as a share names them: a user record name, an e-mail address, or both.
///
/// Mirrors `CKUserIdentity` with its lookup info. The server knows a user's e-mail address when
/// it was registered (`logsync-server user add alice --email alice@example.com`).
public struct UserIdentity: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The user's record name, such as `_user2` (the record name of `currentUserRecordID()`).
    public var userRecordName: String?
    /// The user's e-mail address.
    public var emailAddress: String?

    /// Creates an identity.
    public init(userRecordName: String? = nil, emailAddress: String? = nil) {
        self.userRecordName = userRecordName
        self.emailAddress = emailAddress
    }

    /// The user's record ID, when the record name is known.
    public var userRecordID: Record.ID? { userRecordName.map { Record.ID(recordName: $0) } }

    /// Whether both identities name the same user: the same record name, or, when either lacks
    /// one, the same e-mail address (ignoring case).
    public func matches(_ other: UserIdentity) -> Bool {
        if let mine = userRecordName, let theirs = other.userRecordName { return mine == theirs }
        if let mine = emailAddress, let theirs = other.emailAddress { return mine.lowercased() == theirs.lowercased() }
        return false
    }

    /// Checks an e-mail address: the rules of a user ID (``Identifier/userID``), ASCII, at most
    /// 254 bytes, with an `@` between a local part and a domain.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the address and the broken rule.
    public static func validate(emailAddress: String) throws(SyncError) {
        try Identifier.userID.validate(emailAddress)
        let problem: String? =
            if !emailAddress.utf8.allSatisfy({ $0 < 0x80 && $0 != 0x20 }) {
                "must be ASCII without spaces"
            } else if emailAddress.utf8.count > 254 {
                "is \(emailAddress.utf8.count) bytes long, more than 254"
            } else if let at = emailAddress.firstIndex(of: "@"), at != emailAddress.startIndex,
                emailAddress.index(after: at) != emailAddress.endIndex
            {
                nil
            } else {
                "must hold an \"@\" between a name and a domain"
            }
        if let problem {
            throw SyncError(.invalidArguments, "invalid e-mail address \(quoted(emailAddress)): \(problem)")
        }
    }

    /// A one-line rendering, for example `user "_user2" <bob@example.com>`.
    public var description: String {
        switch (userRecordName, emailAddress) {
        case (let name?, let email?): "user \(quoted(name)) <\(email)>"
        case (let name?, nil): "user \(quoted(name))"
        case (nil, let email?): "<\(email)>"
        case (nil, nil): "nobody"
        }
    }
}
