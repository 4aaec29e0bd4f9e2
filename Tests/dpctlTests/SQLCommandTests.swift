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
}
