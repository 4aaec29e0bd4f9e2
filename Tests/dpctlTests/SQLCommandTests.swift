import Foundation
import Testing

/// `dpctl sql` on the real binary: list-mode rows, JSON rows, SQL from standard input,
/// exit statuses, and a `complete` database that needs the passcode.
@Suite struct SQLCommandTests {
    @Test("rows as sqlite3 prints them in list mode, from the argument and from standard input")
    func listMode() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let created = try fixture.run(["sql", "Library/app.db", "--create", "--class", "complete",
                                       "CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'x'), (2.5, NULL), (1e20, 'a|b'); SELECT * FROM t; SELECT count(*) FROM t"])
        #expect(created.status == 0, "\(created.standardError)")
        #expect(created.standardOutput == "1|x\n2.5|\n1.0e+20|a|b\n3\n")
        let script = try fixture.localFile("script.sql", Data("SELECT b FROM t WHERE a = 1;\n".utf8))
        let fromInput = try fixture.run(["sql", "Library/app.db"], input: script)
        #expect(fromInput.status == 0, "\(fromInput.standardError)")
        #expect(fromInput.standardOutput == "x\n")
        let listing = try fixture.run(["stat", "Library/app.db", "--json"])
        #expect(listing.standardOutput.contains("\"complete\""), "\(listing.standardOutput)")
    }

    @Test("--json prints an array of row objects keyed by column name")
    func json() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let result = try fixture.run(["sql", "a.db", "--create", "--json",
                                      "CREATE TABLE t(n INTEGER, r REAL, s TEXT, z); INSERT INTO t VALUES (7, 0.5, 'hi', NULL); SELECT * FROM t"])
        #expect(result.status == 0, "\(result.standardError)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: Any]])
        #expect(rows.count == 1)
        #expect(rows.first?["n"] as? Int == 7)
        #expect(rows.first?["r"] as? Double == 0.5)
        #expect(rows.first?["s"] as? String == "hi")
        #expect(rows.first?["z"] is NSNull)
    }

    @Test("exit statuses: a missing database 14, SQLite's own errors 26, no passcode for a complete database 10")
    func statuses() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let missing = try fixture.run(["sql", "nope.db", "SELECT 1"])
        #expect(missing.status == 14)
        #expect(missing.standardError.contains("--create"))
        #expect(try fixture.run(["sql", "a.db", "--create", "--class", "complete", "CREATE TABLE t(x)"]).status == 0)
        let syntax = try fixture.run(["sql", "a.db", "SELEC 1"])
        #expect(syntax.status == 26)
        #expect(syntax.standardError.contains("syntax error"), "\(syntax.standardError)")
        let locked = try fixture.run(["sql", "a.db", "SELECT 1"], passcode: nil)
        #expect(locked.status == 10, "\(locked.standardError)")
        #expect(try fixture.run(["sql", "b.db", "--create", "--class", "completeUnlessOpen", "CREATE TABLE t(x)"], passcode: nil).status == 0)
    }

    @Test("standard input runs a complete statement at a time, as sqlite3 reads it: semicolons in strings, comments and trigger bodies, lines longer than a read, a last statement without its semicolon")
    func standardInputByStatement() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let long = String(repeating: "x", count: 200_000)  // one line, longer than any single read of the pipe
        var script = """
            CREATE TABLE t(v TEXT);
            INSERT INTO t VALUES('a;
            b'); INSERT INTO t VALUES('c');
            CREATE TRIGGER tr AFTER INSERT ON t WHEN new.v = 'd' BEGIN
              INSERT INTO t VALUES('from the trigger;');
            END;
            -- a comment; with a semicolon
            INSERT INTO t VALUES('d') /* ; */;
            INSERT INTO t VALUES('\(long)');
            BEGIN;

            """
        for row in 0..<3_000 { script += "INSERT INTO t VALUES('row \(row)');\n" }
        script += "COMMIT;\nSELECT v FROM t WHERE length(v) < 20 AND v NOT LIKE 'row %';\nSELECT count(*), max(length(v)) FROM t"
        let input = try fixture.localFile("script.sql", Data(script.utf8))
        let result = try fixture.run(["sql", "a.db", "--create"], input: input)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "a;\nb\nc\nd\nfrom the trigger;\n3005|200000\n")

        // The rows of the statements before one that fails are printed, then the error.
        let failing = try fixture.localFile("failing.sql", Data("SELECT 1;\nSELEC 2;\nSELECT 3;\n".utf8))
        let failed = try fixture.run(["sql", "a.db"], input: failing)
        #expect(failed.status == 26)
        #expect(failed.standardOutput == "1\n")
        #expect(failed.standardError.contains("syntax error"), "\(failed.standardError)")
        let notText = try fixture.localFile("bytes.sql", Data([0x53, 0x45, 0x4C, 0x45, 0x43, 0x54, 0x20, 0x27, 0xFF, 0x27, 0x3B, 0x0A]))
        let refused = try fixture.run(["sql", "a.db"], input: notText)
        #expect(refused.status != 0 && refused.standardError.contains("not UTF-8"), "\(refused.standardError)")
        let blank = try fixture.localFile("blank.sql", Data("SELECT count(*) FROM t;\n\n   \n".utf8))
        #expect(try fixture.run(["sql", "a.db"], input: blank).standardOutput == "3005\n")
    }

    @Test("typed at a terminal (a pipe fed a line at a time): each statement's rows are printed once its line is read, before the next; in one process and through the agent",
          arguments: [false, true])
    func interactive(throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        let run = try PipedRun(["sql", "a.db", "--create"], fixture: fixture)
        /// Waits (up to 20 s) until standard output holds `expected`.
        func expectOutput(_ expected: String, after line: String) {
            run.write(Data(line.utf8))
            let deadline = Date().addingTimeInterval(20)
            while run.text != expected && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            #expect(run.text == expected, "after \(line.debugDescription)")
        }
        expectOutput("", after: "CREATE TABLE t(v);\n")
        expectOutput("1\n", after: "INSERT INTO t VALUES (1); SELECT count(*) FROM t;\n")
        expectOutput("1\n", after: "INSERT INTO t VALUES ('two\n")  // inside a string: nothing runs
        expectOutput("1\n2\n", after: "lines'); SELECT count(*) FROM t;\n")
        #expect(try run.finish() == 0)
    }

    @Test("at a terminal (a pseudo-terminal through script(1)): a prompt, another inside a statement, each line's rows before the next prompt, a failed statement reported and the session going on, Ctrl-D to leave; in one process and through the agent",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")), arguments: [false, true])
    func prompt(throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        #expect(try fixture.run(["sql", "a.db", "--create", "CREATE TABLE t(x); INSERT INTO t VALUES (42)"]).status == 0)
        let terminal = try TerminalSession(["sql", "a.db"], environment: fixture.environment(passcode: "1234", extra: ["TERM": "xterm"]))
        func screen() -> String { terminal.screen }
        func waitFor(_ expected: String) -> Bool { terminal.waitFor(expected) }
        #expect(waitFor("Ctrl-D leaves"))
        for (line, shown) in [("SELECT\r", "...> "), (" x FROM t;\r", "42"), ("SELEC 1;\r", "syntax error"),
                              ("INSERT INTO t VALUES (7); SELECT count(*) + 100 FROM t;\r", "102")] {
            terminal.type(line)
            #expect(waitFor(shown), "after \(line.debugDescription): \(screen().debugDescription)")
        }
        terminal.type([0x04])  // Ctrl-D on an empty line
        #expect(terminal.exited(within: 20))
        #expect(terminal.finish() == 0)
        // In order: the rows of a line, then the next prompt; the error, then a prompt again. Each
        // keystroke redraws the line (carriage return, prompt, text, erase to its end, cursor
        // moves): a line of the screen is what its last redraw left.
        let lines = screen().replacingOccurrences(of: "\u{1B}\\[[0-9]*[A-Za-z]", with: "", options: .regularExpression)
            .components(separatedBy: "\r\n").map { $0.components(separatedBy: "\r").last { !$0.isEmpty } ?? "" }
        let rows = lines.firstIndex(of: "42"), error = lines.firstIndex { $0.contains("syntax error") }, count = lines.firstIndex(of: "102")
        #expect(rows != nil && error != nil && count != nil && rows! < error! && error! < count!, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("...> ") }, "\(lines)")
        #expect(try fixture.run(["sql", "a.db", "SELECT x FROM t ORDER BY rowid"]).standardOutput == "42\n7\n")
    }

    @Test("standard input fed through a pipe in pieces of random sizes runs a script as the argument runs it whole: random scripts with semicolons and newlines in strings and comments, statements across lines and several on one; in one process and through the agent",
          arguments: [(1, false), (2, false), (3, true), (4, true)] as [(UInt64, Bool)])
    func standardInputMatchesTheArgument(seed: UInt64, throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        func random(_ bound: Int) -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % UInt64(bound))
        }
        let pieces = ["a", ";", "\n", "--", "/*", "*/", "''", " ", "end;", "BEGIN", "x\n;\n"]
        func text() -> String { (0..<random(6)).map { _ in pieces[random(pieces.count)] }.joined() }
        var script = "CREATE TABLE t(v);\nCREATE TABLE log(v);\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  INSERT INTO log VALUES ('x;');\n  INSERT INTO log VALUES (new.v);\nEND;\n"
        for row in 0..<1_500 {
            let value = "'\(text().replacingOccurrences(of: "'", with: "''"))'"
            let statement = ["INSERT INTO t VALUES (\(value));", "INSERT INTO t VALUES (\(row)); -- a comment; \(text().replacingOccurrences(of: "\n", with: " "))\n",
                             "/* \(text().replacingOccurrences(of: "*", with: "")) */ INSERT INTO t\nVALUES (\(value));",
                             "INSERT INTO t VALUES (\(row)); INSERT INTO t VALUES (\(value));", "SELECT count(*) FROM log;", "\n"][random(6)]
            script += statement + (random(4) == 0 ? " " : "\n")  // a line comment ends its line itself
        }
        script += "SELECT v FROM t ORDER BY rowid;\nSELECT v FROM log ORDER BY rowid"
        let whole = try fixture.run(["sql", "whole.db", "--create", script])
        #expect(whole.status == 0, "\(whole.standardError)")
        // Through a pipe fed in pieces of random sizes: each read of standard input ends
        // anywhere, in a string, a comment or a line.
        let run = try PipedRun(["sql", "read.db", "--create"], fixture: fixture)
        let bytes = Data(script.utf8)
        var offset = 0, written = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, 1 + random(2_000))
            run.write(bytes.subdata(in: offset..<offset + count))
            offset += count
            written += 1
            if written % 16 == 0 { Thread.sleep(forTimeInterval: 0.002) }  // let the reader catch up: a read ends here
        }
        #expect(try run.finish() == 0)
        #expect(run.text == whole.standardOutput)
        #expect(whole.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).count > 500)
    }
}

/// `dpctl` started with a pipe for standard input, written while it runs, and its standard
/// output gathered as it arrives (standard error dropped).
private final class PipedRun: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe(), output = Pipe()
    private let lock = NSLock()
    private var bytes = Data()

    init(_ arguments: [String], fixture: StoreFixture) throws {
        process.executableURL = DPCtlRunner.executable
        process.arguments = arguments
        process.environment = fixture.environment(passcode: "1234")
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        output.fileHandleForReading.readabilityHandler = { [unowned self] handle in append(handle.availableData) }
        try process.run()
    }

    deinit { if process.isRunning { process.terminate() } }

    /// Writes `data` to its standard input.
    func write(_ data: Data) { input.fileHandleForWriting.write(data) }

    /// Its standard output so far.
    var text: String { lock.lock(); defer { lock.unlock() }; return String(decoding: bytes, as: UTF8.self) }

    /// Ends its standard input, waits for it to exit, gathers the rest of its output; its exit status.
    func finish() throws -> Int32 {
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        Thread.sleep(forTimeInterval: 0.1)  // a read the handler is in the middle of lands first
        output.fileHandleForReading.readabilityHandler = nil
        append(output.fileHandleForReading.readDataToEndOfFile())
        return process.terminationStatus
    }

    private func append(_ data: Data) { lock.lock(); bytes.append(data); lock.unlock() }
}
