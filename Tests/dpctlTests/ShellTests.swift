import Foundation
import Testing

@Suite("dpctl shell")
struct ShellTests {
    /// Runs `dpctl shell --device-statement <device>` with `statements` on standard input (and `options`).
    static func shell(_ statements: String, device: String, options: [String] = []) throws -> DPCtlRunner.Result {
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-shell-\(UUID()).txt")
        defer { try? FileManager.default.removeItem(at: input) }
        try Data(statements.utf8).write(to: input)
        return try DPCtlRunner.run(["shell", "--device-statement", device] + options, input: input)
    }

    @Test("--device is a directory, as for every other command: the device and its store are made in it (and removed at the end); a device statement given to --device is refused with the option to use")
    func deviceDirectory() throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("dpctl-shell-device-\(UUID())")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: parent) }
        let input = parent.appendingPathComponent("statements.txt")
        try Data("unlock 1234\nput a \"hi\"\nget a\n".utf8).write(to: input)
        let result = try DPCtlRunner.run(["shell", "--device", parent.path, "--device-statement", "device passcode=1234"], input: input)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == "ok\nok\n\"hi\"\n")
        let left = try FileManager.default.contentsOfDirectory(atPath: parent.path)
        #expect(left == ["statements.txt"], "\(left)")
        let old = try DPCtlRunner.run(["shell", "--device", "device passcode=1234"], input: input)
        #expect(old.status == 64, "\(old.standardError)")
        #expect(old.standardError.contains("--device-statement"), "\(old.standardError)")
        let notADirectory = try DPCtlRunner.run(["shell", "--device", input.path], input: input)
        #expect(notADirectory.status == 64 && notADirectory.standardError.contains("not a directory"), "\(notADirectory.standardError)")
    }

    @Test("statements typed into the shell keep one device alive and print each result")
    func session() throws {
        let statements = """
            unlock 0000
            unlock 1234
            open Documents/log.txt as h create class=complete
            h.write "hello"
            lock
            advance 5s
            h.write " world"
            advance 6s
            h.write "!"
            unlock 1234
            get Documents/log.txt
            h.size -> 12
            h.bogus
            # a comment, then a blank line

            expect state unlocked
            quit
            ls /
            """
        let result = try Self.shell(statements, device: "device passcode=1234 grace=10s")
        #expect(result.status == 0, "stderr: \(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 14, "\(lines)")
        guard lines.count == 14 else { return }
        #expect(lines[0].hasPrefix("error incorrectPasscode"))
        #expect(lines[1...7].allSatisfy { $0 == "ok" })
        #expect(lines[8].hasPrefix("error protectedDataUnavailable"))   // the grace period is over
        #expect(lines[9] == "ok")
        #expect(lines[10] == "\"hello world\"")                          // the write inside the grace period was kept
        #expect(lines[11] == "FAIL: expected 12, got 11")
        #expect(lines[12].hasPrefix("syntax error: shell:13:"))          // the line it was typed on
        #expect(lines[13] == "ok")                                         // nothing after `quit` runs
    }

    @Test("help lists the statements; state shows the device, its handles and the clock")
    func helpAndState() throws {
        let result = try Self.shell("help\nunlock 1234\nopen a as h create class=complete mode=append\nlock\nadvance 2s\nstate\n",
                                    device: "device passcode=1234 grace=10s")
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("open <path> as <h> [mode=read|write|update|append] [create] [class=<class>]"))
        // Locked 2 s ago with a 10 s grace period: every key is still there.
        #expect(result.standardOutput.hasSuffix("""
            state locked
            available complete, completeUnlessOpen, completeUntilFirstUserAuthentication, completeWhenUserInactive, none
            failed-attempts 0
            handles h (append, complete)
            databases -
            clock 2s

            """))
    }

    @Test("database statements in the shell: a connection opened on one line is used on the next")
    func databases() throws {
        let statements = """
            unlock 1234
            db open app.db as d create class=complete wal
            d.exec "CREATE TABLE t(x); INSERT INTO t VALUES (7)"
            d.query "SELECT x FROM t"
            lock
            d.query "SELECT x FROM t"
            unlock 1234
            d.query "SELECT x FROM t" -> "7"
            d.close
            d.query "SELECT 1"
            """
        let result = try Self.shell(statements, device: "device passcode=1234")
        #expect(result.status == 0, "stderr: \(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 10, "\(lines)")
        guard lines.count == 10 else { return }
        #expect(Array(lines[0...4]) == ["ok", "ok", "ok", "\"7\"", "ok"])
        #expect(Array(lines[6...8]) == ["ok", "\"7\"", "ok"])
        #expect(lines[5].hasPrefix("error protectedDataUnavailable"))
        #expect(lines[9].hasPrefix("error handleClosed"))
    }
}
