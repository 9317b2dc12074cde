import Foundation
import LogSyncIdentity
import TemporaryDirectory
import Testing

@Suite("Identity configuration files")
struct IdentityConfigurationTests {
    static let directory = URL(fileURLWithPath: "/etc/logsync", isDirectory: true)

    /// The error of the configuration `json`, whichever step finds it.
    static func error(_ json: String) -> IdentityConfigurationError? {
        do {
            let configuration = try IdentityConfiguration.decode(Data(json.utf8))
            _ = try configuration.options()
            _ = try configuration.verifier(relativeTo: directory)
            return nil
        } catch {
            return error
        }
    }

    @Test("a complete file gives its issuers and limits; a relative jwksFile is the file's neighbour")
    func complete() throws {
        let configuration = try IdentityConfiguration.decode(
            Data(
                """
                {"leewaySeconds": 30, "refetchFloorSeconds": 120, "fetchTimeoutSeconds": 5, "maximumTokenBytes": 4096,
                 "issuers": [
                   {"name": "apple", "issuer": "https://appleid.apple.com", "audiences": ["com.example.notes"],
                    "jwksURL": "https://appleid.apple.com/auth/keys"},
                   {"name": "corp", "issuer": "https://login.example.com", "audiences": ["notes", "notes-web"],
                    "userClaim": "email", "discovery": "https://login.example.com/.well-known/openid-configuration"},
                   {"name": "dev", "issuer": "logsync-dev-issuer", "audiences": ["logsync-dev"], "jwksFile": "dev/jwks.json"}
                 ]}
                """.utf8))
        let options = try configuration.options()
        #expect(options.leeway == .seconds(30))
        #expect(options.refetchFloor == .seconds(120))
        #expect(options.fetchTimeout == .seconds(5))
        #expect(options.maximumTokenBytes == 4096)
        let issuers = try configuration.trustedIssuers(relativeTo: Self.directory)
        #expect(issuers.map(\.name) == ["apple", "corp", "dev"])
        #expect(issuers[0].keys == .jwksURL(URL(string: "https://appleid.apple.com/auth/keys")!))
        #expect(issuers[0].userClaim == "sub")
        #expect(issuers[1].userClaim == "email")
        #expect(issuers[2].keys == .jwksFile(URL(fileURLWithPath: "/etc/logsync/dev/jwks.json")))

        let defaults = try IdentityConfiguration.decode(
            Data(#"{"issuers":[{"name":"a","issuer":"i","audiences":["x"],"jwksFile":"/k.json"}]}"#.utf8)
        ).options()
        #expect(defaults == JWTIdentityVerifier.Options())
        #expect(defaults.leeway == .seconds(60))
        #expect(defaults.refetchFloor == .seconds(30))
        #expect(defaults.maximumTokenBytes == 8192)
    }

    static let issuer = #""issuer":"https://id.example","audiences":["app"],"jwksURL":"https://id.example/keys""#

    @Test(
        "a wrong file is refused naming the field",
        arguments: [
            ("not json", "", "is not JSON"),
            (#"{"issuers": []}"#, "issuers", "at least one issuer"),
            (#"{}"#, "issuers", "at least one issuer"),
            (#"{"issuers": {"name": "a"}}"#, "issuers", "must be a list"),
            (
                #"{"issuers": [{"issuer":"https://id.example","audiences":["app"],"jwksURL":"https://id.example/keys"}]}"#,
                "issuers[0].name", "is missing"
            ),
            (#"{"issuers": [{"name": "", \#(issuer)}]}"#, "issuers[0].name", "must not be empty"),
            (#"{"issuers": [{"name": "a:b", \#(issuer)}]}"#, "issuers[0].name", "must not contain \":\""),
            (#"{"issuers": [{"name": 7, \#(issuer)}]}"#, "issuers[0].name", "must be a string"),
            (
                #"{"issuers": [{"name": "a", "issuer":"https://id.example","audiences":[],"jwksURL":"https://id.example/keys"}]}"#,
                "issuers[0].audiences", "at least one audience"
            ),
            (
                #"{"issuers": [{"name": "a", "issuer":"https://id.example","audiences":["app",""],"jwksURL":"https://id.example/keys"}]}"#,
                "issuers[0].audiences[1]", "must not be empty"
            ),
            (
                #"{"issuers": [{"name": "a", "issuer":"https://id.example","audiences":"app","jwksURL":"https://id.example/keys"}]}"#,
                "issuers[0].audiences", "must be a list"
            ),
            (
                #"{"issuers": [{"name": "a", "issuer":"https://id.example","audiences":["app"]}]}"#, "issuers[0]",
                "one of jwksFile, jwksURL or discovery"
            ),
            (
                #"{"issuers": [{"name": "a", "jwksFile": "k.json", \#(issuer)}]}"#, "issuers[0].jwksFile, jwksURL",
                "not several"
            ),
            (
                #"{"issuers": [{"name": "a", "issuer":"https://id.example","audiences":["app"],"jwksURL":"http://id.example/keys"}]}"#,
                "issuers[0].jwksURL", "must be https"
            ),
            (
                #"{"issuers": [{"name": "a", "issuer":"https://id.example","audiences":["app"],"discovery":"ftp://id.example/d"}]}"#,
                "issuers[0].discovery", "must be https"
            ),
            (
                #"{"issuers": [{"name": "a", \#(issuer)}, {"name": "a", "issuer":"https://other.example","audiences":["app"],"jwksFile":"k.json"}]}"#,
                "issuers[1].name", "names two issuers"
            ),
            (
                #"{"issuers": [{"name": "a", \#(issuer)}, {"name": "b", \#(issuer)}]}"#, "issuers[1].issuer",
                "the iss of two issuers"
            ),
            (#"{"leewaySeconds": -1, "issuers": [{"name": "a", \#(issuer)}]}"#, "leewaySeconds", "0 or more"),
            (#"{"leewaySeconds": "60", "issuers": [{"name": "a", \#(issuer)}]}"#, "leewaySeconds", "must be a number"),
            (#"{"fetchTimeoutSeconds": 0, "issuers": [{"name": "a", \#(issuer)}]}"#, "fetchTimeoutSeconds", "above 0"),
            (
                #"{"maximumTokenBytes": 10, "issuers": [{"name": "a", \#(issuer)}]}"#, "maximumTokenBytes",
                "at least 256"
            ),
        ])
    func wrongFile(_ json: String, field: String, problem: String) {
        let error = Self.error(json)
        #expect(error?.field == field, "\(json): \(String(describing: error))")
        #expect(error?.problem.contains(problem) == true, "\(json): \(String(describing: error))")
    }

    @Test("plain http is for loopback keys only")
    func loopback() throws {
        for url in ["http://127.0.0.1:8080/jwks.json", "http://localhost/jwks.json", "http://[::1]:9/jwks.json"] {
            _ = try TrustedIssuer(name: "dev", issuer: "dev", audiences: ["a"], keys: .jwksURL(URL(string: url)!))
        }
        for url in ["http://10.0.0.1/jwks.json", "http://127.0.0.1.example.com/jwks.json", "http://example.com/k"] {
            #expect(throws: IdentityConfigurationError.self) {
                try TrustedIssuer(name: "dev", issuer: "dev", audiences: ["a"], keys: .jwksURL(URL(string: url)!))
            }
        }
    }

    @Test("a file that cannot be read names its path")
    func unreadable() throws {
        try withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("identity.json")
            let error = #expect(throws: IdentityConfigurationError.self) {
                try IdentityConfiguration.load(from: missing)
            }
            #expect(error?.problem.contains(missing.path) == true)
        }
    }
}
