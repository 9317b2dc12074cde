import Foundation
import SyncModel
import Testing

/// `SyncError.Code` raw values equal `CKError.Code`'s, and the transient set of F89.
struct SyncErrorCodeTests {
    /// Every CKError code with its raw value, from CKError.h and later SDK bindings.
    static let ckErrorCodes: [(SyncError.Code, Int, String)] = [
        (.internalError, 1, "internalError"), (.partialFailure, 2, "partialFailure"),
        (.networkUnavailable, 3, "networkUnavailable"), (.networkFailure, 4, "networkFailure"),
        (.badContainer, 5, "badContainer"), (.serviceUnavailable, 6, "serviceUnavailable"),
        (.requestRateLimited, 7, "requestRateLimited"), (.missingEntitlement, 8, "missingEntitlement"),
        (.notAuthenticated, 9, "notAuthenticated"), (.permissionFailure, 10, "permissionFailure"),
        (.unknownItem, 11, "unknownItem"), (.invalidArguments, 12, "invalidArguments"),
        (.resultsTruncated, 13, "resultsTruncated"), (.serverRecordChanged, 14, "serverRecordChanged"),
        (.serverRejectedRequest, 15, "serverRejectedRequest"), (.assetFileNotFound, 16, "assetFileNotFound"),
        (.assetFileModified, 17, "assetFileModified"), (.incompatibleVersion, 18, "incompatibleVersion"),
        (.constraintViolation, 19, "constraintViolation"), (.operationCancelled, 20, "operationCancelled"),
        (.changeTokenExpired, 21, "changeTokenExpired"), (.batchRequestFailed, 22, "batchRequestFailed"),
        (.zoneBusy, 23, "zoneBusy"), (.badDatabase, 24, "badDatabase"),
        (.quotaExceeded, 25, "quotaExceeded"), (.zoneNotFound, 26, "zoneNotFound"),
        (.limitExceeded, 27, "limitExceeded"), (.userDeletedZone, 28, "userDeletedZone"),
        (.tooManyParticipants, 29, "tooManyParticipants"), (.alreadyShared, 30, "alreadyShared"),
        (.referenceViolation, 31, "referenceViolation"), (.managedAccountRestricted, 32, "managedAccountRestricted"),
        (.participantMayNeedVerification, 33, "participantMayNeedVerification"),
        (.serverResponseLost, 34, "serverResponseLost"), (.assetNotAvailable, 35, "assetNotAvailable"),
        (.accountTemporarilyUnavailable, 36, "accountTemporarilyUnavailable"),
        (.participantAlreadyInvited, 37, "participantAlreadyInvited"),
    ]

    // Limits table "CKError raw codes"
    @Test("raw value equals CKError.Code", arguments: ckErrorCodes)
    func rawValueMatchesCKError(code: SyncError.Code, rawValue: Int, name: String) {
        #expect(code.rawValue == rawValue)
        #expect(SyncError.Code(rawValue: rawValue) == code)
        #expect(code.name == name)
        #expect(code.description == "\(name) (\(rawValue))")
    }

    @Test func allKnownIsDenseAndOrdered() {
        // CloudKit's codes 1–37, then LogSync's own two (F129), above CloudKit's range.
        #expect(SyncError.Code.allKnown.map(\.rawValue) == Array(1...37) + [1001, 1002])
        #expect(Array(SyncError.Code.allKnown.prefix(37)) == Self.ckErrorCodes.map(\.0))
        #expect(SyncError.Code.zoneKeyUnavailable.description == "zoneKeyUnavailable (1001)")
        #expect(SyncError.Code.decryptionFailed.name == "decryptionFailed")
    }

    @Test func unknownCodesKeepTheirRawValue() throws {
        let future = SyncError.Code(rawValue: 99)
        #expect(future.name == "code(99)")
        #expect(future.description == "code(99)")
        #expect(SyncError.Code(rawValue: 0).name == "code(0)")
        #expect(try jsonRoundTrip(future) == future)
    }

    @Test func codeEncodesAsBareInteger() throws {
        let json = try JSONEncoder().encode([SyncError.Code.serverRecordChanged])
        #expect(String(decoding: json, as: UTF8.self) == "[14]")
    }

    // F89: exactly seven codes are transient; operationCancelled is not one of them.
    @Test("F89 transient codes", arguments: SyncError.Code.allKnown)
    func transientCodes(code: SyncError.Code) {
        let expected: Set<SyncError.Code> = [
            .notAuthenticated, .accountTemporarilyUnavailable, .networkFailure, .networkUnavailable,
            .requestRateLimited, .serviceUnavailable, .zoneBusy,
        ]
        #expect(code.isTransient == expected.contains(code))
        #expect(SyncError(code).isTransient == code.isTransient)
    }

    // F89
    @Test func sevenTransientCodes() {
        #expect(SyncError.Code.transient.count == 7)
        #expect(!SyncError.Code.operationCancelled.isTransient)
        #expect(!SyncError.Code.serverRecordChanged.isTransient)  // F91
    }
}
