import ArgumentParser
import Foundation
import LogSyncHTTPServer
import LogSyncServer

/// `logsync-server user`: the users of the token file.
struct User: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the users who may connect.",
        subcommands: [Add.self])

    /// `logsync-server user add USER`: a new token for a user.
    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give USER a new bearer token, append it to the token file and print it.",
            discussion: """
                The token is printed alone on standard output, for scripts:

                    TOKEN=$(logsync-server user add alice --data ./data)

                A user may have several tokens (one per device, say). A running server picks up \
                the new token on its next request that presents it. The token file is created \
                readable by its owner only; keep it private.
                """)

        @Argument(help: ArgumentHelp("The user ID: any text on one line, such as an e-mail address.", valueName: "user"))
        var user: String

        @OptionGroup var data: DataOptions

        func run() throws {
            let token = TokenStore.generateToken()
            do {
                try TokenStore.append(token: token, user: UserID(user), to: data.tokensURL)
            } catch {
                FileHandle.standardError.write(Data("logsync-server: error: \(error)\n".utf8))
                throw ExitCode.failure
            }
            print(token)
        }
    }
}
