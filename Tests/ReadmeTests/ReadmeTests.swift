import Foundation
import TestSupport
import Testing

/// The README as a newcomer meets it: short, its first-screen examples run as written, and
/// every file it (or any other document of the repository) links to exists.
@Suite("README")
struct ReadmeTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func readme() throws -> String {
        try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    /// The fenced blocks of `markdown` whose info string is `language`, in order.
    static func blocks(_ language: String, in markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```\(language)" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test("the README fits in 400 lines and opens with the two set-up commands")
    func shortWithSetUpFirst() throws {
        let readme = try Self.readme()
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 400, "README.md has \(lines.count) lines")
        let first = try #require(Self.blocks("sh", in: readme).first)
        #expect(first == ".ci/setup && swift run dpctl demo     # the main job: a narrated tour of the device\n"
                + ".ci/setup && swift test               # the test suite\n")
    }

    @Test("the README's Swift example is Tests/ReadmeExample/main.swift, byte for byte, and runs")
    func swiftExampleRuns() throws {
        let example = try #require(Self.blocks("swift", in: try Self.readme()).first)
        let program = try String(contentsOf: Self.root.appendingPathComponent("Tests/ReadmeExample/main.swift"), encoding: .utf8)
        #expect(example == program, "the README's first Swift block and Tests/ReadmeExample/main.swift differ")

        let temporary = try TemporaryDirectory()
        let result = try ChildProcess.run(ChildProcess.executable("ReadmeExample"), [], environment: ["TMPDIR": temporary.url.path])
        #expect(result.status == 0, "ReadmeExample: \(result.standardError)")
        #expect(result.standardOutput.hasPrefix("protectedDataUnavailable ") && result.standardOutput.contains("the device is locked"),
                "printed: \(result.standardOutput)")
        let stores = try FileManager.default.contentsOfDirectory(atPath: temporary.url.path)
        #expect(stores.count == 1 && stores[0].hasPrefix("my-store-"), "made: \(stores)")
    }

    @Test("the README's CLI quick start runs as written, and leaves the device locked")
    func commandLineQuickStartRuns() throws {
        let readme = try Self.readme()
        let quickStart = try #require(Self.blocks("sh", in: readme).first { $0.contains("dpctl init") })
        let home = try TemporaryDirectory()
        let runtime = home.url.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let dpctl = ChildProcess.executable("dpctl")
        var environment = ProcessInfo.processInfo.environment
        for name in environment.keys where name.hasPrefix("DPCTL_") || name.hasPrefix("XDG_") { environment[name] = nil }
        environment["HOME"] = home.url.path
        environment["XDG_DATA_HOME"] = home.url.appendingPathComponent("data").path
        environment["XDG_STATE_HOME"] = home.url.appendingPathComponent("state").path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["DPCTL_PASSCODE"] = "1234"   // what a user types at the two prompts
        environment["PATH"] = dpctl.deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        defer { _ = try? ChildProcess.run(dpctl, ["agent", "stop"], fullEnvironment: environment) }

        let script = "set -euo pipefail\n" + quickStart
        let result = try ChildProcess.run(URL(fileURLWithPath: "/bin/bash"), ["-c", script], fullEnvironment: environment)
        #expect(result.status == 0, "the quick start failed (\(result.status)): \(result.standardError)")
        #expect(result.standardOutput.contains("dear diary\n"), "cat printed: \(result.standardOutput)")

        let status = try ChildProcess.run(dpctl, ["status", "--json"], fullEnvironment: environment)
        #expect(status.status == 0, "status: \(status.standardError)")
        #expect(status.standardOutput.contains(#""state" : "locked""#) || status.standardOutput.contains(#""state":"locked""#),
                "status after the quick start: \(status.standardOutput)")
    }
}
