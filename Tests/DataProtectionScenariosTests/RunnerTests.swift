import DataProtection
@testable import DataProtectionScenarios
import Foundation
import Testing

@Suite("Scenario runner")
struct RunnerTests {
    @Test("a deliberately wrong scenario fails at its line, saying what was expected and what happened")
    func wrongScenario() {
        let report = Support.run("""
            scenario "right"
            device
            unlock

            scenario "wrong"
            device passcode=1234
            unlock 1234
            put a.txt "hello" class=complete
            lock
            get a.txt -> "hello"
            expect state unlocked

            scenario "also right"
            device
            """, file: "wrong.scenario")
        #expect(report.passed == 2)
        #expect(report.failed == 1)
        let failure = report.results[1]
        #expect(failure.summary == "FAIL wrong (wrong.scenario:10): expected \"hello\", got error protectedDataUnavailable (The complete class key is not available.)"
                || failure.summary.hasPrefix("FAIL wrong (wrong.scenario:10): expected \"hello\", got error protectedDataUnavailable ("))
        #expect(failure.failure?.statement == "get a.txt -> \"hello\"")
        #expect(failure.stepsRun == 4, "the scenario stops at its first failing step")
        #expect(report.text.hasPrefix("PASS right\nFAIL wrong (wrong.scenario:10): "))
        #expect(report.text.hasSuffix("\nPASS also right\n2 passed, 1 failed\n"))
    }

    @Test("expectation mismatches of every kind read as expected …, got …", arguments: [
        ("put a \"x\" -> error fileExists", "expected error fileExists, got ok"),
        ("get nothing", "expected ok, got error fileNotFound ("),
        ("get a -> \"y\"", "expected \"y\", got \"x\""),
        ("get a -> error notPermitted", "expected error notPermitted, got \"x\""),
        ("ls / -> b", "expected b, got a"),
        ("ls / -> empty", "expected empty, got a"),
        ("stat a -> class=complete size=1", "expected class=complete size=1, got class=completeUntilFirstUserAuthentication size=1 type=file"),
        ("expect state locked", "expected state locked, got state unlocked"),
        ("expect unavailable none completeUntilFirstUserAuthentication complete", "expected unavailable none completeUntilFirstUserAuthentication complete, got none, completeUntilFirstUserAuthentication, complete available"),
        ("expect events protectedDataWillBecomeUnavailable", "expected events protectedDataWillBecomeUnavailable, got events protectedDataDidBecomeAvailable"),
        ("expect failed-attempts 2", "expected failed-attempts 2, got failed-attempts 0"),
        ("expect protected-data-available false", "expected protected-data-available false, got protected-data-available true"),
        ("open a as h\nh.size -> 2", "expected 2, got 1"),
        ("open a as h\nopen a as h", "expected ok, got error invalidArgument ("),
    ])
    func mismatchMessages(statement: String, message: String) throws {
        let report = Support.run("scenario \"s\"\ndevice\nunlock\nput a \"x\"\n\(statement)\n")
        let failure = try #require(report.results.first?.failure)
        #expect(failure.message.hasPrefix(message), "\(failure.message)")
        #expect(failure.location.line == 4 + statement.split(separator: "\n").count)
    }

    @Test("large data mismatches name the first differing byte")
    func largeDataMismatch() throws {
        let report = Support.run("scenario \"s\"\ndevice\nunlock\nput a random:200:1\nget a -> random:200:2\n")
        let failure = try #require(report.results.first?.failure)
        #expect(failure.actual.contains("(200 bytes, expected 200; first difference at byte 0)"), "\(failure.actual)")
    }

    @Test("a syntax error fails its own scenario once, naming file:line:column; the file's other scenarios run")
    func syntaxError() throws {
        let report = Support.run("scenario \"a\"\ndevice\nlock\n\nscenario \"b\"\ndevice\nadvance 10x\n", file: "broken.scenario")
        try #require(report.results.count == 2, "\(report.text)")
        #expect(report.failed == 1)
        #expect(report.text == """
            PASS a
            FAIL b (broken.scenario:7:11): expected a duration unit (ms, s, m, h or d), found `10x`
            1 passed, 1 failed

            """)
        #expect(report.results[1].stepsRun == 0, "nothing of a scenario with a syntax error runs")
        #expect(report.results[1].location.line == 5, "the result is the scenario's, which starts at its `scenario` line")
    }

    @Test("syntax errors of every kind fail only their scenario (scenario language 1.1)")
    func syntaxErrorPerScenario() throws {
        let report = Support.run("""
            # before the first scenario
            unlock
            scenario "first"
            device
            unlock
            put a "x"
            get a -> "x"

            scenario "unterminated string"
            device
            put a "x
            get a -> "x"

            scenario "statement"
            device
            frobnicate

            scenario
            device

            scenario "unknown name"
            device
            h.read 1

            scenario "last"
            device
            unlock
            put a "y"
            get a -> "y"
            """, file: "mixed.scenario")
        let statements = "a statement (unlock, lock, reboot, crash, advance, set-passcode, change-passcode, remove-passcode, "
            + "erase, expect, mkdir, put, get, rm, mv, cp, ls, stat, set-class, open, db open, <handle>.<operation> or <db>.<operation>)"
        #expect(report.text == """
            FAIL mixed.scenario (mixed.scenario:2:1): expected `scenario "<title>"`, found `unlock`
            PASS first
            FAIL unterminated string (mixed.scenario:11:9): expected a closing quote, found end of line
            FAIL statement (mixed.scenario:16:1): expected \(statements), found `frobnicate`
            FAIL mixed.scenario (mixed.scenario:18:9): expected a title, found end of line
            FAIL unknown name (mixed.scenario:23:1): expected a handle opened earlier in this scenario (`open <path> as h`), found `h.read`
            PASS last
            2 passed, 5 failed

            """)
        // A line that does not lex still begins its scenario when its first word is `scenario`.
        let bytes = Data("scenario \"ok\"\ndevice\nscenario \"bad \\q\"\ndevice\nscenario \"after\"\ndevice\n".utf8)
        let split = Support.runner.run(contents: bytes, file: "lex.scenario")
        #expect(split.results.map(\.title) == ["ok", "lex.scenario", "after"])
        #expect(split.results.map(\.passed) == [true, false, true])
        var invalid = Data("scenario \"ok\"\ndevice\nscenario \"".utf8)
        invalid.append(contentsOf: [0xFF, 0x22, 0x0A])
        invalid.append(Data("device\nscenario \"after\"\ndevice\n".utf8))
        let utf8 = Support.runner.run(contents: invalid, file: "utf8.scenario")
        #expect(utf8.text == """
            PASS ok
            FAIL utf8.scenario (utf8.scenario:3:11): expected UTF-8 text, found an invalid byte sequence
            PASS after
            2 passed, 1 failed

            """)
    }

    @Test("names are bound when a statement runs: a failed open leaves the name as it was")
    func namesBoundAtRunTime() {
        let report = Support.run("""
            scenario "failed opens"
            device
            unlock
            db open a.db as d create
            d.exec "CREATE TABLE t(x); INSERT INTO t VALUES (7)"
            open missing as d -> error fileNotFound
            d.query "SELECT x FROM t" -> "7"
            db open a.db as d -> error invalidArgument
            d.query "SELECT x FROM t" -> "7"
            d.read 1 -> error invalidArgument
            d.close
            d.close
            db open missing.db as d -> error fileNotFound
            d.query "SELECT 1" -> error handleClosed
            open a.db as d mode=read
            d.read 6 -> "SQLite"
            d.query "SELECT 1" -> error invalidArgument
            d.close
            d.close
            """)
        #expect(report.text == "PASS failed opens\n1 passed, 0 failed\n", "\(report.text)")
    }

    @Test("ls is compared without the side files of databases in that directory, on both sides")
    func sideFiles() {
        #expect(ScenarioSession.sideFiles(in: ["a.db", "a.db-journal", "b.db-wal", "c", "c-wal", "d-journal-wal"]) == ["a.db-journal", "c-wal"])
        #expect(ScenarioSession.sideFiles(in: ["x-journal", "x-wal", "y"]).isEmpty, "no database of that name beside them")
        let report = Support.run("""
            scenario "side files"
            device
            unlock
            db open d/a.db as d create
            d.exec "BEGIN; CREATE TABLE t(x)"
            ls d -> a.db
            ls d -> a.db a.db-journal
            ls d -> a.db b
            """)
        #expect(report.results.first?.failure?.location.line == 8, "\(report.text)")
        #expect(report.results.first?.failure?.message == "expected a.db b, got a.db")
    }

    @Test("a device that cannot be created fails at the device line")
    func badDevice() throws {
        let report = Support.run("scenario \"s\"\ndevice erase-after=0\nunlock\n")
        let failure = try #require(report.results.first?.failure)
        #expect(failure.location.line == 2)
        #expect(failure.message.hasPrefix("expected ok, got error invalidArgument"))
    }

    @Test("paths: files and directories, missing paths fail, order is kept")
    func paths() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-paths-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("scenario \"b\"\ndevice\n".utf8).write(to: directory.appendingPathComponent("sub/b.scenario"))
        try Data("scenario \"a\"\ndevice\n".utf8).write(to: directory.appendingPathComponent("a.scenario"))
        try Data("not a scenario".utf8).write(to: directory.appendingPathComponent("notes.txt"))
        let report = Support.runner.run(paths: [directory.path, directory.path + "/missing.scenario"])
        #expect(report.results.map(\.title) == ["a", "b", directory.path + "/missing.scenario"])
        #expect(report.results.map(\.location.file).prefix(2) == [directory.path + "/a.scenario", directory.path + "/sub/b.scenario"])
        #expect(report.results[2].summary == "FAIL \(directory.path)/missing.scenario (\(directory.path)/missing.scenario): expected a .scenario file or a directory of them, got no such file or directory")
    }

    @Test("each scenario's temporary directory is removed afterwards")
    func cleansUp() throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("scenario-clean-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: parent) }
        let runner = ScenarioRunner(temporaryDirectory: parent, parallelism: 2)
        let report = runner.run(contents: Data("""
            scenario "passes"
            device
            unlock
            open a as h create class=complete
            h.write "x"
            lock
            scenario "fails"
            device
            put a "x" -> error fileExists
            """.utf8), file: "clean.scenario")
        #expect(report.passed == 1 && report.failed == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path).isEmpty)
    }

    @Test("the JSON report has the counts and each scenario's result")
    func json() throws {
        let report = Support.run("scenario \"ok\"\ndevice\n\nscenario \"ko\"\ndevice\nexpect state locked\n", file: "j.scenario")
        let object = try #require(try JSONSerialization.jsonObject(with: report.json()) as? [String: Any])
        #expect(object["passed"] as? Int == 1)
        #expect(object["failed"] as? Int == 1)
        let scenarios = try #require(object["scenarios"] as? [[String: Any]])
        #expect(scenarios.map { $0["title"] as? String } == ["ok", "ko"])
        #expect(scenarios.map { $0["status"] as? String } == ["pass", "fail"])
        let failure = try #require(scenarios[1]["failure"] as? [String: Any])
        #expect(failure["line"] as? Int == 6)
        #expect(failure["expected"] as? String == "state locked")
        #expect(failure["actual"] as? String == "state booted")
        #expect(failure["statement"] as? String == "expect state locked")
        #expect(failure["kind"] as? String == "expectation")
        #expect(scenarios[1]["summary"] as? String == "FAIL ko (j.scenario:6): expected state locked, got state booted")
        let decoded = try JSONDecoder().decode(ScenarioReport.self, from: report.json())
        #expect(decoded.text == report.text)
    }

    @Test("`device passcode=` starts booted with the passcode set and no events")
    func passcodeSetup() {
        let report = Support.run("""
            scenario "s"
            device passcode=1234
            expect state booted
            expect events
            expect failed-attempts 0
            unlock -> error incorrectPasscode
            unlock 1234
            expect events protectedDataDidBecomeAvailable
            """)
        #expect(report.succeeded, "\(report.text)")
    }
}
