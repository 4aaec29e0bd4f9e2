import DataProtection
@testable import DataProtectionScenarios
import Foundation
import Testing

@Suite("Scenario parser")
struct ParserTests {
    /// A malformed file and where its error must be reported.
    struct Malformed: CustomTestStringConvertible, Sendable {
        var text: String
        var line: Int
        var column: Int
        /// A piece of what the error says was expected.
        var expected: String
        var found: String
        var testDescription: String { text.debugDescription }
    }

    static let malformed: [Malformed] = [
        Malformed(text: "", line: 1, column: 1, expected: "`scenario \"<title>\"`", found: "end of file"),
        Malformed(text: "# only a comment\n\n", line: 1, column: 1, expected: "`scenario", found: "end of file"),
        Malformed(text: "unlock\n", line: 1, column: 1, expected: "`scenario", found: "`unlock`"),
        Malformed(text: "scenario \"t\"\nunlock\n", line: 2, column: 1, expected: "`device`", found: "`unlock`"),
        Malformed(text: "scenario \"t\"\n", line: 2, column: 1, expected: "`device`", found: "end of file"),
        Malformed(text: "scenario\ndevice\n", line: 1, column: 9, expected: "a title", found: "end of line"),
        Malformed(text: "scenario \"t\"\ndevice grace=10x\n", line: 2, column: 16, expected: "a duration unit", found: "`grace=10x`"),
        Malformed(text: "scenario \"t\"\n\tdevice grace=1x\n", line: 2, column: 16, expected: "a duration unit", found: "`grace=1x`"),
        Malformed(text: "scenario \"t\"\ndevice speed=3\n", line: 2, column: 8, expected: "a device option", found: "`speed=3`"),
        Malformed(text: "scenario \"t\"\ndevice erase-after=x\n", line: 2, column: 20, expected: "a number of failed attempts", found: "`erase-after=x`"),
        Malformed(text: "scenario \"t\"\ndevice\ndevice\n", line: 3, column: 1, expected: "`device` only as the first statement", found: "`device`"),
        Malformed(text: "scenario \"t\"\ndevice\nadvance 10\n", line: 3, column: 9, expected: "a duration unit", found: "`10`"),
        Malformed(text: "scenario \"t\"\ndevice\nadvance\n", line: 3, column: 8, expected: "a duration", found: "end of line"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"abc\n", line: 3, column: 11, expected: "a closing quote", found: "end of line"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"x\\qy\"\n", line: 3, column: 9, expected: "an escape", found: "`\\q`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"\\x4\"\n", line: 3, column: 8, expected: "\\x and two hex digits", found: "`\\x4\"`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"x\"y\n", line: 3, column: 10, expected: "a space after the closing quote", found: "`y`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a hex:abc\n", line: 3, column: 7, expected: "an even number of hex digits", found: "`hex:abc`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a hex:abzz\n", line: 3, column: 13, expected: "a hex digit", found: "`hex:abzz`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a random:10\n", line: 3, column: 7, expected: "random:<size>:<seed>", found: "`random:10`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a random:10:x\n", line: 3, column: 17, expected: "a decimal seed", found: "`random:10:x`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a random:10XB:1\n", line: 3, column: 16, expected: "a size unit", found: "`random:10XB:1`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a words\n", line: 3, column: 7, expected: "data", found: "`words`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a\n", line: 3, column: 6, expected: "data", found: "end of line"),
        Malformed(text: "scenario \"t\"\ndevice\nput a -> ok\n", line: 3, column: 7, expected: "data", found: "`->`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"x\" class=secret\n", line: 3, column: 17, expected: "a class", found: "`class=secret`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"x\" mode=read\n", line: 3, column: 11, expected: "`class=<class>`", found: "`mode=read`"),
        Malformed(text: "scenario \"t\"\ndevice\nmkdir a class=none class=none\n", line: 3, column: 20, expected: "`class` only once", found: "`class=none`"),
        Malformed(text: "scenario \"t\"\ndevice\nfrobnicate\n", line: 3, column: 1, expected: "a statement", found: "`frobnicate`"),
        Malformed(text: "scenario \"t\"\ndevice\nh.read 1\n", line: 3, column: 1, expected: "a handle opened earlier", found: "`h.read`"),
        Malformed(text: "scenario \"t\"\ndevice\nopen a as h create\nh.jump\n", line: 4, column: 3, expected: "a handle operation", found: "`h.jump`"),
        Malformed(text: "scenario \"t\"\ndevice\nopen a as h mode=sideways\n", line: 3, column: 18, expected: "a mode", found: "`mode=sideways`"),
        Malformed(text: "scenario \"t\"\ndevice\nopen a at h\n", line: 3, column: 8, expected: "`as <handle>`", found: "`at`"),
        Malformed(text: "scenario \"t\"\ndevice\nopen a as h.x\n", line: 3, column: 11, expected: "a handle name", found: "`h.x`"),
        Malformed(text: "scenario \"t\"\ndevice\nget a -> error nope\n", line: 3, column: 16, expected: "an error code", found: "`nope`"),
        Malformed(text: "scenario \"t\"\ndevice\nlock -> \"x\"\n", line: 3, column: 9, expected: "`ok` or `error <code>`", found: "`\"x\"`"),
        Malformed(text: "scenario \"t\"\ndevice\nexpect state locked -> error fileNotFound\n", line: 3, column: 24, expected: "`ok` (expect statements", found: "`error`"),
        Malformed(text: "scenario \"t\"\ndevice\nls a -> ok b\n", line: 3, column: 12, expected: "end of line", found: "`b`"),
        Malformed(text: "scenario \"t\"\ndevice\nls a -> b empty\n", line: 3, column: 11, expected: "a name (a keyword as a name is written as a string", found: "`empty`"),
        Malformed(text: "scenario \"t\"\ndevice\nput a \"x\" ->\n", line: 3, column: 13, expected: "`ok` or `error <code>`", found: "end of line"),
        Malformed(text: "scenario \"t\"\ndevice\nstat a -> colour=red\n", line: 3, column: 11, expected: "class=<class>, size=<bytes> or type=file|directory", found: "`colour=red`"),
        Malformed(text: "scenario \"t\"\ndevice\nstat a -> type=pipe\n", line: 3, column: 16, expected: "file or directory", found: "`type=pipe`"),
        Malformed(text: "scenario \"t\"\ndevice\nexpect state sleeping\n", line: 3, column: 14, expected: "booted, locked or unlocked", found: "`sleeping`"),
        Malformed(text: "scenario \"t\"\ndevice\nexpect events protectedDataDidVanish\n", line: 3, column: 15, expected: "protectedDataWillBecomeUnavailable", found: "`protectedDataDidVanish`"),
        Malformed(text: "scenario \"t\"\ndevice\nexpect available\n", line: 3, column: 17, expected: "a class", found: "end of line"),
        Malformed(text: "scenario \"t\"\ndevice\nexpect protected-data-available maybe\n", line: 3, column: 33, expected: "true or false", found: "`maybe`"),
        Malformed(text: "scenario \"t\"\ndevice\nexpect failed-attempts -1\n", line: 3, column: 24, expected: "a number of failed attempts", found: "`-1`"),
        // Comments, blank lines and tabs do not shift lines or columns.
        Malformed(text: "# c\n\nscenario \"t\"\t# x\n\tdevice\n  unlock  nope extra  # comment\n", line: 5, column: 16,
                  expected: "end of statement", found: "`extra`"),
        Malformed(text: "scenario \"t\"\r\ndevice\r\nlock lock\r\n", line: 3, column: 6, expected: "end of statement", found: "`lock`"),
        // A name takes the operations of what the opens before it could make it (scenario language 1.1).
        Malformed(text: "scenario \"t\"\ndevice\nopen a as h\nh.query \"SELECT 1\"\n", line: 4, column: 3,
                  expected: "a handle operation", found: "`h.query`"),
        Malformed(text: "scenario \"t\"\ndevice\ndb open a as d\nd.read 1\n", line: 4, column: 3,
                  expected: "a database operation", found: "`d.read`"),
        Malformed(text: "scenario \"t\"\ndevice\ndb open a as n\nopen a as n\nn.jump\n", line: 5, column: 3,
                  expected: "a handle or database operation", found: "`n.jump`"),
        Malformed(text: "scenario \"t\"\ndevice\nopen a as n\ndb open a as n\nn.jump\n", line: 5, column: 3,
                  expected: "a handle or database operation", found: "`n.jump`"),
        // The second scenario's error is reported even though the first is fine.
        Malformed(text: "scenario \"a\"\ndevice\nlock\n\nscenario \"b\"\ndevice\nunlock 1 2\n", line: 7, column: 10,
                  expected: "end of statement", found: "`2`"),
    ]

    @Test("malformed files are reported at the exact file, line and column", arguments: malformed)
    func malformedFile(_ sample: Malformed) throws {
        let error = try #require(throws: ScenarioSyntaxError.self) {
            try ScenarioParser.parse(sample.text, file: "bad.scenario")
        }
        #expect(error.file == "bad.scenario")
        #expect(error.line == sample.line, "\(error)")
        #expect(error.column == sample.column, "\(error)")
        #expect(error.expected.contains(sample.expected), "\(error)")
        #expect(error.found == sample.found, "\(error)")
        #expect(error.description == "bad.scenario:\(error.line):\(error.column): expected \(error.expected), found \(error.found)")
    }

    @Test("names are bound when a statement runs: an open does not retype a name for the statements after it")
    func namesBoundAtRunTime() throws {
        let scenarios = try ScenarioParser.parse("""
            scenario "t"
            device
            db open a.db as d create
            open f as d
            d.query "SELECT 1"
            d.write "x"
            d.close
            db open b.db as e
            e.close
            open f as h
            h.close
            """, file: "names.scenario")
        let actions = try #require(scenarios.first).steps.map(\.action)
        #expect(actions[2] == .query(database: "d", sql: "SELECT 1"), "the failed (or later closed) open of d as a handle leaves its queries")
        #expect(actions[3] == .write(handle: "d", data: Data("x".utf8)))
        #expect(actions[4] == .close(handle: "d"), "the run closes whatever d is then")
        #expect(actions[6] == .closeDatabase(database: "e"))
        #expect(actions[8] == .close(handle: "h"))
    }

    @Test("a syntax error fails its scenario only: the others of the file parse")
    func syntaxErrorPerScenario() throws {
        let text = "scenario \"a\"\ndevice\nlock\nscenario \"b\"\ndevice\nlock lock\nscenario \"c\"\ndevice\nunlock\n"
        let parsed = ScenarioParser.scenarios(in: Data(text.utf8), file: "f.scenario")
        #expect(parsed.count == 3)
        guard parsed.count == 3 else { return }
        guard case .scenario(let first) = parsed[0], case .malformed(let title, let location, let error) = parsed[1],
              case .scenario(let last) = parsed[2] else {
            Issue.record("expected a scenario, a malformed one, a scenario: \(parsed)")
            return
        }
        #expect(first.title == "a" && first.steps.count == 1)
        #expect(title == "b" && location.line == 4 && error.line == 6 && error.column == 6)
        #expect(last.title == "c" && last.steps.count == 1)
        // The throwing parse still reports the first error of the file.
        #expect(throws: ScenarioSyntaxError(file: "f.scenario", line: 6, column: 6, expected: "end of statement", found: "`lock`")) {
            try ScenarioParser.parse(text, file: "f.scenario")
        }
    }

    @Test("invalid UTF-8 is a syntax error at its line and column")
    func invalidUTF8() throws {
        var bytes = Data("scenario \"t\"\ndevice\nput a \"".utf8)
        bytes += [0xC3, 0x28]
        bytes += Data("\"\n".utf8)
        let error = try #require(throws: ScenarioSyntaxError.self) { try ScenarioParser.parse(bytes, file: "bad.scenario") }
        #expect(error.line == 3)
        #expect(error.column == 8)
        #expect(error.expected == "UTF-8 text")
    }

    @Test("the spec's example parses into the statements it shows")
    func specExample() throws {
        let text = try String(contentsOf: Support.scenariosDirectory.appendingPathComponent("spec-example.scenario"), encoding: .utf8)
        let scenarios = try ScenarioParser.parse(text, file: "spec-example.scenario")
        let scenario = try #require(scenarios.first)
        #expect(scenarios.count == 1)
        #expect(scenario.title == "complete file locks with the device")
        #expect(scenario.setup.passcode == "1234")
        #expect(scenario.setup.gracePeriod == .seconds(10))
        #expect(scenario.setup.eraseAfterFailedAttempts == nil)
        #expect(scenario.setup.inactivityPeriod == .seconds(48 * 3600))
        #expect(scenario.steps.map(\.action) == [
            .unlock(passcode: "1234"),
            .open(path: "Documents/log.txt", handle: "h", mode: .update, create: true, protection: .complete),
            .write(handle: "h", data: Data("hello".utf8)),
            .lock,
            .advance(.seconds(5)),
            .write(handle: "h", data: Data(" world".utf8)),
            .advance(.seconds(6)),
            .write(handle: "h", data: Data("!".utf8)),
            .get(path: "Documents/log.txt"),
            .unlock(passcode: "1234"),
            .get(path: "Documents/log.txt"),
            .expect(.events([.protectedDataDidBecomeAvailable, .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable])),
        ])
        #expect(scenario.steps[7].expectation == .error(.protectedDataUnavailable))
        #expect(scenario.steps[10].expectation == .text("hello world"))
        #expect(scenario.steps[5].source == "h.write \" world\"")
        #expect(scenario.steps[5].location.line == 10)
    }

    @Test("values: data forms, sizes, durations, classes and options")
    func values() throws {
        let text = #"""
            scenario "values"
            device passcode="12 34" grace=1500ms erase-after=10 inactivity=2d
            put "a b/c" "q\"\\\n\t\r\x7f\xFF" class=none
            put x hex:00FFab
            put y random:12:1
            put z empty
            advance 3m
            advance 1h
            open x as h mode=append create class=completeWhenUserInactive
            h.read 64KiB -> hex:
            h.read 2MiB -> random:3:0
            h.read 1GiB
            h.truncate 5B
            h.seek 7 -> ok
            h.seek-end -> 9
            h.offset -> 1KiB
            ls / -> "a b" x "empty" "ok" error2
            ls d ->
            stat x -> size=3 class=none type=file
            get x -> error invalidPath
            expect unavailable complete none
            expect failed-attempts 3 -> ok
            """#
        let scenario = try #require(try ScenarioParser.parse(text, file: "v.scenario").first)
        #expect(scenario.setup == DeviceSetup(passcode: "12 34", gracePeriod: .milliseconds(1500), eraseAfterFailedAttempts: 10,
                                              inactivityPeriod: .seconds(2 * 86400), location: scenario.setup.location))
        let steps = scenario.steps
        #expect(steps[0].action == .put(path: "a b/c", data: Data([0x71, 0x22, 0x5C, 0x0A, 0x09, 0x0D, 0x7F, 0xFF]), protection: ProtectionClass.none))
        #expect(steps[1].action == .put(path: "x", data: Data([0x00, 0xFF, 0xAB]), protection: nil))
        #expect(steps[2].action == .put(path: "y", data: Data(SplitMix64.bytes(count: 12, seed: 1)), protection: nil))
        #expect(steps[3].action == .put(path: "z", data: Data(), protection: nil))
        #expect(steps[4].action == .advance(.seconds(180)))
        #expect(steps[5].action == .advance(.seconds(3600)))
        #expect(steps[6].action == .open(path: "x", handle: "h", mode: .append, create: true, protection: .completeWhenUserInactive))
        #expect(steps[7].action == .read(handle: "h", count: 65536))
        #expect(steps[7].expectation == .data(Data()))
        #expect(steps[8].expectation == .data(Data([0xAF, 0xCD, 0x1D])))
        #expect(steps[9].action == .read(handle: "h", count: 1 << 30))
        #expect(steps[10].action == .truncate(handle: "h", size: 5))
        #expect(steps[11].expectation == .success)
        #expect(steps[12].expectation == .integer(9))
        #expect(steps[13].expectation == .integer(1024))
        #expect(steps[14].expectation == .names(["a b", "x", "empty", "ok", "error2"]))
        #expect(steps[15].expectation == .names([]))
        #expect(steps[16].expectation == .attributes(class: ProtectionClass.none, size: 3, type: .file))
        #expect(steps[17].expectation == .error(.invalidPath))
        #expect(steps[18].action == .expect(.unavailable([.complete, ProtectionClass.none])))
        #expect(steps[19].action == .expect(.failedAttempts(3)))
    }

    @Test("a file holds several scenarios, each with its own handles")
    func severalScenarios() throws {
        let text = """
            scenario "one"
            device
            open a as h create
            scenario "two"
            device
            h.close
            """
        let error = try #require(throws: ScenarioSyntaxError.self) { try ScenarioParser.parse(text, file: "two.scenario") }
        #expect(error.line == 6)
        #expect(error.expected.contains("a handle opened earlier"))
        let scenarios = try ScenarioParser.parse("scenario one\ndevice\nscenario \"two\"\ndevice\nlock\n", file: "f")
        #expect(scenarios.map(\.title) == ["one", "two"])
        #expect(scenarios.map(\.location.line) == [1, 3])
        #expect(scenarios.map(\.steps.count) == [0, 1])
    }

    @Test("statements print back in the language")
    func descriptions() throws {
        let actions: [Action] = [
            .unlock(passcode: nil), .unlock(passcode: "12 34"), .advance(.milliseconds(1500)), .advance(.seconds(7200)),
            .put(path: "a", data: Data("x\n".utf8), protection: .complete), .put(path: "b", data: Data([0, 1]), protection: nil),
            .open(path: "f", handle: "h", mode: .read, create: true, protection: ProtectionClass.none),
            .expect(.events([.protectedDataDidBecomeAvailable])),
        ]
        #expect(actions.map(\.description) == [
            "unlock", "unlock \"12 34\"", "advance 1500ms", "advance 2h",
            "put a \"x\\n\" class=complete", "put b hex:0001",
            "open f as h mode=read create class=none",
            "expect events protectedDataDidBecomeAvailable",
        ])
        for action in actions where action != .expect(.events([.protectedDataDidBecomeAvailable])) {
            let parsed = try ScenarioParser.parse("scenario t\ndevice\nopen f as h\n\(action)\n", file: "f")
            #expect(parsed[0].steps[1].action == action)
        }
    }
}
