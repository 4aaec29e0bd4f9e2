import DataProtection
import DataProtectionScenarios
import DataProtectionSQLite
import Foundation
import Testing

/// Crash safety of keychain items: `CrashWorker … items` adds, updates, moves (accessibility
/// changes, mostly between domains) and deletes items and is
/// killed with SIGKILL at a random instant, again and again on the same store. After each kill
/// every item database passes `PRAGMA integrity_check` (through the keychain's lookups), every
/// acknowledged change is there, whole (its secret byte for byte), and the change in flight is
/// there whole or not at all.
///
/// `DP_ITEM_KILLS` (default 25) sets the number of kills; `DP_CRASH_SEED` the seed.
@Suite("Crash safety of keychain items (SIGKILL harness)")
struct ItemCrashHarnessTests {
    /// What the parent knows of an item: its secret's seed and length, and its accessibility.
    struct Expected: Equatable {
        var accessibility: String
        var secretSeed: UInt64
        var length: Int
    }

    @Test("SIGKILL during item adds, updates and deletes: none lost, none half written, none invented")
    func killsDuringItemWrites() throws {
        let worker = try #require(SQLiteCrashHarnessTests.worker, "CrashWorker is not built next to the tests")
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["DP_ITEM_KILLS"].flatMap(Int.init) ?? 25
        let seed = environment["DP_CRASH_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        print("ITEM-CRASH-HARNESS seed \(seed), \(kills) kills")
        var random = SystemRandomNumberGenerator()
        let root = try SQLiteCrashHarnessTests.harnessStore("dpik", seed: seed)
        defer { try? FileManager.default.removeItem(at: root) }
        var acknowledged: [Int: Expected] = [:]
        var totals = (changes: 0, inFlight: 0, inMove: 0)
        for round in 0..<kills {
            let roundSeed = seed &* 1_000_003 &+ UInt64(round)
            let run = try SQLiteCrashHarnessTests.runAndKill(worker, directory: root, seed: roundSeed,
                                                             delay: Int.random(in: 20...400, using: &random), mode: "items")
            let context = "seed \(seed) round \(round) (worker seed \(roundSeed))"
            try #require(run.killed, "\(context): the worker ended by itself: \(run.lines.suffix(3))")
            var before = acknowledged
            var after = acknowledged
            var inFlight = false
            var inMove = false
            for line in run.lines {
                let words = line.split(separator: " ").map(String.init)
                if words.first == "B", words.count >= 3, let key = Int(words[2]) {
                    before = acknowledged
                    after = acknowledged
                    inFlight = true
                    inMove = words[1] == "move"
                    switch words[1] {
                    case "add": after[key] = Expected(accessibility: words[3], secretSeed: UInt64(words[4])!, length: Int(words[5])!)
                    case "update": after[key]?.secretSeed = UInt64(words[3])!; after[key]?.length = Int(words[4])!
                    case "delete": after[key] = nil
                    case "move": after[key]?.accessibility = words[3]
                    default: Issue.record("\(context): unknown line \(line)")
                    }
                } else if line == "A" {
                    acknowledged = after
                    inFlight = false
                    totals.changes += 1
                }
            }
            if inFlight { totals.inFlight += 1 }
            if inFlight && inMove { totals.inMove += 1 }

            let store = try ProtectedStore(directory: root, configuration: DeviceConfiguration(passcodeCost: .minimal))
            try store.device.unlock(passcode: "1234")
            let keychain = store.keychain
            let search = try keychain.items(matching: ["kind": "harness"])
            #expect(search.isComplete, "\(context)")
            var found: [Int: Expected] = [:]
            for item in search.items {
                let key = try #require(item.attributes["key"].flatMap(Int.init))
                #expect(found[key] == nil, "\(context): item \(key) twice")
                let secret = try keychain.secret(ofItemWithID: item.id)
                let bytes = secret.withUnsafeBytes { Data($0) }
                // Which of the expected states the secret is (its seed cannot be read back: compare with both).
                var state = Expected(accessibility: item.accessibility.rawValue, secretSeed: 0, length: bytes.count)
                for candidate in [before[key], after[key], acknowledged[key]].compactMap({ $0 })
                where Data(SplitMix64.bytes(count: candidate.length, seed: candidate.secretSeed)) == bytes {
                    state.secretSeed = candidate.secretSeed
                }
                found[key] = state
            }
            let matchesAfter = found == after
            let matchesBefore = found == before
            #expect(matchesAfter || (inFlight && matchesBefore), "\(context): items lost, half written or invented")
            guard matchesAfter || (inFlight && matchesBefore) else { return }
            acknowledged = matchesAfter ? after : before
        }
        print("ITEM-CRASH-HARNESS seed \(seed): \(kills) kills survived, \(totals.changes) acknowledged changes, \(totals.inFlight) kills inside a change (\(totals.inMove) inside a move between domains); 0 lost, 0 half written, none twice")
    }
}
