import ChildProcesses
import Foundation
import Testing

/// `logsync-server dev-issuer` as the README uses it: a signing key in `directory/issuer`, a
/// configuration trusting it in `directory/identity.json`, and identity tokens it signs.
struct LocalIssuer {
    let directory: URL
    /// The file for `logsync-server --identity-config`.
    let configurationFile: URL

    /// `dev-issuer init` in `directory/issuer`.
    static func make(in directory: URL) async throws -> LocalIssuer {
        let issuer = directory.appendingPathComponent("issuer")
        let made = try await ChildProcess.run(["dev-issuer", "init", "--directory", issuer.path])
        #expect(made.status == 0, "\(made)")
        let configuration = directory.appendingPathComponent("identity.json")
        try Data(made.output.utf8).write(to: configuration)
        return LocalIssuer(directory: issuer, configurationFile: configuration)
    }

    /// An identity token for `subject`, vouching for `email` if given.
    func token(subject: String, email: String? = nil) async throws -> String {
        let signed = try await ChildProcess.run(
            ["dev-issuer", "sign", "--directory", directory.path, "--subject", subject, "--audience", "logsync-dev"]
                + (email.map { ["--email", $0] } ?? []))
        #expect(signed.status == 0, "\(signed)")
        return signed.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
