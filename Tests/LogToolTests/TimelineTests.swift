import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The timeline of several devices and their server (`Timeline`, `logtool timeline`) on the
/// logs of real engines: the story of `DeviceDumpCommandTests` and the seeded simulation.
@Suite("logtool timeline")
struct TimelineTests {
    /// The story's timeline: phone, laptop and alice's private database.
    static func storyTimeline(
        _ server: SyncServer, _ phone: TestDevice, _ laptop: TestDevice, options: Timeline.Options = .init()
    ) throws -> Timeline {
        try Timeline.build(
            devices: [
                .init(name: "phone", log: phone.engine.deviceLog.log),
                .init(name: "laptop", log: laptop.engine.deviceLog.log),
            ],
            server: .init(name: "server", log: try server.admin.log(of: "alice")), options: options)
    }

    /// The laptop's refused save is marked where it happened: after the server's
    /// `requestOutcome` that refused it (which is marked too), and linked to it; its batch
    /// points to the same request, and the phone's batch to the entries its save created.
    @Test func theConflictIsWhereItHappened() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, server, phone, laptop in
            let timeline = try Self.storyTimeline(server, phone, laptop)
            #expect(timeline.lanes.map(\.name) == ["server", "phone", "laptop"])
            #expect(timeline.lanes.map(\.role) == [.server, .device, .device])
            #expect(timeline.steps.map(\.column) == Array(0..<timeline.steps.count))

            let conflicts = timeline.steps.filter { $0.marks.contains(.conflict) }
            let onLaptop = try #require(
                conflicts.first { timeline.lanes[$0.lane].name == "laptop" }, "\(timeline.text)")
            let onServer = try #require(conflicts.first { $0.lane == 0 }, "\(timeline.text)")
            #expect(conflicts.count == 2, "\(timeline.text)")
            #expect(onLaptop.kindName == "batchResult")
            #expect(onServer.kindName == "requestOutcome")
            // The refused request deleted n2 in the same commit: the answer spans both entries.
            #expect(onLaptop.serverOffsets?.upperBound == onServer.offset)
            #expect(
                timeline.steps.contains {
                    $0.lane == 0 && $0.offset == onLaptop.serverOffsets?.lowerBound && $0.kindName == "recordDeleted"
                })
            #expect(onLaptop.serverRelation == .answered)
            #expect(onLaptop.column > onServer.column, "the answer comes after the server refused")
            #expect(onLaptop.serverPosition >= onServer.offset)
            let batch = try #require(timeline.steps.last { $0.lane == onLaptop.lane && $0.kindName == "batchPrepared" })
            #expect(batch.column < onServer.column)
            #expect(batch.request == onServer.request)
            #expect(batch.serverRelation == .sent)

            // Every phone batch points to the recordSaved entries it created and its requestOutcome.
            for step in timeline.steps
            where timeline.lanes[step.lane].name == "phone" && step.kindName == "batchPrepared" {
                let range = try #require(step.serverOffsets, "\(timeline.text)")
                let server = timeline.steps.filter { $0.lane == 0 && range.contains($0.offset) }
                #expect(server.last?.kindName == "requestOutcome")
                #expect(server.last?.request == step.request)
                #expect(server.allSatisfy { $0.column > step.column })
            }
            // A fetched page spans the offsets it read, and comes after the last of them.
            let page = try #require(timeline.steps.first { $0.kindName == "zoneChangesFetched" })
            let read = try #require(page.serverOffsets)
            #expect(read.lowerBound == LogOffset(1))
            #expect(page.serverRelation == .read)
            let lastRead = try #require(timeline.steps.first { $0.lane == 0 && $0.offset == read.upperBound })
            #expect(lastRead.column < page.column)
        }
    }

    /// `--record` keeps the steps about one record; `--from`/`--to` a range of server offsets.
    @Test func narrowingByRecordAndServerOffsets() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, server, phone, laptop in
            let n2 = try Self.storyTimeline(server, phone, laptop, options: .init(record: "n2"))
            #expect(!n2.steps.isEmpty)
            for step in n2.steps {
                if step.lane == 0 {
                    #expect(["recordSaved", "recordDeleted", "requestOutcome"].contains(step.kindName), "\(n2.text)")
                } else {
                    #expect(step.recordNames.contains("n2"), "\(n2.text)")
                }
            }
            #expect(n2.steps.contains { $0.lane == 0 && $0.kindName == "recordDeleted" }, "\(n2.text)")
            #expect(n2.steps.map(\.column) == Array(0..<n2.steps.count))

            let range = try Self.storyTimeline(
                server, phone, laptop, options: .init(serverOffsets: LogOffset(5)...LogOffset(7)))
            for step in range.steps where step.lane == 0 { #expect((5...7).contains(step.offset.rawValue)) }
            for step in range.steps where step.lane != 0 {
                #expect((4...7).contains(step.serverPosition.rawValue), "\(range.text)")
            }
        }
    }

    /// The SVG is well-formed XML with one band per lane in its fixed colour, one group per step
    /// (on the lane and at the offset the model says), the conflicts marked, and a link per
    /// device step linked to a shown server entry.
    @Test func theSVGParses() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { _, server, phone, laptop in
            let timeline = try Self.storyTimeline(server, phone, laptop)
            let svg = try SVGSummary(timeline.svg)
            #expect(svg.rootWidth > 0)
            #expect(svg.lanes.map(\.name) == ["server", "phone", "laptop"])
            #expect(svg.lanes.map(\.fill) == [Timeline.Picture.serverFill] + Timeline.Picture.deviceFills.prefix(2))
            #expect(svg.steps.count == timeline.steps.count)
            for (parsed, step) in zip(svg.steps, timeline.steps) {
                #expect(parsed.lane == timeline.lanes[step.lane].name)
                #expect(parsed.offset == step.offset.rawValue)
                #expect(parsed.detail.contains(step.kindName))
                #expect(parsed.title == parsed.detail)
            }
            #expect(
                svg.steps.filter { $0.classes.contains("mark-conflict") }.map(\.lane).sorted() == ["laptop", "server"])
            #expect(svg.links > 0)

            // The page embeds the same picture, with its hover script.
            let html = timeline.html
            #expect(html.hasPrefix("<!DOCTYPE html>"))
            #expect(html.contains(timeline.svg))
            #expect(html.contains("addEventListener(\"mouseenter\""))
        }
    }

    /// Text that XML must escape stays XML.
    @Test func escapesXML() {
        let timeline = Timeline(lanes: [], steps: [], serverRange: nil, record: nil)
        #expect(timeline.xml("a<b & \"c\" 'd'>\u{1}") == "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\\u{1}")
    }

    /// `logtool timeline` writes text, JSON, and the page or the picture to a file.
    @Test func theCommand() async throws {
        try await DeviceDumpCommandTests.withDeviceStory { directory, server, phone, laptop in
            let model = try Self.storyTimeline(server, phone, laptop)
            let serverArguments = ["--server", "data/users/u1", "--server-log", "private"]
            let text = try await runLogtool(
                ["timeline", "phone", "laptop", "--format", "text"] + serverArguments, in: directory)
            #expect(text.status == 0, "\(text)")
            #expect(text.lines.first == "timeline: 3 lanes, \(model.steps.count) steps", "\(text)")
            #expect(
                text.lines.contains {
                    $0.contains("laptop") && $0.contains("batchResult") && $0.contains("!conflict")
                        && $0.contains("(answered)")
                }, "\(text)")

            let json = try await runLogtool(["timeline", "phone", "laptop", "--json"] + serverArguments, in: directory)
            #expect(json.status == 0, "\(json)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
            let steps = try #require(object["steps"] as? [[String: Any]])
            #expect(steps.count == model.steps.count)
            #expect(
                steps.contains { ($0["marks"] as? [String]) == ["conflict"] && ($0["lane"] as? String) == "laptop" })
            #expect(json.standardOutput.hasPrefix("{\"lanes\":[{\"name\":\"server\",\"role\":\"server\","), "\(json)")

            let page = try await runLogtool(
                ["timeline", "phone", "laptop", "--output", "picture.html"] + serverArguments, in: directory)
            #expect(page.status == 0, "\(page)")
            #expect(page.lines == ["wrote the timeline (3 lanes, \(model.steps.count) steps) to picture.html"])
            let written = try String(contentsOf: directory.appendingPathComponent("picture.html"), encoding: .utf8)
            #expect(written.hasPrefix("<!DOCTYPE html>"))
            let svg = try await runLogtool(["timeline", "phone", "--format", "svg"], in: directory)
            #expect(svg.status == 0, "\(svg)")
            #expect(try SVGSummary(svg.standardOutput).lanes.map(\.name) == ["phone"])

            let usage = try await runLogtool(["timeline", "phone", "--from", "3"], in: directory)
            #expect(usage.status == 64, "\(usage)")
            #expect(usage.standardError.contains("--from and --to are server offsets: give --server"), "\(usage)")
        }
    }

    /// On the seeded simulation's logs (three devices, faults, restarts, account switches):
    /// every conflict a device recorded is placed after the server's refusal it links to.
    @Test func simulationConflictsFollowTheirRefusal() async throws {
        try await withTemporaryDirectory { directory in
            let simulation = try Simulation(seed: 5, directory: directory)
            _ = try await simulation.run()
            let timeline = try Timeline.build(
                devices: simulation.devices.map { .init(name: $0.name, log: $0.engine.deviceLog.log) },
                server: .init(name: "server", log: try simulation.server.admin.log(of: "alice")))
            var linked = 0
            for step in timeline.steps where step.lane > 0 && step.marks.contains(.conflict) {
                // bob's database, or an answer the server log does not hold
                guard let range = step.serverOffsets else { continue }
                let refusal = try #require(timeline.steps.first { $0.lane == 0 && $0.offset == range.upperBound })
                #expect(refusal.kindName == "requestOutcome")
                #expect(refusal.column < step.column, "\(step)")
                linked += 1
            }
            #expect(timeline.steps.count > 500)
            #expect(linked > 0, "seed 5 should hold a conflict in alice's database")
        }
    }
}

/// What the tests read of the SVG, with Foundation's `XMLParser`.
struct SVGSummary {
    struct Lane {
        var name: String
        var fill: String
    }
    struct Step {
        var lane: String
        var offset: UInt64
        var detail: String
        var title: String
        var classes: [String]
    }

    var rootWidth = 0
    var lanes: [Lane] = []
    var steps: [Step] = []
    var links = 0

    struct ParseFailure: Error, CustomStringConvertible { var description: String }

    init(_ text: String) throws {
        let parser = XMLParser(data: Data(text.utf8))
        let delegate = Delegate()
        parser.delegate = delegate
        guard parser.parse() else {
            throw ParseFailure(
                description: "the SVG is not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "?")")
        }
        self = delegate.summary
    }

    final class Delegate: NSObject, XMLParserDelegate {
        var summary = SVGSummary(empty: ())
        var stack: [String] = []
        var currentLane: String?
        var inStepTitle = false
        var title = ""

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let classes = (attributes["class"] ?? "").split(separator: " ").map(String.init)
            if name == "svg", stack.isEmpty { summary.rootWidth = Int(attributes["width"] ?? "") ?? 0 }
            if name == "g", classes.contains("lane") { currentLane = attributes["data-lane"] }
            if name == "rect", let lane = currentLane, stack.last == "g" {
                summary.lanes.append(Lane(name: lane, fill: attributes["fill"] ?? ""))
            }
            if name == "g", classes.contains("step") {
                summary.steps.append(
                    Step(
                        lane: attributes["data-lane"] ?? "", offset: UInt64(attributes["data-offset"] ?? "") ?? 0,
                        detail: attributes["data-detail"] ?? "", title: "", classes: classes))
            }
            if name == "title", stack.last == "g", !summary.steps.isEmpty, currentLane == nil {
                inStepTitle = true
                title = ""
            }
            if name == "polygon", classes.contains("link") { summary.links += 1 }
            stack.append(name)
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if inStepTitle { title += string }
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            stack.removeLast()
            if name == "title", inStepTitle {
                summary.steps[summary.steps.count - 1].title = title
                inStepTitle = false
            }
            if name == "g" { currentLane = nil }
        }
    }

    private init(empty: Void) {}
}
