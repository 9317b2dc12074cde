import ChildProcesses
import Foundation
import LogSyncIdentity
import LogSyncServer
import TemporaryDirectory
import Testing

/// `logsync-server dev-issuer` and `logsync-server --identity-config`, as processes.
@Suite("logsync-server dev-issuer and --identity-config")
struct DevIssuerProcessTests {
    @Test(
        "dev-issuer init prints a configuration that trusts the tokens dev-issuer sign prints",
        arguments: ["rs256", "es256", "eddsa"])
    func initAndSign(_ algorithm: String) async throws {
        try await withTemporaryDirectory { directory in
            let issuer = directory.appendingPathComponent("issuer").path
            let made = try await ChildProcess.run(
                ["dev-issuer", "init", "--directory", issuer, "--algorithm", algorithm])
            #expect(made.status == 0, "\(made)")
            let configuration = try IdentityConfiguration.decode(Data(made.output.utf8))
            let signed = try await ChildProcess.run(
                ["dev-issuer", "sign", "--directory", issuer, "--subject", "alice", "--audience", "logsync-dev"])
            #expect(signed.status == 0, "\(signed)")
            let token = signed.output.trimmingCharacters(in: .whitespacesAndNewlines)

            let verifier = try configuration.verifier(relativeTo: directory)
            #expect(try await verifier.verify(token).user == UserID(rawValue: "dev:alice"))

            // A second init would replace the key the configuration trusts: refused.
            let again = try await ChildProcess.run(["dev-issuer", "init", "--directory", issuer])
            #expect(again.status != 0)
            #expect(again.errorOutput.contains("exists already"), "\(again)")
        }
    }

    @Test("dev-issuer serve publishes its keys by OpenID discovery on loopback")
    func serveDiscovery() async throws {
        try await withTemporaryDirectory { directory in
            let issuer = directory.appendingPathComponent("issuer").path
            #expect(try await ChildProcess.run(["dev-issuer", "init", "--directory", issuer]).status == 0)
            let signed = try await ChildProcess.run(
                ["dev-issuer", "sign", "--directory", issuer, "--subject", "bob", "--audience", "logsync-dev"])
            let server = try ChildProcess.start(["dev-issuer", "serve", "--directory", issuer, "--port", "0"])
            let port = try await server.waitForPort()
            let verifier = try JWTIdentityVerifier(issuers: [
                TrustedIssuer(
                    name: "dev", issuer: "logsync-dev-issuer", audiences: ["logsync-dev"],
                    keys: .discovery(URL(string: "http://127.0.0.1:\(port)/.well-known/openid-configuration")!))
            ])
            let identity = try await verifier.verify(signed.output.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(identity.user == UserID(rawValue: "dev:bob"))
            _ = try await server.terminate()
        }
    }

    @Test("logsync-server checks --identity-config at start: a wrong field stops it, named; a good file is logged")
    func serverFlag() async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data").path
            let bad = directory.appendingPathComponent("bad.json")
            try Data(
                #"{"issuers":[{"name":"a:b","issuer":"i","audiences":["x"],"jwksFile":"k.json"}]}"#.utf8
            ).write(to: bad)
            let refused = try await ChildProcess.run(["--data", data, "--port", "0", "--identity-config", bad.path])
            #expect(refused.status != 0)
            #expect(refused.errorOutput.contains("issuers[0].name"), "\(refused)")

            let issuer = directory.appendingPathComponent("issuer").path
            let made = try await ChildProcess.run(["dev-issuer", "init", "--directory", issuer])
            let good = directory.appendingPathComponent("identity.json")
            try Data(made.output.utf8).write(to: good)
            let server = try ChildProcess.start(["--data", data, "--port", "0", "--identity-config", good.path])
            try await server.waitForErrorLine(containing: "identity tokens", "issuers=dev")
            _ = try await server.terminate()
        }
    }
}
