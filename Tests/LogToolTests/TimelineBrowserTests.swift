import BrowserTestSupport
import ChildProcesses
import Foundation
import LogSyncDiagnostics
import TemporaryDirectory
import Testing

/// The picture the README's main job draws (`swift run two-devices --automatic` writes
/// `timeline.html` beside its logs), looked at as a person would: rendered by a headless
/// Chromium (Debian's `chromium` package).
///
/// It runs when Chromium is installed, and must run when `LOGSYNC_BROWSER_TESTS=1` (`.ci/run`
/// installs Chromium and sets it, so CI never skips it); elsewhere it is skipped, with that
/// reason in the test report. `CHROMIUM_PATH` names another binary.
@Suite("the timeline picture in a browser")
struct TimelineBrowserTests {
    @Test(.enabled(if: Chromium.enabled, Comment(rawValue: Chromium.skipReason)))
    func theMainJobsPictureShowsItsLanes() async throws {
        let chromium = try #require(
            Chromium.path, "LOGSYNC_BROWSER_TESTS=1 but no Chromium: apt-get install -y chromium")
        try await withTemporaryDirectory { directory in
            var environment = ProcessInfo.processInfo.environment
            environment["TMPDIR"] = directory.path
            let run = try await ChildProcess.run(
                ["--automatic"], program: "two-devices", environment: environment, directory: directory)
            #expect(run.status == 0, "\(run)")
            // `  open /tmp/…/timeline.html in a browser (…)`
            let line = try #require(
                run.output.split(separator: "\n").first { $0.contains("timeline.html in a browser") }, "\(run)")
            let path = try #require(line.split(separator: " ").first { $0.hasSuffix("timeline.html") }).description
            #expect(path.hasPrefix(directory.path), "\(path)")
            let svg = try SVGSummary(
                try String(
                    contentsOf: URL(fileURLWithPath: path).deletingPathExtension().appendingPathExtension("svg"),
                    encoding: .utf8))
            #expect(svg.lanes.map(\.name) == ["server", "phone", "laptop"])
            #expect(svg.steps.contains { $0.lane == "laptop" && $0.classes.contains("mark-conflict") })

            // The page's script ran over every step.
            let browser = Chromium.headless(profileIn: directory)
            let dom = try await ChildProcess.run(
                browser + ["--dump-dom", "file://\(path)"], program: chromium, environment: environment,
                directory: directory)
            #expect(dom.status == 0, "\(dom)")
            #expect(
                dom.output.contains("data-steps=\"\(svg.steps.count)\""),
                "the script did not run: \(dom.output.prefix(400))")

            // The screenshot: each lane a band of its own colour, in order, the conflict in red.
            let png = directory.appendingPathComponent("picture.png")
            let width = svg.rootWidth + 40
            let shot = try await ChildProcess.run(
                browser + ["--screenshot=\(png.path)", "--window-size=\(width),420", "file://\(path)"],
                program: chromium,
                environment: environment, directory: directory)
            #expect(shot.status == 0, "\(shot)")
            let image = try PNGImage(try Data(contentsOf: png))
            #expect(image.width == width)
            let fills = [Timeline.Picture.serverFill] + Timeline.Picture.deviceFills.prefix(2)
            var bands: [ClosedRange<Int>] = []
            for fill in fills {
                let rows = image.rows(mostly: fill, share: 0.3)
                let band = try #require(rows.first.map { $0...rows.last! }, "no band of \(fill) in the screenshot")
                #expect(
                    band.count >= Timeline.Picture.laneHeight - 2 && band.count <= Timeline.Picture.laneHeight + 2,
                    "\(fill): rows \(band)")
                #expect(rows.count >= Timeline.Picture.laneHeight / 2, "\(fill): only \(rows.count) rows mostly of it")
                bands.append(band)
            }
            #expect(
                zip(bands, bands.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound },
                "lanes out of order: \(bands)")
            #expect(image.count(of: "#d32f2f") > 50, "no conflict marker in the screenshot")
        }
    }
}
