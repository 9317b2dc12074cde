import AsyncHTTPClient
import Foundation
import LogSyncServer
import LogSyncWire
import SyncModel

// Asset requests sent as bare as each transport allows, for comparing what a server answers
// about two digests byte for byte (Docs/Protocol.md, "Assets": a digest a zone does not have is
// answered as one that does not exist). `CloudDatabase.uploadAsset` and `downloadAsset` hide the
// answers a refusal would leak through (the status before the upload, the size of a content),
// so the suite asks through `ContractServer.assetAnswer(_:)` too.

/// One asset request that sends no content: the status of an upload, or the opening of a
/// download.
struct AssetProbe: Sendable {
    enum Kind: Sendable {
        /// `GET …/upload` (in process: `beginAssetUpload`, then `close`) announcing `size` bytes.
        case uploadStatus(size: Int64)
        /// `GET` of the content (in process: `openAssetDownload`).
        case download
    }

    var kind: Kind
    var user: UserID
    var device: DeviceID
    var scope: DatabaseScope
    var zoneID: RecordZone.ID
    var digest: AssetDigest
}

/// What a transport answered to an ``AssetProbe``, exactly.
enum AssetAnswer: Sendable, Equatable, CustomStringConvertible {
    /// In process: the upload's status.
    case upload(received: Int64, stored: Bool)
    /// In process: a download opened on a content of `size` bytes.
    case content(size: Int64)
    /// In process: the error thrown, whole.
    case error(SyncError)
    /// Over HTTP: the status, every header but `Date`, and the body (asked for in JSON, or the
    /// content's bytes in hexadecimal).
    case http(status: Int, headers: [String], body: String)

    /// This answer with `digest` written `<digest>` wherever it appears, so that the answers
    /// about two digests compare equal when they differ by nothing else.
    func masking(_ digest: AssetDigest) -> AssetAnswer {
        func mask(_ text: String) -> String { text.replacingOccurrences(of: digest.hex, with: "<digest>") }
        switch self {
        case .upload, .content:
            return self
        case .error(var error):
            error.message = mask(error.message)
            error.cause = error.cause.map(mask)
            return .error(error)
        case .http(let status, let headers, let body):
            return .http(status: status, headers: headers.map(mask), body: mask(body))
        }
    }

    /// The error's code, for an in-process error or an HTTP answer carrying one.
    var code: SyncError.Code? {
        switch self {
        case .error(let error): error.code
        case .http(_, _, let body): (try? Wire.decode(SyncError.self, from: Array(body.utf8), as: .json))?.code
        case .upload, .content: nil
        }
    }

    var description: String {
        switch self {
        case .upload(let received, let stored): "upload(received: \(received), stored: \(stored))"
        case .content(let size): "content(size: \(size))"
        case .error(let error): "error(\(error.code): \(error.message))"
        case .http(let status, let headers, let body): "HTTP \(status) \(headers) \(body)"
        }
    }
}

extension SyncServer {
    /// The in-process answer to `probe`.
    func assetAnswer(_ probe: AssetProbe) async -> AssetAnswer {
        do {
            switch probe.kind {
            case .uploadStatus(let size):
                let upload = try await beginAssetUpload(
                    user: probe.user, scope: probe.scope, zoneID: probe.zoneID, digest: probe.digest, size: size,
                    device: probe.device)
                defer { upload.close() }
                return .upload(received: upload.received, stored: upload.isStored)
            case .download:
                let download = try await openAssetDownload(
                    user: probe.user, scope: probe.scope, zoneID: probe.zoneID, digest: probe.digest,
                    device: probe.device)
                return .content(size: download.size)
            }
        } catch let error as SyncError {
            return .error(error)
        } catch {
            return .error(SyncError(.internalError, "\(error)"))
        }
    }
}

extension HTTPContractServer {
    /// The HTTP answer to `probe`: a bare request with the user's bearer token and the device's
    /// header, asking for JSON.
    func assetAnswer(_ probe: AssetProbe) async throws -> AssetAnswer {
        let path: String
        let query: String
        switch probe.kind {
        case .uploadStatus(let size):
            path = WireProtocol.assetUploadPath(probe.digest, scope: probe.scope)
            query = WireProtocol.assetQuery(zoneID: probe.zoneID, size: size)
        case .download:
            path = WireProtocol.assetPath(probe.digest, scope: probe.scope)
            query = WireProtocol.assetQuery(zoneID: probe.zoneID)
        }
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(running.port)\(path)?\(query)")
        request.method = .GET
        request.headers.add(name: WireProtocol.authorizationHeader, value: "Bearer \(try token(of: probe.user))")
        request.headers.add(name: WireProtocol.deviceHeader, value: probe.device.rawValue)
        request.headers.add(name: "Accept", value: WireFormat.json.mediaType)
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        var buffer = try await response.body.collect(upTo: 64 << 20)
        let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
        let isJSON = response.headers.first(name: "Content-Type")?.hasPrefix(WireFormat.json.mediaType) == true
        return .http(
            status: Int(response.status.code),
            headers: response.headers.filter { $0.name.lowercased() != "date" }.map { "\($0.name): \($0.value)" },
            body: isJSON ? String(decoding: bytes, as: UTF8.self) : bytes.map { String(format: "%02x", $0) }.joined())
    }
}
