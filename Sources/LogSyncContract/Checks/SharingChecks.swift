import SyncModel

/// The sharing operations of `CloudDatabase` (F119), which a database may leave out: one that
/// does not implement them refuses each with `badDatabase` (their default implementations); one
/// that does answers a participant lookup as Docs/Protocol.md ("Sharing") says.
enum SharingChecks {
    static let all = [participantLookup]

    /// F119: looking up a user by user record name gives a participant to invite, without the
    /// user's e-mail address; a lookup that finds nobody is `unknownItem`; the lookups change no
    /// database. A database without sharing refuses the lookup whole with `badDatabase`.
    static let participantLookup = ContractCheck(
        "sharing.participantLookup",
        "F119 a participant lookup finds a user by record name, or refuses it as unsupported"
    ) { probe in
        let alice = try await probe.device("alice", "phone")
        let bob = try await probe.device("bob", "phone")
        let bobName = try await bob.database.currentUserRecordID().recordName
        try await alice.createZone("Notes")
        let before = try await alice.changedZones()
        let byName = UserIdentity.LookupInfo(userRecordName: bobName)
        let nobody = UserIdentity.LookupInfo(userRecordName: "_user999999999999")
        let response: FetchShareParticipantsResponse
        do {
            response = try await alice.database.fetchShareParticipants([byName, nobody])
        } catch let error as SyncError where error.code == .badDatabase {
            return  // the database does not implement sharing, and says so
        }
        let found = try probe.require(response.results[byName], "looking up bob by his user record name")
        probe.expect(found.userIdentity.userRecordName, equals: bobName, "the participant's user record name")
        probe.expect(found.userIdentity.emailAddress == nil, "a lookup by record name tells bob's e-mail address")
        probe.expect(found.acceptanceStatus, equals: .pending, "the participant's acceptance status")
        probe.expectFailure(response.results[nobody], .unknownItem, "looking up a user record name nobody has")
        probe.expect(try await alice.changedZones(), equals: before, "alice's database feed after the lookups")
    }
}
