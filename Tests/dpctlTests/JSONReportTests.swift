import Foundation
import Testing

/// `--json` on the commands that report something: one JSON object on standard output, every
/// key present, in one process and through the agent.
@Suite struct JSONReportTests {
    @Test("init, put, get -o, unlock, passcode change and erase print one JSON object with --json, without an agent")
    func withoutAgent() throws {
        let fixture = try StoreFixture()
        let created = try fixture.run(["init", "--json"])
        #expect(created.status == 0, "\(created.standardError)")
        let creation = try created.json()
        #expect(creation["store"] as? String == fixture.store.path)
        #expect(creation["passcodeSet"] as? Bool == true)
        #expect((creation["device"] as? String)?.hasPrefix(fixture.stateHome.path) == true)

        let source = try fixture.localFile("source.txt", Data("twelve bytes".utf8))
        let put = try fixture.run(["put", source.path, "Documents/a.txt", "--class", "complete", "--json"])
        #expect(put.status == 0, "\(put.standardError)")
        let stored = try put.json()
        #expect(stored["path"] as? String == "Documents/a.txt")
        #expect(stored["source"] as? String == source.path)
        #expect(stored["size"] as? Int == 12)
        #expect(stored["protectionClass"] as? String == "complete")
        // Without --json, put prints nothing (as before).
        #expect(try fixture.run(["put", source.path, "b.txt"]).standardOutput == "")

        let copy = fixture.directory.appendingPathComponent("copy.txt")
        let get = try fixture.run(["get", "Documents/a.txt", "-o", copy.path, "--json"])
        #expect(get.status == 0, "\(get.standardError)")
        let fetched = try get.json()
        #expect(fetched["output"] as? String == copy.path && fetched["size"] as? Int == 12)
        #expect(try Data(contentsOf: copy) == Data("twelve bytes".utf8))
        // To standard output, the content is the output: --json needs -o.
        let mixed = try fixture.run(["get", "Documents/a.txt", "--json"])
        #expect(mixed.status == 64 && mixed.standardError.contains("-o"), "\(mixed.standardError)")

        let unlocked = try fixture.run(["unlock", "--json"])
        #expect(unlocked.status == 0, "\(unlocked.standardError)")
        let unlock = try unlocked.json()
        #expect(unlock["state"] as? String == "unlocked" && unlock["agent"] is NSNull)

        let changed = try fixture.run(["passcode", "change", "--json"], extra: ["DPCTL_NEW_PASSCODE": "5678"])
        #expect(changed.status == 0, "\(changed.standardError)")
        #expect(try changed.json()["passcodeSet"] as? Bool == true)

        let erased = try fixture.run(["erase", "--yes", "--json"], passcode: "5678")
        #expect(erased.status == 0, "\(erased.standardError)")
        let erase = try erased.json()
        #expect(erase["erased"] as? Bool == true && erase["passcodeSet"] as? Bool == false)
    }

    @Test("agent start, unlock, lock, put and agent stop print one JSON object with --json through the agent; agent stop with none running too")
    func throughAgent() throws {
        let fixture = try StoreFixture()
        try fixture.initialize()
        let started = try fixture.run(["agent", "start", "--auto-lock", "never", "--grace", "0s", "--json"], passcode: nil)
        #expect(started.status == 0, "\(started.standardError)")
        let agent = try #require(try started.json()["agent"] as? [String: Any])
        let pid = try #require(agent["pid"] as? Int32)
        defer { if kill(pid, 0) == 0 { kill(pid, SIGKILL) } }
        let socket = try #require(agent["socket"] as? String)
        #expect(FileManager.default.fileExists(atPath: socket))

        let unlocked = try fixture.run(["unlock", "--json"])
        #expect(unlocked.status == 0, "\(unlocked.standardError)")
        let unlock = try unlocked.json()
        #expect(unlock["state"] as? String == "unlocked")
        #expect((unlock["agent"] as? [String: Any])?["pid"] as? Int32 == pid)

        let source = try fixture.localFile("source.txt", Data("hello".utf8))
        let put = try fixture.run(["put", source.path, "a.txt", "--json"], passcode: nil)
        #expect(put.status == 0, "\(put.standardError)")
        #expect(try put.json()["size"] as? Int == 5)

        let locked = try fixture.run(["lock", "--json"], passcode: nil)
        #expect(locked.status == 0, "\(locked.standardError)")
        let lock = try locked.json()
        #expect(lock["state"] as? String == "locked")
        #expect((lock["agent"] as? [String: Any])?["socket"] as? String == socket)

        let stopped = try fixture.run(["agent", "stop", "--json"], passcode: nil)
        #expect(stopped.status == 0, "\(stopped.standardError)")
        let stop = try stopped.json()
        #expect(stop["stopped"] as? Bool == true && (stop["agent"] as? [String: Any])?["pid"] as? Int32 == pid)
        let none = try fixture.run(["agent", "stop", "--json"], passcode: nil)
        #expect(none.status == 0, "\(none.standardError)")
        let nothing = try none.json()
        #expect(nothing["stopped"] as? Bool == false && nothing["agent"] is NSNull)
    }
}
