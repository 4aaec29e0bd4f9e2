import Foundation
import Testing

/// `dpctl sql`'s dot-commands, set against the real `sqlite3` on a plain database built by
/// the same statements: the same script, the same bytes out, in one process and through the agent.
@Suite struct SQLDotCommandTests {
    static let sqlite3 = "/usr/bin/sqlite3"
    static var haveSQLite3: Bool { FileManager.default.isExecutableFile(atPath: sqlite3) }

    /// The tables of both databases: quotes, commas, newlines, tabs, NULLs, unicode, blobs (one
    /// with a NUL), reals, a view, an index, a trigger and SQLite's own `sqlite_sequence`.
    static let setUp = """
        CREATE TABLE t(a INTEGER, b TEXT, c);
        INSERT INTO t VALUES (1, 'x,y', NULL), (2, 'q"uote', x'00ff41'), (3, 'line
        break', 1.5), (4, 'héllo ☃ 漢字', 1e20), (NULL, '', 0.1), (6, 'it''s', -2.0), (7, 'tab	here', x'4142'),
        (8, 'a b|c\\d', 'back\\slash "q"');
        CREATE TABLE Alpha(id INTEGER PRIMARY KEY AUTOINCREMENT, v);
        INSERT INTO Alpha(v) VALUES ('one');
        CREATE INDEX alpha_v ON Alpha(v);
        CREATE VIEW both_names AS SELECT a, b AS "the b", 3, c AS "order" FROM t;
        CREATE TRIGGER tr AFTER INSERT ON Alpha BEGIN SELECT 1; END;
        CREATE TABLE a_very_long_table_name_number_one(x);
        CREATE TABLE t2(x); CREATE TABLE t3(x); CREATE TABLE t4(x);

        """

    /// Every mode, headers on and off, before and after, several statements on a line, a
    /// comment before a dot-command, `.read`, and `.quit` before a last statement.
    static func script(reading other: URL) -> String {
        """
        .tables
        .tables t%
        .schema
        .schema alpha
        .schema a*
        SELECT * FROM t ORDER BY rowid;
        .headers on
        SELECT * FROM t ORDER BY rowid; SELECT count(*) AS n FROM t;
        SELECT 1 WHERE 0;
        .mode csv
        SELECT * FROM t ORDER BY rowid;
        SELECT 1 AS "x,y", 2 AS "a b", 3 AS plain;
        .headers off
        SELECT * FROM t ORDER BY rowid;
        .mode json
        SELECT * FROM t ORDER BY rowid; SELECT count(*) AS n FROM t;
        SELECT 1 WHERE 0;
        .mode line
        SELECT * FROM t ORDER BY rowid;
        SELECT 1 AS a_long_column_name, NULL AS b;
        .mode column
        SELECT * FROM t ORDER BY rowid;
        .headers on
        SELECT a, b FROM t WHERE instr(b, char(10)) = 0 ORDER BY rowid;
        .headers off
        .mode list
        -- a comment, then a dot-command
        .mode
        SELECT b FROM t ORDER BY rowid;
        .read \(other.path)
        SELECT 'after .read';
        .quit
        SELECT 'not run';

        """
    }

    static let other = ".mode csv\nSELECT 'from .read', 2;\n.headers on\nSELECT 'again' AS x;\n.headers off\n.mode list\n"

    /// Runs the real `sqlite3` on `database` with `input` on standard input: its exit status and output.
    static func runSQLite3(_ database: URL, input: URL) throws -> (status: Int32, output: Data) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: sqlite3)
        process.arguments = [database.path]
        process.standardInput = try FileHandle(forReadingFrom: input)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, data)
    }

    @Test("the same script of dot-commands and queries prints the same bytes as sqlite3 on a plain database: .tables, .schema, .headers, every .mode, NULLs, quotes, commas, newlines, tabs, unicode, blobs, .read, .quit; in one process and through the agent",
          .enabled(if: haveSQLite3, "needs the sqlite3 program (apt-get install sqlite3) to compare with"), arguments: [false, true])
    func sameOutputAsSQLite3(throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        let setUp = try fixture.localFile("setup.sql", Data(Self.setUp.utf8))
        let plain = fixture.directory.appendingPathComponent("plain.db")
        #expect(try Self.runSQLite3(plain, input: setUp).status == 0)
        let created = try fixture.run(["sql", "app.db", "--create"], input: setUp)
        #expect(created.status == 0, "\(created.standardError)")
        let other = try fixture.localFile("other.sql", Data(Self.other.utf8))
        let script = try fixture.localFile("script.sql", Data(Self.script(reading: other).utf8))
        let expected = try Self.runSQLite3(plain, input: script)
        #expect(expected.status == 0)
        let result = try fixture.run(["sql", "app.db"], input: script)
        #expect(result.status == 0, "\(result.standardError)")
        let wanted = String(decoding: expected.output, as: UTF8.self)
        #expect(result.standardOutput == wanted)
        if result.standardOutput != wanted {
            // Line by line, where they part.
            let mine = result.standardOutput.components(separatedBy: "\n"), theirs = wanted.components(separatedBy: "\n")
            if let index = zip(mine, theirs).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset {
                Issue.record("line \(index + 1): dpctl \(mine[index].debugDescription), sqlite3 \(theirs[index].debugDescription)")
            }
        }
        // What the script shows, so that the comparison cannot pass on two empty outputs.
        #expect(wanted.contains("CREATE TABLE Alpha(id INTEGER PRIMARY KEY AUTOINCREMENT, v);\n"))
        #expect(wanted.contains("[{\"a\":1,\"b\":\"x,y\",\"c\":null},\n"))
        #expect(wanted.contains("current output mode: list\n") && wanted.hasSuffix("after .read\n"))
    }

    @Test("a dot-command is one only where no statement has begun: inside a statement, its line is SQL (a syntax error, exit 26), as in sqlite3")
    func onlyAtTheStartOfAStatement() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let script = try fixture.localFile("inside.sql", Data("SELECT 1,\n.mode csv\n2;\nSELECT 3, 4;\n".utf8))
        let result = try fixture.run(["sql", "a.db", "--create"], input: script)
        #expect(result.status == 26, "\(result.standardError)")
        #expect(result.standardError.contains("syntax error"), "\(result.standardError)")
        #expect(result.standardOutput == "")
        // Leading blanks make it SQL too (sqlite3 wants the dot first on the line).
        let indented = try fixture.run(["sql", "a.db", "  .tables"])
        #expect(indented.status == 26, "\(indented.standardError)")
    }

    @Test("dot-commands as the argument and at the end of a script without a newline; .help; .exit with a status; an unknown command is invalidArgument (exit 23) and ends a script")
    func argumentsHelpExitAndErrors() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        #expect(try fixture.run(["sql", "a.db", "--create", "CREATE TABLE t(x); CREATE TABLE s(y)"]).status == 0)
        let tables = try fixture.run(["sql", "a.db", ".tables"])
        #expect(tables.status == 0, "\(tables.standardError)")
        #expect(tables.standardOutput == "s  t\n")
        let schema = try fixture.run(["sql", "a.db", ".schema t"])
        #expect(schema.standardOutput == "CREATE TABLE t(x);\n", "\(schema.standardError)")
        let help = try fixture.run(["sql", "a.db", ".help"])
        #expect(help.status == 0 && help.standardOutput.contains(".schema ?PATTERN?") && help.standardOutput.contains(".mode MODE"))
        let exit = try fixture.run(["sql", "a.db"], input: try fixture.localFile("exit.sql", Data("SELECT 1;\n.exit 3\nSELECT 2;\n".utf8)))
        #expect(exit.status == 3 && exit.standardOutput == "1\n")
        let unknown = try fixture.run(["sql", "a.db"], input: try fixture.localFile("bogus.sql", Data("SELECT 1;\n.bogus\nSELECT 2;\n".utf8)))
        #expect(unknown.status == 23, "\(unknown.standardError)")
        #expect(unknown.standardOutput == "1\n" && unknown.standardError.contains("bogus") && unknown.standardError.contains(".help"))
        let badMode = try fixture.run(["sql", "a.db", ".mode html"])
        #expect(badMode.status == 23 && badMode.standardError.contains("column csv json line list"))
        let missing = try fixture.run(["sql", "a.db", ".read /nonexistent/x.sql"])
        #expect(missing.status == 14, "\(missing.standardError)")
    }

    @Test("--json prints what .mode json prints: an array of row objects per statement that returns rows",
          .enabled(if: haveSQLite3, "needs the sqlite3 program (apt-get install sqlite3) to compare with"))
    func jsonFlagIsModeJSON() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let sql = "CREATE TABLE t(n INTEGER, r REAL, s TEXT, z); INSERT INTO t VALUES (7, 0.5, 'hi \"there\"', NULL), (8, 1e20, 'é', 1); SELECT * FROM t; SELECT 1 WHERE 0; SELECT count(*) FROM t;"
        let result = try fixture.run(["sql", "a.db", "--create", "--json", sql])
        #expect(result.status == 0, "\(result.standardError)")
        let input = try fixture.localFile("json.sql", Data((".mode json\n" + sql + "\n").utf8))
        let expected = try Self.runSQLite3(fixture.directory.appendingPathComponent("plain.db"), input: input)
        #expect(result.standardOutput == String(decoding: expected.output, as: UTF8.self))
        let arrays = result.standardOutput.split(separator: "]\n").map { try? JSONSerialization.jsonObject(with: Data(($0 + "]").utf8)) as? [[String: Any]] }
        #expect(arrays.count == 2 && arrays.allSatisfy { $0 != nil })
    }

    @Test("at a terminal (a pseudo-terminal through script(1)): .tables, .schema, .mode and .headers at the sql> prompt, an unknown command reported and the session going on, .quit to leave; in one process and through the agent",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")), arguments: [false, true])
    func atThePrompt(throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        #expect(try fixture.run(["sql", "a.db", "--create", "CREATE TABLE distinct_table_name(x); INSERT INTO distinct_table_name VALUES (42)"]).status == 0)
        let terminal = try TerminalSession(["sql", "a.db"], environment: fixture.environment(passcode: "1234", extra: ["TERM": "xterm"]))
        func waitFor(_ expected: String) -> Bool { terminal.waitFor(expected) }
        #expect(waitFor("Ctrl-D leaves"))
        // What each line shows is not in the line itself (the terminal echoes what is typed); the
        // terminal turns each newline into \\r\\n, so CSV rows (which end in \\r\\n) end in \\r\\r\\n.
        for (line, expected) in [(".tables\r", "\r\ndistinct_table_name\r\n"), (".schema\r", "CREATE TABLE distinct_table_name(x);"),
                                 (".mode csv\r", "sql> "), (".headers on\r", "sql> "),
                                 ("SELECT x, upper('a b') AS y FROM distinct_table_name;\r", "x,y\r\r\n42,\"A B\"\r\r\n"),
                                 (".bogus\r", "Unknown command"), (".mode list\r", "sql> "), ("SELECT upper('after') || ' error';\r", "AFTER error")] {
            terminal.type(line)
            #expect(waitFor(expected), "after \(line.debugDescription): \(terminal.screen.suffix(400).debugDescription)")
        }
        #expect(!terminal.screen.contains("...> "), "a dot-command never continues a statement: \(terminal.screen.debugDescription)")
        terminal.type(".quit\r")
        let quit = terminal.exited(within: 20)
        #expect(quit, ".quit ends the session")
        #expect(terminal.finish() == 0 && quit)
    }
}
