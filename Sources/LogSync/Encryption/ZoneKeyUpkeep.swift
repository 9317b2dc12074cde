import Foundation
import Logging
import SyncModel

/// The engine's side of encrypted fields (F129, Docs/Encryption.md): opened values are sealed
/// with the zone's key just before a request, and sealed values opened as soon as they arrive, so
/// the device log and the delegate see plaintext and the server only ciphertext. The zone keys
/// are kept up: fetched and opened, wrapped for the zone's new recipients, made for a zone that
/// has none, and rotated when a recipient went.
///
/// Used by ``SendFlow`` (sealing, and opening the server's record of a conflict) and
/// ``FetchFlow`` (opening, and refreshing the keys once per fetch).
struct ZoneKeyUpkeep: Sendable {
    /// The database, whose key directory (``ZoneKeyDirectory``) keeps the wrapped zone keys.
    let database: any CloudDatabase
    /// The device key and the zone keys this device holds.
    let keyring: ZoneKeyring
    let logger: Logger

    /// The database's key directory.
    ///
    /// - Throws: ``SyncError`` `badDatabase` when the database has none.
    private func keyDirectory() throws(SyncError) -> any ZoneKeyDirectory {
        guard let directory = database as? any ZoneKeyDirectory else {
            throw SyncError(.badDatabase, "this database keeps no zone keys, which encrypted fields need")
        }
        return directory
    }

    /// Registers the device's public key once per launch.
    private func registerDeviceKey(_ directory: any ZoneKeyDirectory) async throws(SyncError) {
        let pair = try keyring.pair()
        guard keyring.needsRegistration else { return }
        do {
            try await directory.registerDeviceKey(pair.publicKey)
        } catch {
            throw SyncError.from(error, during: "registerDeviceKey")
        }
        keyring.markRegistered()
        logger.debug("registered \(pair.publicKey)")
    }

    /// Fetches the keys of `zoneIDs` (every zone with keys, for `nil`), opens the wraps addressed
    /// to this device, and wraps the versions it holds for the recipients that lack them: the
    /// user's other devices and the zone's participants' devices. When a recipient of the latest
    /// version is no longer one of the zone's (a participant removed), it rotates: it makes the
    /// next version, wrapped for the remaining recipients only, and new seals use it.
    ///
    /// - Returns: each zone's keys as the server keeps them after this device's wraps.
    /// - Throws: ``SyncError`` for a failure of a whole request.
    @discardableResult
    func refreshZoneKeys(_ zoneIDs: [RecordZone.ID]?) async throws(SyncError) -> [RecordZone.ID: ZoneKeys] {
        let directory = try keyDirectory()
        try await registerDeviceKey(directory)
        let pair = try keyring.pair()
        let myID = pair.publicKey.keyID
        let response: FetchZoneKeysResponse
        do {
            response = try await directory.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: zoneIDs))
        } catch {
            throw SyncError.from(error, during: "fetchZoneKeys")
        }
        var zones: [RecordZone.ID: ZoneKeys] = [:]
        var toSave: [WrappedZoneKey] = []
        var rotated: [ZoneKey] = []
        for (zoneID, result) in response.results.sorted(by: { $0.key.description < $1.key.description }) {
            guard case .success(let keys) = result else { continue }
            zones[zoneID] = keys
            for wrap in keys.wrappedKeys
            where wrap.recipientKeyID == myID && keyring.key(zoneID, version: wrap.version) == nil {
                do throws(SyncError) {
                    keyring.insert(try pair.unwrap(wrap))
                } catch {
                    logger.warning("\(error)")
                }
            }
            let held = keyring.keys(zoneID)
            let recipients = Dictionary(keys.recipients.map { ($0.keyID, $0) }, uniquingKeysWith: { first, _ in first })
            let latest = keys.latestVersion
            if latest > 0, held[latest] != nil {
                let wrappedFor = Set(keys.wrappedKeys.filter { $0.version == latest }.map(\.recipientKeyID))
                if !wrappedFor.isSubset(of: Set(recipients.keys)) && latest >= WrappedZoneKey.maxVersion {
                    // The server's number leaves no next version (servers refuse one this high).
                    logger.error(
                        "cannot rotate the key of \(zoneID): its latest version, \(latest), leaves no next version")
                } else if !wrappedFor.isSubset(of: Set(recipients.keys)) {
                    // A recipient went: the versions it had stay readable to it, the next not.
                    let next = ZoneKey.generate(zoneID: zoneID, version: latest + 1)
                    logger.info(
                        "rotating the key of \(zoneID) to version \(next.version): a recipient is no longer one of the zone's"
                    )
                    toSave += recipients.values.sorted { $0.keyID < $1.keyID }.map { next.wrapped(for: $0) }
                    rotated.append(next)
                }
            }
            for (version, key) in keyring.keys(zoneID).sorted(by: { $0.key < $1.key }) where version <= latest {
                let wrappedFor = Set(keys.wrappedKeys.filter { $0.version == version }.map(\.recipientKeyID))
                for recipient in recipients.values.sorted(by: { $0.keyID < $1.keyID })
                where !wrappedFor.contains(recipient.keyID) {
                    toSave.append(key.wrapped(for: recipient))
                }
            }
        }
        if !toSave.isEmpty {
            let saved = try await save(toSave, directory)
            for wrap in saved { zones[wrap.zoneID, default: ZoneKeys()].wrappedKeys.append(wrap) }
            // A rotation counts once the server kept its wrap for this device: if another device
            // rotated first, the server kept that key, and the next refresh brings it.
            for key in rotated
            where saved.contains(where: {
                $0.id.zoneID == key.zoneID && $0.version == key.version && $0.recipientKeyID == myID
                    && Array($0.check) == key.check
            }) {
                keyring.insert(key)
            }
        }
        return zones
    }

    /// Saves wraps, 400 a request; wraps the server refuses are logged and left out.
    private func save(
        _ wraps: [WrappedZoneKey], _ directory: any ZoneKeyDirectory
    ) async throws(SyncError) -> [WrappedZoneKey] {
        var saved: [WrappedZoneKey] = []
        var start = 0
        while start < wraps.count {
            let chunk = Array(wraps[start..<min(start + Limits.maxItemsPerRequest, wraps.count)])
            start += chunk.count
            let response: SaveZoneKeysResponse
            do {
                response = try await directory.saveZoneKeys(SaveZoneKeysRequest(keys: chunk))
            } catch {
                throw SyncError.from(error, during: "saveZoneKeys")
            }
            for wrap in chunk {
                switch response.results[wrap.id] {
                case .success(let kept)?: saved.append(kept)
                case .failure(let error)?: logger.warning("\(wrap) not saved: \(error)")
                case nil: logger.warning("\(wrap) not saved: the server's response has no result for it")
                }
            }
        }
        logger.debug("saved \(saved.count) wrapped zone keys")
        return saved
    }

    /// The key new seals in `zoneID` use: the latest version on the server, made here (version 1,
    /// wrapped for every recipient) when the zone has none.
    ///
    /// - Throws: ``SyncError``: `zoneKeyUnavailable` when the zone's latest key is not wrapped for
    ///   this device yet; a failure of a request.
    func sealingKey(for zoneID: RecordZone.ID) async throws(SyncError) -> ZoneKey {
        for attempt in 0..<2 {
            let keys = try await refreshZoneKeys([zoneID])[zoneID] ?? ZoneKeys()
            let latest = keys.latestVersion
            if latest > 0 {
                guard let key = keyring.key(zoneID, version: latest) else {
                    throw SyncError(
                        .zoneKeyUnavailable,
                        "version \(latest) of the key of \(zoneID) is not wrapped for this device yet; another device of the zone wraps it when it next syncs",
                        item: .zone(zoneID))
                }
                return key
            }
            // The zone has no key: this device makes the first, wrapped for every recipient. If
            // another device made one meanwhile, the server keeps that one and the next turn
            // takes it.
            let pair = try keyring.pair()
            var recipients = keys.recipients
            if !recipients.contains(where: { $0.keyID == pair.publicKey.keyID }) { recipients.append(pair.publicKey) }
            let key = ZoneKey.generate(zoneID: zoneID, version: 1)
            let saved = try await save(recipients.map { key.wrapped(for: $0) }, try keyDirectory())
            if saved.contains(where: { $0.recipientKeyID == pair.publicKey.keyID && Array($0.check) == key.check }) {
                keyring.insert(key)
                logger.info("made the key of \(zoneID), wrapped for \(saved.count) devices")
                return key
            }
            logger.debug("the first key of \(zoneID) was made by another device (attempt \(attempt + 1))")
        }
        throw SyncError(.zoneKeyUnavailable, "the key of \(zoneID) could not be made or fetched", item: .zone(zoneID))
    }

    /// Seals the opened encrypted values of the prepared batch's records: each record that has
    /// them is checked (an encrypted reference or asset fails, F129) and sealed with its zone's
    /// current key; the sealed copies go into the request only. A record whose zone key cannot
    /// be had fails with that error, and the batch's other items still go.
    func sealEncryptedValues(_ prepared: inout PreparedBatch) async {
        guard prepared.batch.recordsToSave.contains(where: { !$0.openedEncryptedKeys.isEmpty }) else { return }
        var zoneKeys: [RecordZone.ID: Result<ZoneKey, SyncError>] = [:]
        var failed: Set<Record.ID> = []
        for record in prepared.batch.recordsToSave where !record.openedEncryptedKeys.isEmpty {
            let zoneID = record.recordID.zoneID
            do throws(SyncError) {
                try record.validate()
                if zoneKeys[zoneID] == nil {
                    do throws(SyncError) {
                        zoneKeys[zoneID] = .success(try await sealingKey(for: zoneID))
                    } catch {
                        zoneKeys[zoneID] = .failure(error)
                    }
                }
                let key = try zoneKeys[zoneID]!.get()
                prepared.sealed[record.recordID] = try record.mappingEncryptedValues { field, value throws(SyncError) in
                    guard case .opened(let plaintext) = value else { return value }
                    return .sealed(key.seal(plaintext, recordID: record.recordID, key: field))
                }
            } catch {
                var error = error
                if error.item == nil || error.item != .record(record.recordID) {
                    error.message = "\(record.recordID): \(error.message)"
                    error.item = .record(record.recordID)
                }
                prepared.failedSaves[record.recordID] = error
                failed.insert(record.recordID)
            }
        }
        guard !failed.isEmpty else { return }
        prepared.batch.recordsToSave.removeAll { failed.contains($0.recordID) }
        if prepared.batch.atomicByZone { prepared.failZoneMates() }
    }

    /// `record` with its sealed values opened, fetching the zone's keys once when a version is
    /// missing.
    ///
    /// - Throws: ``SyncError`` naming the record and field: `zoneKeyUnavailable` when the key's
    ///   version is not wrapped for this device (yet), `decryptionFailed` when a value does not
    ///   open.
    func openingEncryptedValues(_ record: Record) async throws(SyncError) -> Record {
        guard record.hasEncryptedValues else { return record }
        let zoneID = record.recordID.zoneID
        let missesAKey = record.allKeys().contains { key in
            if case .encrypted(.sealed(let sealed))? = record[key] {
                keyring.key(zoneID, version: sealed.keyVersion) == nil
            } else {
                false
            }
        }
        if missesAKey { try await refreshZoneKeys([zoneID]) }
        return try record.mappingEncryptedValues { field, value throws(SyncError) in
            guard case .sealed(let sealed) = value else { return value }
            guard let key = keyring.key(zoneID, version: sealed.keyVersion) else {
                throw SyncError(
                    .zoneKeyUnavailable,
                    "encrypted field \(quoted(field)) of \(record.recordID) is sealed under version \(sealed.keyVersion) of the zone's key, which is not wrapped for this device yet",
                    item: .record(record.recordID))
            }
            return .opened(try key.open(sealed, recordID: record.recordID, key: field))
        }
    }

    /// Opens the fetched page's records. A record whose key this device does not hold yet stops
    /// the zone's fetch (`zoneKeyUnavailable`: the page is neither logged nor delivered, the token
    /// stays, and a later fetch, once another device has wrapped the key for this one, gets it
    /// again); a record that does not open with the right key (`decryptionFailed`: changed
    /// ciphertext) is left out of the page and its error returned, so that the zone's other
    /// records still arrive.
    ///
    /// - Returns: the page's records opened, and the errors of the records left out.
    func openingEncryptedValues(
        _ modifications: [RecordZoneChange.Modification]
    ) async throws(SyncError) -> (modifications: [RecordZoneChange.Modification], failures: [SyncError]) {
        guard modifications.contains(where: { $0.record.hasEncryptedValues }) else { return (modifications, []) }
        var opened: [RecordZoneChange.Modification] = []
        var failures: [SyncError] = []
        for modification in modifications {
            do throws(SyncError) {
                opened.append(
                    RecordZoneChange.Modification(record: try await openingEncryptedValues(modification.record)))
            } catch  where error.code == .decryptionFailed {
                logger.error("\(error)")
                failures.append(error)
            }
        }
        return (opened, failures)
    }

    /// The record with the server's sealed values replaced by the opened ones `sent` had at the
    /// same keys, when the server answers a save with the record as sent.
    static func restoringOpenedValues(_ saved: Record, from sent: Record) -> Record {
        guard saved.hasEncryptedValues else { return saved }
        var copy = saved
        for key in saved.allKeys() {
            guard case .encrypted(.sealed)? = saved[key], case .encrypted(.opened(let plaintext))? = sent[key] else {
                continue
            }
            copy.setValueKeepingChangeState(.encrypted(.opened(plaintext)), forKey: key)
        }
        return copy
    }
}

extension ZoneKeyUpkeep {
    /// The key upkeep of a send or a fetch, from the engine's context.
    init(_ context: EngineContext) {
        self.init(database: context.database, keyring: context.keyring, logger: context.logger)
    }
}
