import Foundation
import Testing

/// `dpctl item` on the real binary, in one process and through the agent.
@Suite("dpctl item")
struct ItemCommandTests {
    @Test("add (secret from stdin or a file, never an argument), get (exact bytes), ls --json (no secrets), update, rm; exit statuses",
          arguments: [false, true])
    func roundTrip(throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        func run(_ arguments: [String], input: URL? = nil, outputFile: URL? = nil) throws -> DPCtlRunner.Result {
            try fixture.run(arguments, passcode: agent == nil ? "1234" : nil, input: input, outputFile: outputFile)
        }
        let secretBytes = Data([0x00, 0xFF, 0x0A]) + Data("pässword\n".utf8)
        let secretFile = try fixture.localFile("secret.bin", secretBytes)
        let added = try run(["item", "add", "--service", "mail", "--account", "ann", "--label", "Mail"], input: secretFile)
        #expect(added.status == 0, "\(added.standardError)")
        let id = added.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(id.count == 32)

        // get: the exact bytes, nothing added.
        let output = fixture.directory.appendingPathComponent("out.bin")
        let got = try run(["item", "get", "--service", "mail", "--account", "ann"], outputFile: output)
        #expect(got.status == 0, "\(got.standardError)")
        #expect(try Data(contentsOf: output) == secretBytes)
        #expect(try run(["item", "get", "--id", id], outputFile: output).status == 0)
        #expect(try Data(contentsOf: output) == secretBytes)

        // The same attributes again: fileExists (15); --replace keeps the id.
        #expect(try run(["item", "add", "--attr", "service=mail", "--attr", "account=ann"], input: secretFile).status == 15)
        let other = try fixture.localFile("other.txt", Data("second".utf8))
        let replaced = try run(["item", "add", "--service", "mail", "--account", "ann", "--replace", "--secret-file", other.path])
        #expect(replaced.status == 0 && replaced.standardOutput.hasPrefix(id), "\(replaced.standardError)")
        #expect(try run(["item", "get", "--service", "mail", "--account", "ann"]).standardOutput == "second")

        // afterFirstUnlock item, then ls --json: no secret anywhere in the output.
        #expect(try run(["item", "add", "--attr", "service=sync", "--accessibility", "afterFirstUnlock"], input: secretFile).status == 0)
        let listed = try run(["item", "ls", "--json"])
        #expect(listed.status == 0, "\(listed.standardError)")
        let report = try listed.json()
        let items = try #require(report["items"] as? [[String: Any]])
        #expect(items.count == 2)
        #expect(Set(items.compactMap { $0["accessibility"] as? String }) == ["whenUnlocked", "afterFirstUnlock"])
        #expect((report["locked"] as? [Any])?.isEmpty == true)
        #expect(!listed.standardOutput.contains("second") && !listed.standardOutput.contains("pässword"))
        #expect(try run(["item", "ls", "--attr", "service=sync"]).standardOutput.contains("afterFirstUnlock"))

        // update: label and secret; the secret comes only from stdin or a file.
        let updated = try run(["item", "update", "--id", id, "--label", "Mail 2", "--secret-stdin"], input: secretFile)
        #expect(updated.status == 0, "\(updated.standardError)")
        #expect(try run(["item", "get", "--id", id], outputFile: output).status == 0)
        #expect(try Data(contentsOf: output) == secretBytes)
        #expect(try run(["item", "add", "--attr", "a=b", "--secret", "x"]).status == 64)

        // rm; then no match is fileNotFound (14), for get, rm and update.
        #expect(try run(["item", "rm", "--service", "mail", "--account", "ann"]).status == 0)
        #expect(try run(["item", "get", "--id", id]).status == 14)
        #expect(try run(["item", "rm", "--service", "mail"]).status == 14)
        #expect(try run(["item", "update", "--attr", "service=mail", "--label", "x"]).status == 14)
        #expect(try run(["item", "add", "--attr", "p=1", "--accessibility", "nonsense"], input: secretFile).status == 64)
        // Items are no files of the store.
        #expect(try run(["ls"]).standardOutput.isEmpty)
        #expect(try run(["rm", ".dataprotection-items"]).status == 22)
    }

    @Test("update --accessibility moves an item to another domain, keeping its id and secret; by --id and by attributes",
          arguments: [false, true])
    func accessibilityChange(throughAgent: Bool) throws {
        let (fixture, agent) = try AgentCommandTests.AgentFixture.store(throughAgent: throughAgent)
        defer { agent?.stop() }
        func run(_ arguments: [String], input: URL? = nil) throws -> DPCtlRunner.Result {
            try fixture.run(arguments, passcode: agent == nil ? "1234" : nil, input: input)
        }
        let secretFile = try fixture.localFile("secret.txt", Data("moving".utf8))
        let added = try run(["item", "add", "--service", "move", "--account", "ann"], input: secretFile)
        #expect(added.status == 0, "\(added.standardError)")
        let id = added.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let moved = try run(["item", "update", "--id", id, "--accessibility", "afterFirstUnlock", "--json"])
        #expect(moved.status == 0, "\(moved.standardError)")
        #expect(moved.standardOutput.contains(id) && moved.standardOutput.contains("afterFirstUnlock"))
        let listed = try run(["item", "ls"])
        #expect(listed.standardOutput.components(separatedBy: id).count == 2, "one item: \(listed.standardOutput)")
        #expect(listed.standardOutput.contains("\(id)  afterFirstUnlock"))
        #expect(try run(["item", "get", "--id", id]).standardOutput == "moving")
        let back = try run(["item", "update", "--service", "move", "--account", "ann", "--accessibility", "whenUnlockedThisDeviceOnly"])
        #expect(back.status == 0 && back.standardOutput.hasPrefix(id), "\(back.standardError)")
        #expect(try run(["item", "ls"]).standardOutput.contains("\(id)  whenUnlockedThisDeviceOnly"))
        #expect(try run(["item", "update", "--service", "none", "--accessibility", "afterFirstUnlock"]).status == 14)
        if let agent {
            // Moved to afterFirstUnlock: still read after the lock.
            #expect(try run(["item", "update", "--id", id, "--accessibility", "afterFirstUnlock"]).status == 0)
            #expect(try agent.run(["lock"]).status == 0)
            #expect(try run(["item", "get", "--id", id]).standardOutput == "moving")
        }
    }

    @Test("through the agent: after `dpctl lock` (grace 0) a whenUnlocked item is locked (exit 10), an afterFirstUnlock one is still read")
    func lockedItems() throws {
        let agent = try AgentCommandTests.AgentFixture()
        defer { agent.stop() }
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        let secret = try agent.fixture.localFile("s.txt", Data("token".utf8))
        #expect(try agent.run(["item", "add", "--attr", "k=unlocked"], input: secret).status == 0)
        #expect(try agent.run(["item", "add", "--attr", "k=afu", "--accessibility", "afterFirstUnlock"], input: secret).status == 0)
        #expect(try agent.run(["lock"]).status == 0)
        #expect(try agent.run(["item", "get", "--attr", "k=unlocked"]).status == 10)
        let afu = try agent.run(["item", "get", "--attr", "k=afu"])
        #expect(afu.status == 0 && afu.standardOutput == "token")
        let listed = try agent.run(["item", "ls"])
        #expect(listed.status == 0 && listed.standardError.contains("whenUnlocked"))
        #expect(!listed.standardOutput.contains("k=unlocked") && listed.standardOutput.contains("k=afu"))
        // The items persist across agent restarts.
        #expect(try agent.run(["agent", "stop"]).status == 0)
        try agent.start()
        #expect(try agent.run(["unlock"], passcode: "1234").status == 0)
        #expect(try agent.run(["item", "get", "--attr", "k=unlocked"]).standardOutput == "token")
    }

    @Test("dpctl bench --items-only --items-count 3000 --json: the item rows, lookups found every item")
    func benchItems() throws {
        let result = try DPCtlRunner.run(["bench", "--items-only", "--items-count", "3000", "--json", "--quiet"])
        #expect(result.status == 0, "\(result.standardError)")
        let rows = try #require(try result.json()["rows"] as? [[String: Any]])
        let names = rows.compactMap { $0["what"] as? String }
        #expect(names.contains("item lookup by 2 attributes, p99") && names.contains("item add, one durable transaction each"), "\(names)")
        #expect(names.count == 6)
    }
}
