import ArgumentParser
import Foundation
import Hummingbird
import LogSyncIdentity
import Logging

/// `logsync-server dev-issuer`: a local identity issuer for development and tests. Its
/// directory holds a private key (`signing-key.pem`), what it signs as (`issuer.json`) and the
/// public key set (`jwks.json`) a server trusts through `--identity-config`.
struct DevIssuer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-issuer",
        abstract: "A local identity issuer for development and tests: a key, signed tokens, its JWKS on loopback.",
        discussion: """
            `dev-issuer init --directory D` makes a signing key and D/jwks.json and prints an \
            --identity-config file that trusts it; `dev-issuer sign --directory D --subject alice \
            --audience A` prints a signed identity token; `dev-issuer serve --directory D --port P` \
            serves the key set and an OpenID discovery document on 127.0.0.1. Never for \
            production: the private key sits in a plain file.
            """,
        subcommands: [Init.self, Sign.self, ServeKeys.self])

    /// What `issuer.json` holds: how the issuer signs.
    struct Settings: Codable {
        var issuer: String
        var kid: String
        var algorithm: DevelopmentSigningKey.Algorithm
    }

    struct Directory: ParsableArguments {
        @Option(name: .long, help: ArgumentHelp("The issuer's directory.", valueName: "dir"))
        var directory: String

        var url: URL { URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL }
        var keyFile: URL { url.appendingPathComponent("signing-key.pem") }
        var settingsFile: URL { url.appendingPathComponent("issuer.json") }
        var jwksFile: URL { url.appendingPathComponent("jwks.json") }

        func settings() throws -> Settings {
            do {
                return try JSONDecoder().decode(Settings.self, from: Data(contentsOf: settingsFile))
            } catch {
                throw ValidationError(
                    "\(settingsFile.path) is not a dev issuer's (run `logsync-server dev-issuer init --directory \(directory)`): \(error)"
                )
            }
        }

        func key() async throws -> (Settings, DevelopmentSigningKey) {
            let settings = try settings()
            let pem = try String(contentsOf: keyFile, encoding: .utf8)
            return (
                settings,
                try await DevelopmentSigningKey(algorithm: settings.algorithm, kid: settings.kid, privatePEM: pem)
            )
        }
    }

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a signing key and its JWKS in a directory, and print a configuration that trusts it.")

        @OptionGroup var directory: Directory

        @Option(name: .long, help: "The signature algorithm: rs256, es256 or eddsa.")
        var algorithm = DevelopmentSigningKey.Algorithm.es256.rawValue

        func validate() throws {
            guard DevelopmentSigningKey.Algorithm(rawValue: algorithm) != nil else {
                throw ValidationError("--algorithm must be rs256, es256 or eddsa, not \(algorithm)")
            }
        }

        @Option(name: .long, help: ArgumentHelp("The iss of the tokens it signs.", valueName: "iss"))
        var issuer = "logsync-dev-issuer"

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The issuer's name in the printed configuration: its users are NAME:subject.", valueName: "name"))
        var name = "dev"

        @Option(name: .long, help: ArgumentHelp("The audience in the printed configuration.", valueName: "aud"))
        var audience = "logsync-dev"

        func run() async throws {
            let algorithm = DevelopmentSigningKey.Algorithm(rawValue: algorithm) ?? .es256
            let url = directory.url
            if FileManager.default.fileExists(atPath: directory.keyFile.path) {
                throw ValidationError("\(directory.keyFile.path) exists already: this directory has its issuer")
            }
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            let kid = "dev-\(algorithm.rawValue)-\(UInt32.random(in: .min ... .max))"
            let key = try await DevelopmentSigningKey.generate(algorithm, kid: kid)
            try Data(key.privatePEM.utf8).write(to: directory.keyFile, options: .withoutOverwriting)
            _ = chmod(directory.keyFile.path, 0o600)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(Settings(issuer: issuer, kid: kid, algorithm: algorithm)).write(
                to: directory.settingsFile)
            try DevelopmentSigningKey.jwks([key]).write(to: directory.jwksFile)
            let configuration = IdentityConfiguration(issuers: [
                .init(name: name, issuer: issuer, audiences: [audience], jwksFile: directory.jwksFile.path)
            ])
            print(String(decoding: try encoder.encode(configuration), as: UTF8.self))
            FileHandle.standardError.write(
                Data(
                    """
                    logsync-server: dev issuer \(issuer) (\(algorithm.jwtName), kid \(kid)) in \(url.path); \
                    save the configuration above for --identity-config, or name the keys by \
                    "discovery": "http://127.0.0.1:PORT/.well-known/openid-configuration" while \
                    `dev-issuer serve` runs\n
                    """.utf8))
        }
    }

    struct Sign: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print an identity token signed by the issuer.")

        @OptionGroup var directory: Directory

        @Option(name: .long, help: ArgumentHelp("The sub claim: the user's ID at this issuer.", valueName: "id"))
        var subject: String

        @Option(name: .long, help: ArgumentHelp("The aud claim.", valueName: "aud"))
        var audience: String

        @Option(name: .long, help: ArgumentHelp("How long the token is valid.", valueName: "seconds"))
        var expiresIn = 3600

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The email claim, marked verified: the server registers it at sign-in, for share invitations.",
                valueName: "address"))
        var email: String?

        func validate() throws {
            guard expiresIn > 0 else { throw ValidationError("--expires-in must be above 0, not \(expiresIn)") }
            guard !subject.isEmpty else { throw ValidationError("--subject must not be empty") }
        }

        func run() async throws {
            let (settings, key) = try await directory.key()
            let now = Date()
            let token = try await key.sign(
                IdentityTokenClaims(
                    issuer: settings.issuer, subject: subject, audiences: [audience],
                    expires: now.addingTimeInterval(Double(expiresIn)), issuedAt: now,
                    other: email.map { ["email": $0, "email_verified": "true"] } ?? [:]))
            print(token)
        }
    }

    struct ServeKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "Serve the issuer's JWKS (/jwks.json) and OpenID discovery document on 127.0.0.1 until SIGINT.")

        @OptionGroup var directory: Directory

        @Option(name: .long, help: ArgumentHelp("The TCP port; 0 picks a free one (logged).", valueName: "n"))
        var port = 0

        func run() async throws {
            let settings = try directory.settings()
            let jwks = try Data(contentsOf: directory.jwksFile)
            let logger = Logger(label: "logsync-server dev-issuer")
            let boundPort = PortBox()
            let router = Router()
            router.get("jwks.json") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: jwks)))
            }
            router.get(".well-known/openid-configuration") { _, _ in
                let document = [
                    "issuer": settings.issuer, "jwks_uri": "http://127.0.0.1:\(boundPort.port)/jwks.json",
                ]
                let body = try JSONSerialization.data(
                    withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
            }
            let app = Application(
                router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
                onServerRunning: { channel in
                    let port = channel.localAddress?.port ?? 0
                    boundPort.set(port)
                    FileHandle.standardError.write(
                        Data("logsync-server: dev issuer listening host=127.0.0.1 port=\(port)\n".utf8))
                }, logger: logger)
            try await app.runService()
        }
    }
}

/// The port the dev issuer bound, once it has.
private final class PortBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    var port: Int { lock.withLock { value } }
    func set(_ port: Int) { lock.withLock { value = port } }
}
