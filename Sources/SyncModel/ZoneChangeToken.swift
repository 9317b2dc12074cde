import Foundation

/// A position in one zone's change feed: everything before it has been fetched.
///
/// The analogue of the `CKServerChangeToken` of a zone change fetch (F141, F142). It carries the
/// zone's ID, the zone's incarnation (a zone deleted and re-created is a new incarnation, F149)
/// and an offset in the server database's log. Clients treat it as opaque, store it with
/// ``data`` and hand it back; the server rejects a token of another zone, of a deleted
/// incarnation, or a ``DatabaseChangeToken``.
///
/// ```swift
/// let token = try ZoneChangeToken(data: saved)   // throws on garbage or a database token
/// ```
public struct ZoneChangeToken: ChangeToken {
    /// The zone whose feed this token is a position in.
    public let zoneID: RecordZone.ID
    /// The zone's incarnation when the token was issued; changes when the zone is re-created.
    ///
    /// For the server and for debugging; clients must not infer anything from it (F142).
    public let incarnation: UInt64
    /// The offset in the server database's log up to which the zone's changes have been fetched.
    ///
    /// For the server and for debugging; clients must not infer anything from it (F142).
    public let offset: ChangeOffset

    /// The identity of the database that issued the token, so a server can refuse another
    /// database's token (0: unspecified). The server's choice; clients never look at it.
    package let database: UInt64

    /// For a page token of a zone listed without a token: where the listing began (the end of
    /// the log at its first page); 0 for every other token. The server's choice; clients never
    /// look at it.
    ///
    /// The client held nothing of the zone when the listing began, so the listing leaves out the
    /// deletions up to there (F100), and it needs none of their tombstones: a compaction up to
    /// the listing start does not expire the token, even when its offset is older (F144).
    package let listingStart: ChangeOffset

    /// Creates a token; only the server makes tokens.
    package init(
        zoneID: RecordZone.ID, incarnation: UInt64, offset: ChangeOffset, database: UInt64 = 0,
        listingStart: ChangeOffset = .zero
    ) {
        self.zoneID = zoneID
        self.incarnation = incarnation
        self.offset = offset
        self.database = database
        self.listingStart = listingStart
    }

    /// Reads a token from its stable binary form.
    ///
    /// - Parameter data: Bytes made by ``data``.
    /// - Throws: ``SyncError`` with code `invalidArguments` naming the problem: too short, not a
    ///   token, an unsupported version, a checksum mismatch, a database token, a malformed zone
    ///   ID, trailing bytes.
    public init(data: Data) throws(SyncError) {
        var (version, database, offset, body) = try TokenCoding.decode(data, expecting: .zone)
        let truncated = SyncError(.invalidArguments, "invalid zone token: truncated or malformed zone fields")
        let incarnation = try body.readUInt64(or: truncated)
        var listingStart = ChangeOffset.zero
        if version >= TokenCoding.listingVersion {
            listingStart = ChangeOffset(try body.readUInt64(or: truncated))
            guard listingStart != .zero else {
                throw SyncError(.invalidArguments, "invalid zone token: a version-3 token without a listing start")
            }
        }
        let zoneName = try body.readString(or: truncated)
        let ownerName = try body.readString(or: truncated)
        guard body.isAtEnd else {
            throw SyncError(.invalidArguments, "invalid zone token: \(body.remaining) unexpected trailing bytes")
        }
        self.init(
            zoneID: RecordZone.ID(zoneName: zoneName, ownerName: ownerName), incarnation: incarnation,
            offset: ChangeOffset(offset), database: database, listingStart: listingStart)
    }

    /// The token's stable binary form, which ``init(data:)`` reads back: version 3 with a
    /// listing start, otherwise version 2.
    public var data: Data {
        let version = listingStart == .zero ? TokenCoding.version : TokenCoding.listingVersion
        return TokenCoding.encode(kind: .zone, version: version, database: database, offset: offset.rawValue) {
            writer in
            writer.append(incarnation)
            if listingStart != .zero { writer.append(listingStart.rawValue) }
            writer.append(zoneID.zoneName)
            writer.append(zoneID.ownerName)
        }
    }

    /// A one-line rendering, such as `ZoneChangeToken(zone "Notes", incarnation 1, offset 42)`,
    /// with `, listing from 57` for a page token of a listing.
    public var description: String {
        "ZoneChangeToken(\(zoneID), incarnation \(incarnation), offset \(offset)"
            + (listingStart == .zero ? ")" : ", listing from \(listingStart))")
    }
}
