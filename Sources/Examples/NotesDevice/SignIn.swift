import ArgumentParser
import Foundation
import LogSync
import LogSyncHTTP

extension NotesDeviceCommand {
    /// `notes-device sign-in`: the device's session, from an identity token.
    struct SignIn: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-in",
            abstract: "Sign the device in with an identity token from the app's identity provider.",
            discussion: """
                The server checks the token (`logsync-server --identity-config`) and answers a \
                session for this device, kept in DATA/session.json (readable by its owner only). \
                Every later command uses it and refreshes it by itself; --token or LOGSYNC_TOKEN, \
                when given, is used instead. Signing in again replaces the session.
                """)

        @OptionGroup var options: DeviceOptions

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The identity token, a JWT (default: $LOGSYNC_IDENTITY_TOKEN), such as `logsync-server dev-issuer sign` prints.",
                valueName: "jwt"))
        var identityToken: String?

        @Option(name: .long, help: ArgumentHelp("The name the user's device list shows.", valueName: "text"))
        var name: String?

        var token: String? {
            (identityToken ?? ProcessInfo.processInfo.environment["LOGSYNC_IDENTITY_TOKEN"]).map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }

        func validate() throws {
            guard token?.isEmpty == false else {
                throw ValidationError("give the identity token with --identity-token or in LOGSYNC_IDENTITY_TOKEN")
            }
        }

        func run() async throws {
            try FileManager.default.createDirectory(at: options.directory, withIntermediateDirectories: true)
            do {
                let tokens = try await options.session.signIn(identityToken: token ?? "", name: name)
                print("\(options.device): signed in as \(tokens.user)")
            } catch let error as SyncError {
                throw NotesDeviceError("\(options.device): could not sign in: \(explain(error))")
            }
        }
    }

    /// `notes-device sign-out`: ends the device's session.
    struct SignOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign-out",
            abstract: "Sign the device out: the server ends its session, and DATA/session.json is removed.",
            discussion: "The notes stay on the device. Its other devices are not affected.")

        @OptionGroup var options: DeviceOptions

        func run() async throws {
            do {
                try await options.session.signOut()
            } catch let error as SyncError {
                throw NotesDeviceError("\(options.device): could not sign out: \(explain(error))")
            }
            print("\(options.device): signed out")
        }
    }
}
