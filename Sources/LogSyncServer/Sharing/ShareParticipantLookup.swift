import SyncModel

/// A user looking up the users to invite to a share (F119; `CKFetchShareParticipantsOperation`):
/// each lookup info, an e-mail address or a user record name, answers with a participant to add
/// to a share, or with an error.
///
/// What an answer tells: that a user is registered with this e-mail address or record name, and
/// their user record name, which inviting needs. Nothing else: a lookup by record name does not
/// give the e-mail address, and every lookup that finds no user answers `unknownItem` in the
/// same words (`no user can be found as …`, naming the lookup as asked) whatever the reason: no
/// such e-mail address, no such record name, a record name that is no user's. A malformed lookup
/// info is `invalidArguments`, which depends on its text alone. Every registered user can be found by every other (the server's users are one
/// deployment's; there is no discoverability setting yet). A lookup reads the user registry only:
/// it writes nothing, and registers nobody.
struct ShareParticipantLookup {
    /// The registered users.
    let users: UserRegistry

    /// The participant for each lookup info of `request`.
    ///
    /// - Throws: `SyncError` for the whole request: `limitExceeded` past 400 lookup infos,
    ///   `invalidArguments` for one named twice.
    func participants(_ request: FetchShareParticipantsRequest) throws -> FetchShareParticipantsResponse {
        try request.validate()
        var response = FetchShareParticipantsResponse()
        for info in request.lookupInfos {
            do {
                try info.validate()
                response.results[info] = .success(try participant(info))
            } catch let error as SyncError {
                response.results[info] = .failure(error)
            }
        }
        return response
    }

    private func participant(_ info: UserIdentity.LookupInfo) throws -> Share.Participant {
        let number: UInt64? =
            if let email = info.emailAddress {
                try users.number(ofEmail: email)
            } else if let name = info.userRecordName {
                try users.owner(named: name)?.number
            } else {
                nil
            }
        guard let number else { throw SyncError(.unknownItem, "no user can be found as \(info)") }
        return Share.Participant(
            userIdentity: UserIdentity(
                userRecordName: UserRegistry.recordID(ofNumber: number).recordName, emailAddress: info.emailAddress),
            role: .privateUser, permission: .readOnly, acceptanceStatus: .pending)
    }
}
