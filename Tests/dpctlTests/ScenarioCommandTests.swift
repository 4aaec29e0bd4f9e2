import Foundation
import Testing

@Suite("dpctl scenario run")
struct ScenarioCommandTests {
    /// A temporary directory with scenario files, removed by the caller.
    static func files(_ contents: [String: String]) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-scenarios-\(UUID().uuidString)")
        for (name, text) in contents {
            let url = directory.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
        return directory
    }

    static let passing = """
        scenario "complete file locks with the device"
        device passcode=1234 grace=10s
        unlock 1234
        open Documents/log.txt as h create class=complete
        h.write "hello"
        lock
        advance 10s
        get Documents/log.txt -> error protectedDataUnavailable
        unlock 1234
        get Documents/log.txt -> "hello"

        scenario "class none is available before first unlock"
        device
        put d.txt "D" class=none
        get d.txt -> "D"
        """

    static let failing = """
        scenario "passes"
        device
        unlock

        scenario "expects the wrong state"
        device
        unlock
        lock
        expect state unlocked
        """

    @Test("all passing: one PASS line each, the counts, exit 0")
    func allPass() throws {
        let directory = try Self.files(["a.scenario": Self.passing])
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try DPCtlRunner.run(["scenario", "run", directory.appendingPathComponent("a.scenario").path])
        #expect(result.status == 0, "stderr: \(result.standardError)")
        #expect(result.standardOutput == """
            PASS complete file locks with the device
            PASS class none is available before first unlock
            2 passed, 0 failed

            """)
        #expect(result.standardError.isEmpty)
    }

    @Test("a failing scenario: FAIL line with file:line, the others still run, exit 1")
    func someFail() throws {
        let directory = try Self.files(["a.scenario": Self.passing, "sub/b.scenario": Self.failing])
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try DPCtlRunner.run(["scenario", "run", directory.path])
        #expect(result.status == 1)
        #expect(result.standardOutput == """
            PASS complete file locks with the device
            PASS class none is available before first unlock
            PASS passes
            FAIL expects the wrong state (\(directory.path)/sub/b.scenario:9): expected state unlocked, got state locked
            3 passed, 1 failed

            """)
    }

    @Test("a syntax error: one FAIL line for its scenario naming file:line:column, the others run, exit 1")
    func syntaxError() throws {
        let directory = try Self.files(["bad.scenario": "scenario \"x\"\ndevice grace=ten\nunlock\nscenario \"y\"\ndevice\nunlock\n"])
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("bad.scenario").path
        let result = try DPCtlRunner.run(["scenario", "run", path])
        #expect(result.status == 1)
        #expect(result.standardOutput == """
            FAIL x (\(path):2:14): expected a duration such as 10s (units ms, s, m, h, d), found `grace=ten`
            PASS y
            1 passed, 1 failed

            """)
    }

    @Test("--json prints the same report as JSON")
    func json() throws {
        let directory = try Self.files(["b.scenario": Self.failing])
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("b.scenario").path
        let result = try DPCtlRunner.run(["scenario", "run", "--json", path])
        #expect(result.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(object["passed"] as? Int == 1)
        #expect(object["failed"] as? Int == 1)
        let scenarios = try #require(object["scenarios"] as? [[String: Any]])
        #expect(scenarios.map { $0["status"] as? String } == ["pass", "fail"])
        #expect(scenarios[1]["summary"] as? String == "FAIL expects the wrong state (\(path):9): expected state unlocked, got state locked")
        let failure = try #require(scenarios[1]["failure"] as? [String: Any])
        #expect(failure["file"] as? String == path)
        #expect(failure["line"] as? Int == 9)
    }

    @Test("--json exits 0 when everything passes")
    func jsonPassing() throws {
        let directory = try Self.files(["a.scenario": Self.passing])
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try DPCtlRunner.run(["scenario", "run", directory.path, "--json"])
        #expect(result.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(object["passed"] as? Int == 2)
        #expect(object["failed"] as? Int == 0)
    }

    @Test("a missing path fails with status 1; no path is a usage error")
    func badArguments() throws {
        let missing = try DPCtlRunner.run(["scenario", "run", "/nonexistent/x.scenario"])
        #expect(missing.status == 1)
        #expect(missing.standardOutput.hasSuffix("0 passed, 1 failed\n"))
        let none = try DPCtlRunner.run(["scenario", "run"])
        #expect(none.status == 64)
    }
}
