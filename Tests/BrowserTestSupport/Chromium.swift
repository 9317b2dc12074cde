import ChildProcesses
import Foundation

/// The headless Chromium of the browser tests (Debian's `chromium` package).
///
/// A browser test runs when Chromium is installed, and must run when `LOGSYNC_BROWSER_TESTS=1`
/// (`.ci/run` installs Chromium and sets it, so CI never skips one); elsewhere it is skipped,
/// with that reason in the test report. `CHROMIUM_PATH` names another binary.
public enum Chromium {
    /// The browser's path, if one is installed.
    public static let path: String? = {
        if let path = ProcessInfo.processInfo.environment["CHROMIUM_PATH"] { return path }
        return ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }()

    /// Whether the browser tests must run (`LOGSYNC_BROWSER_TESTS=1`).
    public static var required: Bool { ProcessInfo.processInfo.environment["LOGSYNC_BROWSER_TESTS"] == "1" }

    /// Whether a browser test runs: Chromium is installed, or the tests are required (and fail
    /// without it).
    public static var enabled: Bool { path != nil || required }

    /// Why a browser test is skipped.
    public static let skipReason =
        "Chromium is not installed (apt-get install chromium); CI sets LOGSYNC_BROWSER_TESTS=1"

    /// The options of a headless run with its profile in `directory`.
    public static func headless(profileIn directory: URL) -> [String] {
        [
            "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--user-data-dir=\(directory.appendingPathComponent("chromium").path)",
        ]
    }
}
